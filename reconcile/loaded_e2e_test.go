package reconcile_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/skep-cd/skep/appset"
)

// A caller that waits for Loaded (the readiness probe, a test) may ask
// for a sync at once: the application's worker exists by then.
func TestAnApplicationTakesRequestsAsSoonAsTheSetIsLoaded(t *testing.T) {
	e := newEnv(t)
	apps := writeFile(t, t.TempDir(), "apps.yaml", appSet(e.app("web", false)))
	for range 20 {
		ctrl := e.controller(t, appset.FileSource{Path: apps})
		run(t, ctrl)
		// Asked the moment it turns true, not at a poll's next step.
		deadline := time.Now().Add(time.Minute)
		for !ctrl.Loaded() {
			if time.Now().After(deadline) {
				t.Fatal("the app set was not loaded within a minute")
			}
			runtime.Gosched()
		}
		if err := ctrl.Refresh(t.Context(), "web"); err != nil {
			t.Fatalf("refresh right after the set was loaded: %v", err)
		}
	}
}

package reconcile_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/outcome"
)

// TestWaitingWorkersHoldNoGoroutine: applications between two ticks hold
// no goroutine each, so that a large app set at rest costs neither stacks
// nor a wake-up of a worker and a runner per tick.
func TestWaitingWorkersHoldNoGoroutine(t *testing.T) {
	const n = 100
	e := newSerialEnv(t) // it counts the process's goroutines
	e.repo.Commit(t, "main", map[string]string{"README": "nothing to deploy here\n"})
	var apps []string
	for i := range n {
		// A path the commit lacks: each application stalls at its first
		// reconcile, writes nothing, and waits an hour for the next.
		app := strings.Replace(e.app(fmt.Sprintf("idle%03d", i), false), "    release: "+e.ns+"\n",
			fmt.Sprintf("    release: %s-%03d\n", e.ns, i), 1)
		app = strings.Replace(app, "      revision: main\n", "      revision: main\n      path: missing\n", 1)
		apps = append(apps, strings.Replace(app, "interval: 10s", "interval: 1h", 1))
	}
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(apps...))})
	before := runtime.NumGoroutine()
	run(t, ctrl)
	harness.Eventually(t, 2*time.Minute, func(context.Context) (bool, string) {
		for i := range n {
			name := fmt.Sprintf("idle%03d", i)
			if st, _ := ctrl.Statuses().Get(name); st.LastErrorClass != outcome.Stalled {
				return false, fmt.Sprintf("%s: %+v", name, st)
			}
		}
		return true, ""
	})
	// The stalled reconciles' goroutines end just after their status.
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		grew := runtime.NumGoroutine() - before
		return grew < n/2, fmt.Sprintf("%d goroutines more than before the controller ran, with %d applications waiting", grew, n)
	})
}

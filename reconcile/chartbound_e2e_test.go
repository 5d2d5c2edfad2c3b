package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
)

// A chart whose templates run into a render bound fails the same way for
// the same inputs: later ticks of that commit are not rendered again (a
// template that runs to its time bound would cost that much CPU on every
// tick), the failure is reported once, and the next commit renders afresh.
func TestAChartThatRunsIntoItsBoundIsNotRenderedAgainForTheSameInputs(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	files := chartFiles(port, e.v1, 1)
	good := files["charts/web/templates/web.yaml"]
	files["charts/web/templates/web.yaml"] = "{{- range until 1000 }}{{ range until 1000 }}{{ range until 1000 }}{{ end }}{{ end }}{{ end }}\n" + good
	runaway := e.repo.Commit(t, "main", files)
	obs := &quietObserver{}
	ctrl := e.controllerWith(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.chartApp("web")))}, reconcile.Options{Observer: obs})
	run(t, ctrl)
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Revision == runaway && s.LastError != "" })
	if st.LastErrorClass != "stalled" || !strings.Contains(st.LastError, "steps") {
		t.Fatalf("runaway chart: %q (%s), want a stalled error naming the step bound", st.LastError, st.LastErrorClass)
	}
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		_ = ctrl.Refresh(t.Context(), "web")
		n, quiet := obs.last()
		return quiet, fmt.Sprintf("%d reconciles, none without a render of the same inputs", n)
	})
	if st, _ := ctrl.Statuses().Get("web"); st.LastErrorClass != "stalled" || !strings.Contains(st.LastError, "steps") {
		t.Errorf("status after a tick without a render = %q (%s), want the same stalled error", st.LastError, st.LastErrorClass)
	}
	failed := 0
	for _, ev := range e.events.of(notify.SyncFailed) {
		if ev.Revision == runaway {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d sync-failed events for the runaway commit, want 1", failed)
	}

	// A fixing commit renders and deploys.
	e.repo.Commit(t, "main", map[string]string{"charts/web/templates/web.yaml": good})
	e.waitImage(t, e.v1, 2*time.Minute)
}

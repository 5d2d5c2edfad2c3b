package cli_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/harness"
)

// A controller restarted on the same data directory still reports the
// last sync the one before it made, from the history store: what it wrote
// and who asked, not "none". The history keeps no trigger, so there is
// none until the next sync.
func TestCLIRestartedControllerReportsTheLastSyncItRecorded(t *testing.T) {
	e := startController(t)
	first := e.repo.Head(t, "main")
	e.ok(t, "app", "sync", "web", "--wait")
	before := e.appJSON(t).Application.LastApplied
	if before == nil || before.Revision != first || before.Actor != "admin" || before.Trigger != "sync" {
		t.Fatalf("last sync before the restart = %+v, want admin's sync of %.12s", before, first)
	}

	e.stop()
	launch(t, e, filepath.Dir(e.apps), e.apps, "--appset-interval", "2s")
	// Once the new controller reconciled the application (finding nothing
	// to do), its status is the one it reports from then on.
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		a := e.appJSON(t).Application
		return a.LastReconcile != nil && a.Sync == "synced", fmt.Sprintf("sync %s, last reconcile %v", a.Sync, a.LastReconcile)
	})
	after := e.appJSON(t).Application.LastApplied
	if after == nil || after.Revision != first || after.Actor != "admin" || after.Trigger != "" || after.At.IsZero() || after.At.After(before.At) {
		t.Fatalf("last sync after the restart = %+v, want admin's sync of %.12s as recorded (at or before %s, no trigger)", after, first, before.At)
	}
	out := e.ok(t, "app", "get", "web")
	if flat := strings.Join(strings.Fields(out), " "); !strings.Contains(flat, "Last sync: "+first[:12]+" at ") || !strings.Contains(flat, "by admin") {
		t.Errorf("app get after the restart does not show admin's sync:\n%s", out)
	}
}

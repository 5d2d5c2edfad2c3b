package reconcile_test

import (
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
)

// The status's last sync counts every sync that wrote the release and
// names what started it: the install the controller made of the commit it
// found, a push webhook's refresh, and a sync someone asked for.
func TestLastSyncNamesWhatStartedEachSync(t *testing.T) {
	e := newEnv(t)
	first := e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(harness.FreePort(t)), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	// An hour's interval: after the first tick only the webhook and the
	// request make the application reconcile.
	app := strings.Replace(e.app("web", true), "interval: 10s", "interval: 1h", 1)
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(app))})
	run(t, ctrl)

	st := waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool { return s.LastSync.Revision == first })
	if got := st.LastSync; got.Trigger != reconcile.TriggerGit || got.Actor != "" || got.At.IsZero() {
		t.Errorf("last sync after the install = %+v, want trigger git, no actor, a time", got)
	}

	second := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
	refreshed := ctrl.RefreshRepository(t.Context(), func(repo, _ string) bool { return repo == e.repo.URL })
	if len(refreshed.Applications) != 1 {
		t.Fatalf("RefreshRepository refreshed %+v, want web", refreshed)
	}
	st = waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool { return s.LastSync.Revision == second })
	if got := st.LastSync; got.Trigger != reconcile.TriggerWebhook || got.Actor != "" {
		t.Errorf("last sync after the push = %+v, want trigger webhook, no actor", got)
	}

	before := st.LastSync.At
	if _, err := ctrl.Sync(notify.WithActor(t.Context(), "alice"), "web", reconcile.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	st = waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool { return s.LastSync.At.After(before) })
	if got := st.LastSync; got.Trigger != reconcile.TriggerSync || got.Actor != "alice" || got.Revision != second {
		t.Errorf("last sync after alice's sync = %+v, want trigger sync by alice at %s", got, second)
	}
}

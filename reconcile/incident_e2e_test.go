package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/wire"
)

// receiver is a local webhook receiver: every event POSTed to it.
type receiver struct {
	mu     sync.Mutex
	events []wire.Event
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var e wire.Event
	if err := json.NewDecoder(req.Body).Decode(&e); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// of returns the events of type t received so far.
func (r *receiver) of(t notify.EventType) []wire.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []wire.Event
	for _, e := range r.events {
		if e.Type == string(t) {
			out = append(out, e)
		}
	}
	return out
}

// withReceiver registers on e a webhook notifier that gathers incidents
// for window, POSTing to a local receiver it returns.
func (e *env) withReceiver(t *testing.T, window time.Duration) *receiver {
	t.Helper()
	got := &receiver{}
	srv := httptest.NewServer(got)
	t.Cleanup(srv.Close)
	w, err := notify.NewWebhook(notify.WebhookOptions{Name: "alerts", URL: srv.URL, Delivery: notify.Delivery{IncidentWindow: window}})
	if err != nil {
		t.Fatal(err)
	}
	runNotifier(t, w)
	e.notifiers = append(e.notifiers, w)
	return got
}

// Five applications whose images come from one registry, which goes down
// as a commit moves them all to a new image: each sync fails naming the
// registry, the history keeps all five failures, and the local receiver
// gets one incident naming the five, then, once the registry is back and
// they run, one recovery.
func TestFiveApplicationsWhoseRegistryFailsAreOneIncident(t *testing.T) {
	e := newEnv(t)
	reg := harness.StartRegistry(t)
	v1 := reg.Push(t, e.cli, e.v1, "skep-shared", "v1")
	v2 := reg.Push(t, e.cli, e.v2, "skep-shared", "v2")
	// The engine keeps what it pushed: without the local tag, a task of v2
	// must pull it from the registry.
	if _, err := e.cli.ImageRemove(t.Context(), v2, image.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	got := e.withReceiver(t, 20*time.Second)
	// Swarm goes on restarting the tasks of an update that failed
	// (failure_action: continue), so the release runs once the registry
	// answers again.
	compose := webOnly("${IMAGE}", "", "      update_config: {failure_action: continue}\n")
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose, ".env": "IMAGE=" + v1 + "\n"})
	var apps []string
	var names []string
	for i := 1; i <= 5; i++ {
		name := fmt.Sprintf("web%d", i)
		release := fmt.Sprintf("%s-%d", e.ns, i)
		harness.CleanupStack(t, e.cli, release)
		app := strings.Replace(e.app(name, true), "    release: "+e.ns+"\n", "    release: "+release+"\n", 1)
		app = strings.Replace(app, "    syncPolicy:\n", "    syncPolicy:\n      wait: true\n      timeout: 60s\n", 1)
		apps, names = append(apps, app), append(names, name)
	}
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(apps...))})
	run(t, ctrl)
	for _, name := range names {
		waitStatus(t, ctrl, name, 3*time.Minute, func(s reconcile.AppStatus) bool { return s.Health == health.Healthy })
	}

	reg.Fail(http.StatusServiceUnavailable)
	moved := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + v2 + "\n"})
	for _, name := range names {
		if err := ctrl.Refresh(t.Context(), name); err != nil {
			t.Fatal(err)
		}
	}
	shared := "registry " + reg.Host
	harness.Eventually(t, 3*time.Minute, func(context.Context) (bool, string) {
		n := 0
		for _, f := range e.events.of(notify.SyncFailed) {
			if f.Revision == moved && f.Shared == shared {
				n++
			}
		}
		return n >= 5, fmt.Sprintf("%d sync-failed events naming %s", n, shared)
	})
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		return len(got.of(notify.IncidentOpened)) > 0, "no incident received"
	})
	opened := got.of(notify.IncidentOpened)
	if len(opened) != 1 || opened[0].Shared != shared || !strings.Contains(opened[0].Message, "5 applications failed") {
		t.Errorf("incidents received = %+v, want one naming %s and the five applications", opened, shared)
	}
	for _, name := range names {
		if !strings.Contains(opened[0].Message, name) {
			t.Errorf("incident %q does not name %s", opened[0].Message, name)
		}
	}
	if n := len(got.of(notify.SyncFailed)); n != 0 {
		t.Errorf("the receiver got %d sync-failed events besides the incident, want none", n)
	}

	reg.Heal()
	harness.Eventually(t, 3*time.Minute, func(context.Context) (bool, string) {
		return len(got.of(notify.IncidentResolved)) > 0, "no recovery received"
	})
	if resolved := got.of(notify.IncidentResolved); len(resolved) != 1 || resolved[0].Shared != shared {
		t.Errorf("recoveries received = %+v, want one for %s", resolved, shared)
	}
	if n := len(got.of(notify.SyncSucceeded)); n != 5 {
		// The first deploys' five; the recoveries are folded into the one.
		t.Errorf("the receiver got %d sync-succeeded events, want the first deploys' 5 only", n)
	}
	failed := slices.DeleteFunc(e.events.of(notify.SyncFailed), func(f notify.Event) bool { return f.Revision != moved })
	if len(failed) < 5 {
		t.Errorf("the history keeps %d failures of the move, want all five", len(failed))
	}
}

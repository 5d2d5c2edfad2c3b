package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	dswarm "github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/store"
	skepswarm "github.com/skep-cd/skep/swarm"
	"github.com/skep-cd/skep/wire"
)

// live is one test's real controller on the real swarm, behind the API.
type live struct {
	*testServer
	cli    *client.Client
	repo   *harness.Repo
	ns     string
	v1, v2 string
	ctrl   *reconcile.Controller
}

func e2eCompose(port uint32) string {
	return fmt.Sprintf(`services:
  web:
    image: ${IMAGE}
    privileged: true
    deploy:
      endpoint_mode: dnsrr
      replicas: 1
    ports:
      - target: 8080
        published: %d
        mode: host
`, port)
}

// startLive runs a controller with a store, an event stream and the API
// over a real git server and the real swarm. Applications: web (manual,
// deployed by the test) and db (never synced), both on long intervals so
// that only requests and webhooks make them reconcile.
func startLive(t *testing.T) *live {
	t.Helper()
	cli := harness.RequireSwarm(t)
	git := harness.StartGitServer(t, harness.GitServerOptions{})
	l := &live{
		cli: cli, ns: harness.Name(t, "api"),
		v1: harness.TestImage(t, cli, harness.ImageOptions{Version: "v1"}),
		v2: harness.TestImage(t, cli, harness.ImageOptions{Version: "v2"}),
	}
	harness.CleanupStack(t, cli, l.ns)
	harness.CleanupStack(t, cli, l.ns+"-db")
	l.repo = git.CreateRepo(t, "app")
	l.repo.Commit(t, "main", map[string]string{"compose.yaml": e2eCompose(harness.FreePort(t)), ".env": "IMAGE=" + l.v1 + "\n"})
	apps := fmt.Sprintf(`apiVersion: skep/v1
applications:
  - name: web
    release: %[1]s
    source: {repo: %[2]s, revision: main}
    syncPolicy: {automated: false, interval: 1h, resolveImage: never}
  - name: db
    release: %[1]s-db
    source: {repo: %[2]s, revision: main}
    syncPolicy: {automated: false, interval: 1h, resolveImage: never}
`, l.ns, l.repo.URL)
	appsFile := filepath.Join(t.TempDir(), "apps.yaml")
	if err := os.WriteFile(appsFile, []byte(apps), 0o644); err != nil {
		t.Fatal(err)
	}

	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	gitCache, err := gitsource.New(gitsource.Options{Dir: t.TempDir(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := skepswarm.Connect(t.Context(), skepswarm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close() })
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), store.FileName), store.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	broker := notify.NewBroker(notify.BrokerOptions{Logger: logger})
	recorder := notify.NewRecorder(notify.RecorderOptions{Store: db, Publish: broker, Logger: logger})
	var reg notify.Registry
	reg.Register(recorder)
	metrics := api.NewMetrics(api.MetricsOptions{})
	l.ctrl, err = reconcile.New(reconcile.Options{
		ControllerID: harness.Name(t, "ctl"), AppSet: appset.FileSource{Path: appsFile}, AppSetInterval: time.Hour,
		Git: gitCache, Destinations: map[string]reconcile.Remote{"": {Engine: engine}}, Notifier: &reg, Logger: logger, Observer: metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := api.NewWebhooks([]api.WebhookSpec{{Provider: api.ProviderGeneric, Secret: wire.NewToken("hook-secret")}}, api.WebhooksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Reconciler: api.NewController(l.ctrl), Authorizer: testTokens(t), Metrics: metrics, Webhooks: hooks,
		Broker: broker, EventLog: db, Syncs: db, Logger: logger, Heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); _ = l.ctrl.Run(ctx) }()
	go func() { defer wg.Done(); _ = recorder.Run(ctx) }()
	go func() { defer wg.Done(); srv.Run(ctx) }()
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		broker.Close()
		ts.Close()
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("controller did not stop within 30s")
		}
	})
	l.testServer = &testServer{Server: ts, api: srv, metrics: metrics}
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		status, _, body := l.call(t, "GET", "/readyz", "", nil)
		return status == 200, string(body)
	})
	return l
}

func (l *live) getJSON(t *testing.T, path, token string, v any) {
	t.Helper()
	status, _, body := l.call(t, "GET", path, token, nil)
	if status != 200 {
		t.Fatalf("GET %s = %d %s", path, status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

func (l *live) app(t *testing.T, name string) wire.Application {
	t.Helper()
	var d wire.ApplicationDetail
	l.getJSON(t, "/api/v1/applications/"+name, viewerToken, &d)
	return d.Application
}

// postSync posts to path and returns the queued sync's response.
func (l *live) postSync(t *testing.T, path, token string, body any) wire.SyncResponse {
	t.Helper()
	status, _, data := l.call(t, "POST", path, token, body)
	var resp wire.SyncResponse
	if status != http.StatusAccepted || json.Unmarshal(data, &resp) != nil || resp.ID == 0 {
		t.Fatalf("POST %s = %d %s, want 202 with a sync id", path, status, data)
	}
	return resp
}

// waitSync waits until sync id of app ended and returns its record.
func (l *live) waitSync(t *testing.T, name string, id uint64) wire.SyncRecord {
	t.Helper()
	var rec wire.SyncRecord
	harness.Eventually(t, 2*time.Minute, func(context.Context) (bool, string) {
		a := l.app(t, name)
		if a.LastSync == nil || a.LastSync.ID < id || a.LastSync.Outcome == wire.OutcomeRunning {
			return false, fmt.Sprintf("last sync %+v, phase %s", a.LastSync, a.Phase)
		}
		rec = *a.LastSync
		return true, ""
	})
	return rec
}

func (l *live) liveImage(t *testing.T) string {
	t.Helper()
	list, err := l.cli.ServiceList(t.Context(), dswarm.ServiceListOptions{Filters: filters.NewArgs(filters.Arg("name", l.ns+"_web"))})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.Spec.Name == l.ns+"_web" {
			return s.Spec.TaskTemplate.ContainerSpec.Image
		}
	}
	return ""
}

// eventsOf returns the kept events of app with type typ.
func (l *live) eventsOf(t *testing.T, app string, typ notify.EventType) []wire.EventItem {
	t.Helper()
	var list wire.EventList
	l.getJSON(t, "/api/v1/events?app="+app+"&type="+string(typ), viewerToken, &list)
	return list.Events
}

func TestEveryRouteAgainstARunningController(t *testing.T) {
	l := startLive(t)

	// An SSE client follows web's events from the start.
	streamed := make(chan wire.EventItem, 64)
	sctx, stopStream := context.WithCancel(t.Context())
	defer stopStream()
	req, _ := http.NewRequestWithContext(sctx, "GET", l.URL+"/api/v1/events?app=web", nil)
	req.Header.Set("Authorization", "Bearer "+viewerToken)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := l.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	go func() {
		sc := bufio.NewScanner(resp.Body)
		var id int64
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				fmt.Sscan(v, &id)
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				var item wire.EventItem
				if json.Unmarshal([]byte(v), &item.Event) == nil {
					item.ID = id
					streamed <- item
				}
			}
		}
	}()

	t.Run("list shows both applications out of sync with nothing running", func(t *testing.T) {
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			var list wire.ApplicationList
			l.getJSON(t, "/api/v1/applications", viewerToken, &list)
			ok := len(list.Applications) == 2
			for _, a := range list.Applications {
				ok = ok && a.Sync == "out-of-sync" && a.Services.Running == 0 && a.Health == wire.HealthUnknown
			}
			return ok, fmt.Sprintf("%+v", list)
		})
	})

	t.Run("diff plans an install of the web service", func(t *testing.T) {
		var d wire.Diff
		l.getJSON(t, "/api/v1/applications/web/diff", viewerToken, &d)
		if len(d.Releases) != 1 || d.Releases[0].Action != "install" || d.Revision != l.repo.Head(t, "main") {
			t.Errorf("diff = %+v, want an install at the head", d)
		}
	})

	first := l.repo.Head(t, "main")
	t.Run("a sync by a deployer deploys v1 and names the deployer", func(t *testing.T) {
		resp := l.postSync(t, "/api/v1/applications/web/sync", deployerToken, wire.SyncOptions{})
		rec := l.waitSync(t, "web", resp.ID)
		if rec.Outcome != wire.OutcomeSucceeded || rec.Actor != "ci" || rec.Revision != first {
			t.Fatalf("sync record = %+v, want succeeded by ci at %s", rec, first)
		}
		if img := l.liveImage(t); img != l.v1 {
			t.Errorf("live image after sync = %q, want %q", img, l.v1)
		}
		started, succeeded := l.eventsOf(t, "web", notify.SyncStarted), l.eventsOf(t, "web", notify.SyncSucceeded)
		if len(started) != 1 || started[0].Actor != "ci" || len(succeeded) != 1 || succeeded[0].Actor != "ci" {
			t.Errorf("events: started %+v, succeeded %+v; want one each by ci", started, succeeded)
		}
	})

	t.Run("get shows the release, its service and its running task", func(t *testing.T) {
		harness.Eventually(t, 2*time.Minute, func(context.Context) (bool, string) {
			var d wire.ApplicationDetail
			l.getJSON(t, "/api/v1/applications/web", viewerToken, &d)
			if len(d.Releases) != 1 || d.Releases[0].Revision != 1 || len(d.Releases[0].Services) != 1 {
				return false, fmt.Sprintf("%+v", d)
			}
			s := d.Releases[0].Services[0]
			running := 0
			for _, task := range s.Tasks {
				if task.State == "running" {
					running++
				}
			}
			return s.Running == 1 && s.Desired == 1 && running == 1 && d.Application.Services.Running == 1,
				fmt.Sprintf("service %+v", s)
		})
		// privileged is dropped, as docker stack deploy drops it; the API
		// says so.
		var d wire.ApplicationDetail
		l.getJSON(t, "/api/v1/applications/web", viewerToken, &d)
		if want := "ignoring unsupported options: privileged"; !slices.Contains(d.Application.Warnings, want) {
			t.Errorf("warnings = %q, want %q", d.Application.Warnings, want)
		}
	})

	second := l.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + l.v2 + "\n"})
	t.Run("a webhook push makes the controller re-read git at once", func(t *testing.T) {
		body := []byte(fmt.Sprintf(`{"repository":%q,"ref":"refs/heads/main"}`, l.repo.URL))
		status, answer := post(t, l.testServer, "/api/v1/webhooks/generic", body, map[string]string{"X-Skep-Signature": "sha256=" + hexSign(body, "hook-secret"), "X-Skep-Delivery": "push-1"})
		if status != http.StatusAccepted {
			t.Fatalf("webhook = %d %s", status, answer)
		}
		// The interval is an hour: only the webhook can make web see the commit.
		harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
			a := l.app(t, "web")
			return a.Revision == second && a.Sync == "out-of-sync", fmt.Sprintf("revision %s sync %s", a.Revision, a.Sync)
		})
		if img := l.liveImage(t); img != l.v1 {
			t.Errorf("a webhook on a manual application applied %q", img)
		}
	})

	t.Run("a refresh re-reads git without applying", func(t *testing.T) {
		before := l.app(t, "db").LastReconcile
		status, _, body := l.call(t, "POST", "/api/v1/applications/db/refresh", deployerToken, nil)
		if status != http.StatusAccepted {
			t.Fatalf("refresh = %d %s", status, body)
		}
		harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
			a := l.app(t, "db")
			return a.LastReconcile != nil && (before == nil || a.LastReconcile.After(*before)) && a.Revision == second,
				fmt.Sprintf("db %+v", a)
		})
	})

	t.Run("a second sync deploys v2", func(t *testing.T) {
		resp := l.postSync(t, "/api/v1/applications/web/sync", adminToken, nil)
		if rec := l.waitSync(t, "web", resp.ID); rec.Outcome != wire.OutcomeSucceeded || rec.Actor != "root" {
			t.Fatalf("sync = %+v, want succeeded by root", rec)
		}
		if img := l.liveImage(t); img != l.v2 {
			t.Errorf("live image = %q, want %q", img, l.v2)
		}
	})

	t.Run("history lists both revisions and the syncs with their actors", func(t *testing.T) {
		var h wire.History
		harness.Eventually(t, 10*time.Second, func(context.Context) (bool, string) {
			l.getJSON(t, "/api/v1/applications/web/history", viewerToken, &h)
			return len(h.Syncs) == 2, fmt.Sprintf("%+v", h)
		})
		revs := h.Releases[0].Revisions
		if len(revs) != 2 || revs[0].Commit != first || revs[0].Actor != "ci" || revs[1].Commit != second || revs[1].Actor != "root" {
			t.Errorf("revisions = %+v", revs)
		}
		if h.Syncs[0].Actor != "root" || h.Syncs[1].Actor != "ci" || h.Syncs[0].Outcome != "succeeded" {
			t.Errorf("store syncs (newest first) = %+v", h.Syncs)
		}
	})

	t.Run("a rollback redeploys revision 1 and holds the application there", func(t *testing.T) {
		resp := l.postSync(t, "/api/v1/applications/web/rollback", scopedToken, wire.RollbackOptions{Revision: 1})
		if resp.Revision != first {
			t.Errorf("rollback deploys %s, want %s", resp.Revision, first)
		}
		rec := l.waitSync(t, "web", resp.ID)
		if rec.Outcome != wire.OutcomeSucceeded || rec.Actor != "webteam" {
			t.Fatalf("rollback sync = %+v, want succeeded by webteam", rec)
		}
		if img := l.liveImage(t); img != l.v1 {
			t.Errorf("live image after rollback = %q, want %q", img, l.v1)
		}
		a := l.app(t, "web")
		if a.Held == nil || a.Held.Revision != first || a.Held.Actor != "webteam" || a.Sync != "synced" {
			t.Errorf("after rollback web = held %+v sync %s, want held at %s by webteam, synced", a.Held, a.Sync, first)
		}
		succeeded := l.eventsOf(t, "web", notify.SyncSucceeded)
		if last := succeeded[len(succeeded)-1]; last.Actor != "webteam" || last.Revision != first {
			t.Errorf("last sync-succeeded = %+v, want by webteam at %s", last, first)
		}
		// A refresh (a tick) compares with the held commit and changes nothing.
		l.call(t, "POST", "/api/v1/applications/web/refresh", deployerToken, nil)
		before := a.LastReconcile
		harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
			a := l.app(t, "web")
			return a.LastReconcile.After(*before), "no reconcile yet"
		})
		if a := l.app(t, "web"); a.Held == nil || a.Sync != "synced" || l.liveImage(t) != l.v1 {
			t.Errorf("a tick undid the rollback: %+v, image %s", a, l.liveImage(t))
		}
	})

	t.Run("unhold follows the branch again", func(t *testing.T) {
		status, _, body := l.call(t, "POST", "/api/v1/applications/web/unhold", deployerToken, nil)
		if status != http.StatusAccepted {
			t.Fatalf("unhold = %d %s", status, body)
		}
		harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
			a := l.app(t, "web")
			return a.Held == nil && a.Revision == second && a.Sync == "out-of-sync", fmt.Sprintf("%+v", a)
		})
	})

	t.Run("a dry-run sync plans and writes nothing", func(t *testing.T) {
		status, _, body := l.call(t, "POST", "/api/v1/applications/web/sync", deployerToken, wire.SyncOptions{DryRun: true, Revision: "main"})
		var resp wire.SyncResponse
		if status != 200 || json.Unmarshal(body, &resp) != nil || resp.Status != wire.SyncPlanned || resp.Diff == nil || resp.Diff.Releases[0].Action != "upgrade" {
			t.Fatalf("dry run = %d %s", status, body)
		}
		if status, _, _ := l.call(t, "POST", "/api/v1/applications/web/sync", deployerToken, wire.SyncOptions{Revision: "no-such-branch"}); status != 400 {
			t.Errorf("sync to an unknown revision = %d, want 400", status)
		}
	})

	t.Run("the scoped token sees only web, in the list and the events", func(t *testing.T) {
		var list wire.ApplicationList
		l.getJSON(t, "/api/v1/applications", scopedToken, &list)
		if len(list.Applications) != 1 || list.Applications[0].Name != "web" {
			t.Errorf("scoped list = %+v", list.Applications)
		}
		var events wire.EventList
		l.getJSON(t, "/api/v1/events", scopedToken, &events)
		for _, e := range events.Events {
			if e.Application != "web" {
				t.Errorf("scoped events include %+v", e)
			}
		}
		if status, _, _ := l.call(t, "GET", "/api/v1/applications/db", scopedToken, nil); status != 403 {
			t.Errorf("scoped get db = %d, want 403", status)
		}
	})

	t.Run("the stream carried the syncs with their actors", func(t *testing.T) {
		actors := map[string]bool{}
		deadline := time.After(10 * time.Second)
		for len(actors) < 3 {
			select {
			case e := <-streamed:
				if e.Type == string(notify.SyncSucceeded) {
					actors[e.Actor] = true
				}
				if e.Application != "web" || e.ID == 0 {
					t.Errorf("streamed %+v, want only web with ids", e)
				}
			case <-deadline:
				t.Fatalf("streamed sync-succeeded actors %v, want ci, root and webteam", actors)
			}
		}
	})

	t.Run("status, version, health and metrics answer", func(t *testing.T) {
		var st wire.ControllerStatus
		l.getJSON(t, "/api/v1/status", adminToken, &st)
		if !st.Ready || st.Applications != 2 || st.Details == nil || st.Details.Workers != 2 || st.Details.Swarm.NodeID == "" {
			t.Errorf("status = %+v", st)
		}
		var v wire.VersionInfo
		l.getJSON(t, "/api/v1/version", viewerToken, &v)
		if v.APIVersion != "v1" || len(v.Capabilities) == 0 {
			t.Errorf("version = %+v", v)
		}
		if status, _, _ := l.call(t, "GET", "/healthz", "", nil); status != 200 {
			t.Errorf("healthz = %d", status)
		}
		_, _, metrics := l.call(t, "GET", "/metrics", adminToken, nil)
		for _, want := range []string{`skep_reconcile_total{application="web",outcome="ok",swarm=""}`, `skep_sync_total{application="web",outcome="succeeded",swarm=""} 3`,
			`skep_webhook_deliveries_total{provider="generic",result="accepted"} 1`, `skep_sse_subscribers 1`} {
			if !strings.Contains(string(metrics), want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}

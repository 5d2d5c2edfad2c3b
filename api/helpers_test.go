package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/wire"
)

// fake is a Reconciler answering fixed values for the applications "web"
// and "db", and recording what it was asked with which actor.
type fake struct {
	mu      sync.Mutex
	calls   []string // "method app actor"
	pushes  []api.Push
	pushed  chan api.Push
	panicOn string
}

var t0 = time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)

func (f *fake) record(ctx context.Context, method, app string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, strings.TrimSpace(method+" "+app+" "+notify.ActorFrom(ctx)))
	if f.panicOn == method {
		panic("fake panics on " + method)
	}
}

func (f *fake) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fake) known(name string) error {
	if name != "web" && name != "db" {
		return api.ErrNotFound
	}
	return nil
}

func app(name string) wire.Application {
	t := t0
	fin := t0.Add(time.Second)
	return wire.Application{
		Name: name, Repo: "https://git.example.org/acme/" + name + ".git", TargetRevision: "main", Path: ".",
		Releases: []string{name}, Automated: true, Sync: "synced", Health: wire.HealthUnknown, Drift: []wire.DriftFinding{},
		Revision: strings.Repeat("a", 40), DeployedRevision: strings.Repeat("a", 40), Phase: wire.PhaseIdle,
		Services: wire.ServiceCounts{Services: 1, Running: 1, Desired: 1}, Plan: []string{name + ": unchanged"},
		LastReconcile: &t, LastSync: &wire.SyncRecord{ID: 3, Outcome: wire.OutcomeSucceeded, StartedAt: t0, FinishedAt: &fin, Actor: "alice"},
		LastApplied: &wire.AppliedSync{At: t0.Add(time.Minute), Revision: strings.Repeat("a", 40), Trigger: wire.TriggerDriftCorrection},
		Held:        &wire.Hold{Revision: strings.Repeat("b", 40), Actor: "alice", Since: t0},
	}
}

// frozen is the sync window that holds "db": it allows no manual sync.
var frozen = wire.SyncWindow{Kind: "deny", Schedule: "0 22 * * *", TimeZone: "Europe/Berlin", Duration: "8h0m0s",
	ManualSync: false, Message: "held by sync window deny 0 22 * * * (until 06:00 Europe/Berlin)"}

// appOf is app(name) with "db" held by the frozen window.
func appOf(name string) wire.Application {
	a := app(name)
	if name == "db" {
		w := frozen
		a.SyncWindow = &w
	} else {
		a.DependsOn, a.WaitingFor = []string{"db"}, []string{"db"}
		a.Generator, a.Path = "stacks", "stacks/web"
		a.Warnings = []string{"ignoring unsupported options: privileged"}
	}
	return a
}

func (f *fake) ListApplications(ctx context.Context) (wire.ApplicationList, error) {
	f.record(ctx, "list", "")
	return wire.ApplicationList{Applications: []wire.Application{appOf("web"), appOf("db")}}, nil
}

func (f *fake) Application(ctx context.Context, name string) (wire.ApplicationDetail, error) {
	f.record(ctx, "get", name)
	if err := f.known(name); err != nil {
		return wire.ApplicationDetail{}, err
	}
	at := t0
	return wire.ApplicationDetail{Application: appOf(name), Releases: []wire.Release{{
		Name: name, Revision: 2, Commit: strings.Repeat("a", 40), AppliedAt: &at,
		Services: []wire.Service{{Name: name + "_web", ID: "svc1", Image: "example/web:v1", Mode: "replicated", Desired: 1, Running: 1,
			Tasks: []wire.Task{{ID: "task1", Slot: 1, Node: "node1", State: "running", DesiredState: "running", UpdatedAt: t0}}}},
	}}}, nil
}

func (f *fake) Diff(ctx context.Context, name, revision string) (wire.Diff, error) {
	f.record(ctx, "diff", name)
	if err := f.known(name); err != nil {
		return wire.Diff{}, err
	}
	return wire.Diff{Application: name, Revision: strings.Repeat("a", 40), Releases: []wire.ReleasePlan{api.PlanView(plan.Release{
		Name: name, Action: plan.Upgrade, Reason: "image changed",
		Changes: []plan.Change{{Kind: plan.KindService, Name: "web", Op: plan.Update, Reason: "image",
			Fields: []plan.FieldDiff{{Path: "TaskTemplate.ContainerSpec.Image", Old: `"v1"`, New: `"v2"`}}}},
	})}}, nil
}

func (f *fake) History(ctx context.Context, name string) (wire.History, error) {
	f.record(ctx, "history", name)
	if err := f.known(name); err != nil {
		return wire.History{}, err
	}
	return wire.History{Application: name, Releases: []wire.ReleaseHistory{{Name: name, Revisions: []wire.Revision{
		{Number: 1, Commit: strings.Repeat("a", 40), AppliedAt: t0, Actor: "alice", Images: map[string]string{"web": "example/web:v1"}},
		{Number: 2, Commit: strings.Repeat("b", 40), AppliedAt: t0, Chart: &wire.RevisionChart{Name: "web", Version: "1.2.0",
			ValuesFiles: []string{"envs/testing/values.yaml"}, Requirements: []wire.RevisionRequirement{
				{Kind: "network", Name: "traefik-public", Description: "Overlay network shared with Traefik", AutoCreate: true},
				{Kind: "secret", Name: "tls-cert"}}}},
	}}}, Syncs: []wire.HistorySync{}}, nil
}

func (f *fake) Sync(ctx context.Context, name string, opts wire.SyncOptions) (wire.SyncResponse, error) {
	f.record(ctx, "sync", name)
	if err := f.known(name); err != nil {
		return wire.SyncResponse{}, err
	}
	if opts.Revision == "unknown" {
		return wire.SyncResponse{}, api.ErrInvalid
	}
	if name == "db" && !opts.DryRun {
		return wire.SyncResponse{}, fmt.Errorf("%w: application db is %s, which allows no manual sync", api.ErrConflict, frozen.Message)
	}
	if opts.DryRun {
		d, _ := f.Diff(ctx, name, opts.Revision)
		return wire.SyncResponse{Application: name, Status: wire.SyncPlanned, Revision: d.Revision, Diff: &d}, nil
	}
	return wire.SyncResponse{Application: name, Status: wire.SyncQueued, ID: 4, Revision: opts.Revision}, nil
}

func (f *fake) Rollback(ctx context.Context, name string, opts wire.RollbackOptions) (wire.SyncResponse, error) {
	f.record(ctx, "rollback", name)
	if err := f.known(name); err != nil {
		return wire.SyncResponse{}, err
	}
	return wire.SyncResponse{Application: name, Status: wire.SyncQueued, ID: 5, Revision: strings.Repeat("a", 40)}, nil
}

func (f *fake) Unhold(ctx context.Context, name string) error {
	f.record(ctx, "unhold", name)
	return f.known(name)
}

// Canary queues web's canary request; db runs no canary (409).
func (f *fake) Canary(ctx context.Context, name, action string) (wire.SyncResponse, error) {
	f.record(ctx, action, name)
	if err := f.known(name); err != nil {
		return wire.SyncResponse{}, err
	}
	if name == "db" {
		return wire.SyncResponse{}, fmt.Errorf("%w: no canary runs: application db", api.ErrConflict)
	}
	return wire.SyncResponse{Application: name, Status: wire.SyncQueued, Revision: strings.Repeat("b", 40)}, nil
}

func (f *fake) Refresh(ctx context.Context, name string) error {
	f.record(ctx, "refresh", name)
	return f.known(name)
}

// MatchPush names web or db for a push of a repository of that name, and
// the app set for one called apps; nothing else.
func (f *fake) MatchPush(push api.Push) api.Refreshed {
	for _, r := range push.Repositories {
		switch key := api.RepoKey(r); {
		case strings.HasSuffix(key, "/web"):
			return api.Refreshed{Applications: []string{"web"}}
		case strings.HasSuffix(key, "/db"):
			return api.Refreshed{Applications: []string{"db"}}
		case strings.HasSuffix(key, "/apps"):
			return api.Refreshed{AppSet: true}
		}
	}
	return api.Refreshed{}
}

func (f *fake) RefreshRepository(ctx context.Context, push api.Push) (api.Refreshed, error) {
	f.mu.Lock()
	f.pushes = append(f.pushes, push)
	f.mu.Unlock()
	if f.pushed != nil {
		select {
		case f.pushed <- push:
		case <-ctx.Done():
			return api.Refreshed{}, ctx.Err()
		}
	}
	return api.Refreshed{Applications: []string{"web"}}, nil
}

func (f *fake) Status(ctx context.Context) (wire.ControllerStatus, error) {
	f.record(ctx, "status", "")
	at := t0
	return wire.ControllerStatus{ControllerID: "test", Ready: true, Applications: 2,
		OrphanedReleases: []wire.OrphanedRelease{
			{Application: "db-old", Release: "db-old", Reason: "app set is empty; pruning held"},
			{Application: "web-old", Release: "web-old", Reason: "app set is empty; pruning held"},
		},
		Orphaned: []string{"db-old", "web-old"}, Pruned: []string{"db-gone", "web-gone"},
		AppSet:  wire.AppSetStatus{Source: "file apps.yaml", Revision: "sha256:abc", Loaded: true, LoadedAt: &at},
		Details: &wire.StatusDetails{Swarm: wire.SwarmInfo{NodeID: "node1"}, Git: wire.GitStats{ListRefs: 1}, Workers: 2}}, nil
}

func (f *fake) Ready(context.Context) error { return nil }

// tokens of the test server, by role.
const (
	adminToken    = "admin-secret"
	deployerToken = "deployer-secret"
	viewerToken   = "viewer-secret"
	scopedToken   = "scoped-secret" // deployer for web* only
)

func testTokens(t testing.TB) *api.Tokens {
	t.Helper()
	tokens, err := api.NewTokens(
		api.TokenSpec{Name: "root", Role: api.RoleAdmin, Digest: wire.NewToken(adminToken).Digest()},
		api.TokenSpec{Name: "ci", Role: api.RoleDeployer, Digest: wire.NewToken(deployerToken).Digest()},
		api.TokenSpec{Name: "eve", Role: api.RoleViewer, Digest: wire.NewToken(viewerToken).Digest()},
		api.TokenSpec{Name: "webteam", Role: api.RoleDeployer, Apps: []string{"web*"}, Digest: wire.NewToken(scopedToken).Digest()},
	)
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}

type testServer struct {
	*httptest.Server
	api     *api.Server
	fake    *fake
	metrics *api.Metrics
}

func newTestServer(t testing.TB, opts api.Options) *testServer {
	t.Helper()
	f := &fake{}
	if opts.Reconciler == nil {
		opts.Reconciler = f
	}
	if opts.Authorizer == nil {
		opts.Authorizer = testTokens(t)
	}
	if opts.Metrics == nil {
		opts.Metrics = api.NewMetrics(api.MetricsOptions{
			Applications: func() []api.AppState {
				return []api.AppState{{Name: "web", Sync: "synced", Artifacts: map[string]string{"web": wire.ArtifactWaiting}},
					{Name: "edge", Swarm: "prod", Sync: "out-of-sync", Health: "unknown"}}
			},
			Swarms: func() []api.SwarmState {
				return []api.SwarmState{{Name: "", Reachable: true}, {Name: "prod", Reachable: false}}
			},
			Version: "test", Commit: "abc",
		})
	}
	opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	s, err := api.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.Close()
		cancel()
		<-done
	})
	return &testServer{Server: ts, api: s, fake: f, metrics: opts.Metrics}
}

// call sends a request with token ("" = none) and returns status, headers
// and body.
func (s *testServer) call(t *testing.T, method, path, token string, body any) (int, http.Header, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		if b, ok := body.([]byte); ok {
			r = bytes.NewReader(b)
		} else {
			data, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			r = bytes.NewReader(data)
		}
	}
	req, err := http.NewRequest(method, s.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, data
}

func decodeError(t *testing.T, body []byte) wire.Error {
	t.Helper()
	var e wire.Error
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	return e
}

// Package apitest is a fake api.Reconciler for the tests of what sits
// around the API: the authorizers of package identity and the web UI. It
// knows two applications, web and db, answers every route with fixed
// values, and records each call with the actor its context names, so a
// test can tell who the server let through.
//
// It is for tests only and must never be imported by production code. A
// Reconciler is safe for concurrent use.
package apitest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/wire"
)

// Reconciler is the fake. The zero value is ready.
type Reconciler struct {
	mu    sync.Mutex
	calls []string
}

// The compiler keeps the fake in step with the seam.
var _ api.Reconciler = (*Reconciler)(nil)

// Calls returns "method app actor" for each call that reached the fake,
// oldest first; the slice is the caller's.
func (f *Reconciler) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// record notes a call, and answers ErrNotFound for an application the
// fake does not know ("" names none and is no error).
func (f *Reconciler) record(ctx context.Context, method, app string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, strings.TrimSpace(method+" "+app+" "+notify.ActorFrom(ctx)))
	if app != "" && app != "web" && app != "db" {
		return fmt.Errorf("%w: no application %q", api.ErrNotFound, app)
	}
	return nil
}

// application is the list entry of name.
func application(name string) wire.Application {
	return wire.Application{Name: name, Repo: "https://git.example.test/acme/" + name + ".git", TargetRevision: "main", Path: ".",
		Releases: []string{name}, Sync: "synced", Health: "healthy", Drift: []wire.DriftFinding{}, Phase: wire.PhaseIdle,
		Revision: strings.Repeat("a", 40), DeployedRevision: strings.Repeat("a", 40), Services: wire.ServiceCounts{Services: 1, Running: 1, Desired: 1}}
}

func (f *Reconciler) ListApplications(ctx context.Context) (wire.ApplicationList, error) {
	_ = f.record(ctx, "list", "")
	return wire.ApplicationList{Applications: []wire.Application{application("web"), application("db")}}, nil
}

func (f *Reconciler) Application(ctx context.Context, name string) (wire.ApplicationDetail, error) {
	if err := f.record(ctx, "get", name); err != nil {
		return wire.ApplicationDetail{}, err
	}
	return wire.ApplicationDetail{Application: application(name), Releases: []wire.Release{}}, nil
}

func (f *Reconciler) Diff(ctx context.Context, name, _ string) (wire.Diff, error) {
	if err := f.record(ctx, "diff", name); err != nil {
		return wire.Diff{}, err
	}
	return wire.Diff{Application: name, Revision: strings.Repeat("a", 40), Releases: []wire.ReleasePlan{}}, nil
}

func (f *Reconciler) History(ctx context.Context, name string) (wire.History, error) {
	if err := f.record(ctx, "history", name); err != nil {
		return wire.History{}, err
	}
	return wire.History{Application: name, Releases: []wire.ReleaseHistory{}, Syncs: []wire.HistorySync{}}, nil
}

func (f *Reconciler) Sync(ctx context.Context, name string, opts wire.SyncOptions) (wire.SyncResponse, error) {
	method := "sync"
	if opts.DryRun {
		method = "plan"
	}
	if err := f.record(ctx, method, name); err != nil {
		return wire.SyncResponse{}, err
	}
	if opts.DryRun {
		d := wire.Diff{Application: name, Revision: strings.Repeat("a", 40), Releases: []wire.ReleasePlan{}}
		return wire.SyncResponse{Application: name, Status: wire.SyncPlanned, Revision: d.Revision, Diff: &d}, nil
	}
	return wire.SyncResponse{Application: name, Status: wire.SyncQueued, ID: 1, Revision: strings.Repeat("a", 40)}, nil
}

func (f *Reconciler) Rollback(ctx context.Context, name string, _ wire.RollbackOptions) (wire.SyncResponse, error) {
	if err := f.record(ctx, "rollback", name); err != nil {
		return wire.SyncResponse{}, err
	}
	return wire.SyncResponse{Application: name, Status: wire.SyncQueued, ID: 2, Revision: strings.Repeat("a", 40)}, nil
}

func (f *Reconciler) Unhold(ctx context.Context, name string) error {
	return f.record(ctx, "unhold", name)
}

// Canary queues web's canary request; db runs no canary.
func (f *Reconciler) Canary(ctx context.Context, name, action string) (wire.SyncResponse, error) {
	if err := f.record(ctx, action, name); err != nil {
		return wire.SyncResponse{}, err
	}
	if name == "db" {
		return wire.SyncResponse{}, fmt.Errorf("%w: no canary runs: application db", api.ErrConflict)
	}
	return wire.SyncResponse{Application: name, Status: wire.SyncQueued, Revision: strings.Repeat("b", 40)}, nil
}

func (f *Reconciler) Refresh(ctx context.Context, name string) error {
	return f.record(ctx, "refresh", name)
}

// RefreshRepository records the push's first repository as its app.
func (f *Reconciler) RefreshRepository(ctx context.Context, push api.Push) (api.Refreshed, error) {
	got := f.MatchPush(push)
	for _, app := range got.Applications {
		_ = f.record(ctx, "webhook", app)
	}
	return got, nil
}

// MatchPush names web or db for a push of the repository of that name.
func (f *Reconciler) MatchPush(push api.Push) api.Refreshed {
	for _, name := range []string{"web", "db"} {
		if push.Matches("https://git.example.test/acme/"+name+".git", "main") {
			return api.Refreshed{Applications: []string{name}}
		}
	}
	return api.Refreshed{}
}

func (f *Reconciler) Status(context.Context) (wire.ControllerStatus, error) {
	return wire.ControllerStatus{ControllerID: "apitest", Ready: true, Applications: 2, OrphanedReleases: []wire.OrphanedRelease{},
		Orphaned: []string{}, Pruned: []string{}, Swarms: []wire.Swarm{{Name: "", Reachable: true}}}, nil
}

func (f *Reconciler) Ready(context.Context) error { return nil }

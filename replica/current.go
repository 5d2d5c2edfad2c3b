package replica

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/wire"
)

// Current is the api.Reconciler and api.Reviews of whichever controller
// the replica runs now: the one its term runs while it leads (Set), none
// while it stands by, when every call answers 503 (the Front forwards
// them to the leader before they get here) but Status and Ready, which
// say what a standby is. It is safe for concurrent use; the zero value is
// not: use NewCurrent.
type Current struct {
	id    string
	ready func() error
	term  atomic.Pointer[running]
}

// running is the controller of a term and its plans of pull requests.
type running struct {
	rec     api.Reconciler
	reviews api.Reviews
}

// NewCurrent returns a Current with no controller; id is the controller
// id, and ready the readiness of a standby (Replica.Ready).
func NewCurrent(id string, ready func() error) *Current {
	return &Current{id: id, ready: ready}
}

// The compiler keeps Current in step with what the API asks.
var (
	_ api.Reconciler = (*Current)(nil)
	_ api.Reviews    = (*Current)(nil)
)

// Set makes rec the controller that answers, and reviews its plans of
// pull requests, until Clear.
func (c *Current) Set(rec api.Reconciler, reviews api.Reviews) {
	c.term.Store(&running{rec: rec, reviews: reviews})
}

// Clear leaves no controller to answer.
func (c *Current) Clear() { c.term.Store(nil) }

// errStandby is what a standby's Current answers.
var errStandby = fmt.Errorf("%w: this replica does not lead now; ask the leader", api.ErrUnavailable)

// get returns the controller that answers, or why none does.
func (c *Current) get() (api.Reconciler, error) {
	if t := c.term.Load(); t != nil {
		return t.rec, nil
	}
	return nil, errStandby
}

// Review implements api.Reviews.
func (c *Current) Review(pr api.PullRequest) ([]string, error) {
	if t := c.term.Load(); t != nil {
		return t.reviews.Review(pr)
	}
	return nil, errStandby
}

// PullRequests implements api.Reviews.
func (c *Current) PullRequests(app string) ([]wire.PullRequest, error) {
	if t := c.term.Load(); t != nil {
		return t.reviews.PullRequests(app)
	}
	return nil, errStandby
}

// Plan implements api.Reviews.
func (c *Current) Plan(ctx context.Context, app, revision string) (wire.Proposal, error) {
	if t := c.term.Load(); t != nil {
		return t.reviews.Plan(ctx, app, revision)
	}
	return wire.Proposal{}, errStandby
}

// ListApplications implements api.Reconciler.
func (c *Current) ListApplications(ctx context.Context) (wire.ApplicationList, error) {
	rec, err := c.get()
	if err != nil {
		return wire.ApplicationList{}, err
	}
	return rec.ListApplications(ctx)
}

// Application implements api.Reconciler.
func (c *Current) Application(ctx context.Context, name string) (wire.ApplicationDetail, error) {
	rec, err := c.get()
	if err != nil {
		return wire.ApplicationDetail{}, err
	}
	return rec.Application(ctx, name)
}

// Diff implements api.Reconciler.
func (c *Current) Diff(ctx context.Context, name, revision string) (wire.Diff, error) {
	rec, err := c.get()
	if err != nil {
		return wire.Diff{}, err
	}
	return rec.Diff(ctx, name, revision)
}

// History implements api.Reconciler.
func (c *Current) History(ctx context.Context, name string) (wire.History, error) {
	rec, err := c.get()
	if err != nil {
		return wire.History{}, err
	}
	return rec.History(ctx, name)
}

// Sync implements api.Reconciler.
func (c *Current) Sync(ctx context.Context, name string, opts wire.SyncOptions) (wire.SyncResponse, error) {
	rec, err := c.get()
	if err != nil {
		return wire.SyncResponse{}, err
	}
	return rec.Sync(ctx, name, opts)
}

// Rollback implements api.Reconciler.
func (c *Current) Rollback(ctx context.Context, name string, opts wire.RollbackOptions) (wire.SyncResponse, error) {
	rec, err := c.get()
	if err != nil {
		return wire.SyncResponse{}, err
	}
	return rec.Rollback(ctx, name, opts)
}

// Unhold implements api.Reconciler.
func (c *Current) Unhold(ctx context.Context, name string) error {
	rec, err := c.get()
	if err != nil {
		return err
	}
	return rec.Unhold(ctx, name)
}

// Canary implements api.Reconciler.
func (c *Current) Canary(ctx context.Context, name, action string) (wire.SyncResponse, error) {
	rec, err := c.get()
	if err != nil {
		return wire.SyncResponse{}, err
	}
	return rec.Canary(ctx, name, action)
}

// Refresh implements api.Reconciler.
func (c *Current) Refresh(ctx context.Context, name string) error {
	rec, err := c.get()
	if err != nil {
		return err
	}
	return rec.Refresh(ctx, name)
}

// RefreshRepository implements api.Reconciler.
func (c *Current) RefreshRepository(ctx context.Context, push api.Push) (api.Refreshed, error) {
	rec, err := c.get()
	if err != nil {
		return api.Refreshed{}, err
	}
	return rec.RefreshRepository(ctx, push)
}

// MatchPush implements api.Reconciler; with no controller it matches
// nothing.
func (c *Current) MatchPush(push api.Push) api.Refreshed {
	rec, err := c.get()
	if err != nil {
		return api.Refreshed{}
	}
	return rec.MatchPush(push)
}

// Status implements api.Reconciler; with no controller it is a standby's:
// the controller id and its readiness, no application.
func (c *Current) Status(ctx context.Context) (wire.ControllerStatus, error) {
	if rec, err := c.get(); err == nil {
		return rec.Status(ctx)
	}
	return wire.ControllerStatus{ControllerID: c.id, Ready: c.ready() == nil,
		OrphanedReleases: []wire.OrphanedRelease{}, Orphaned: []string{}, Pruned: []string{}}, nil
}

// Ready implements api.Reconciler: the controller's readiness while this
// replica leads, a standby's otherwise.
func (c *Current) Ready(ctx context.Context) error {
	if rec, err := c.get(); err == nil {
		return rec.Ready(ctx)
	}
	return c.ready()
}

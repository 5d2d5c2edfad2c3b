package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/filters"
	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
	"github.com/skep-cd/skep/syncpass"
	"github.com/skep-cd/skep/window"
)

// This file is what the API reads of the controller and asks of it, in
// the controller's own types; the API adapts them to its wire model.
// Nothing here decides who may do what: the API's guard did that. The
// actor comes from the context (notify.ActorFrom) and only labels what is
// recorded and raised. Errors wrap ErrUnknownApplication, ErrNotRecorded,
// ErrInvalidRequest or ErrUnavailable where a caller must tell them apart.

// Application returns the application called name in the running app set.
func (c *Controller) Application(name string) (appset.Application, error) {
	app, _, ok := c.appAt(name)
	if !ok {
		return appset.Application{}, fmt.Errorf("%w: %s", ErrUnknownApplication, name)
	}
	return app, nil
}

// GitStats returns the git cache's counters of remote calls.
func (c *Controller) GitStats() gitsource.Stats { return c.git.Stats() }

// LiveServices lists this controller's services, of one application when
// app is not "", with running and desired task counts: from the
// destination's live snapshot (at most its relist interval behind the
// swarm, and no Engine call, so API readers cost the Engine nothing), or in
// one Engine call when there is no readable snapshot. A destination known
// not to answer is skipped at once (the error says so) rather than waited
// for.
func (c *Controller) LiveServices(ctx context.Context, app string) ([]dswarm.Service, error) {
	dests := destNames(c.dests)
	if app != "" {
		a, _, ok := c.appAt(app)
		if !ok {
			return nil, fmt.Errorf("%w: %s", ErrUnknownApplication, app)
		}
		dests = []string{a.Destination.Swarm}
	}
	var (
		out  []dswarm.Service
		errs []error
	)
	for _, name := range dests {
		d := c.dest(name)
		if err := d.down(); err != nil {
			errs = append(errs, err)
			continue
		}
		list, err := d.services(ctx, app)
		if err != nil {
			errs = append(errs, fmt.Errorf("list services of controller %s on %s: %w", c.id, swarm.Describe(name), err))
			continue
		}
		out = append(out, list...)
	}
	return out, errors.Join(errs...)
}

// Converging says why the live view of application name does not yet
// show its last write done: the snapshot was taken before that write ended
// (a relist is asked for), or the swarm still rolls a service of its
// releases out or runs a task of an earlier spec. It is "" when the view
// shows it, and without a live snapshot, which has nothing to say. A
// caller waiting for a sync to take effect (skep app sync --wait) waits
// for "" as well as for the sync's end: the sync ends when its write did,
// and the snapshot API readers see follows. See
// TestConvergingUntilTheLiveViewShowsTheWrite.
func (c *Controller) Converging(name string) (string, error) {
	app, err := c.Application(name)
	if err != nil {
		return "", err
	}
	live := c.dest(app.Destination.Swarm).live
	if live == nil {
		return "", nil
	}
	snap := live.Current()
	if snap.ReadFailed() {
		return fmt.Sprintf("the live snapshot cannot be read: %v", snap.Err()), nil
	}
	if snap.TakenAt().IsZero() || !c.live.seen(app.Destination.Swarm, app.Name, snap.TakenAt(), false) {
		// No event may come to bring the relist that shows the write.
		live.Relist()
		return "the live snapshot does not show the last write yet", nil
	}
	for _, rel := range c.live.releases(app) {
		if why := cmp.Or(syncpass.Rollout(rel, snap), syncpass.Converged(rel, snap)); why != "" {
			return "release " + rel.Name + ": " + why, nil
		}
	}
	return "", nil
}

// Task is one task of an application's service, with the hostname of the
// node it was given ("" when it has none, or the node is not known).
type Task struct {
	dswarm.Task
	NodeName string
}

// LiveTasks lists the tasks of app's services, with their nodes' names,
// from the live snapshot as LiveServices does, else in one Engine call
// (and one more for the nodes).
func (c *Controller) LiveTasks(ctx context.Context, app string) ([]Task, error) {
	a, _, ok := c.appAt(app)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownApplication, app)
	}
	d := c.dest(a.Destination.Swarm)
	if err := d.down(); err != nil {
		return nil, err
	}
	if snap, ok := d.readable(); ok {
		var tasks []dswarm.Task
		for _, s := range snap.Services() {
			if ownedBy(s, d.owner, app) {
				tasks = append(tasks, snap.TasksOf(s.ID)...)
			}
		}
		return withNodeNames(tasks, snap.NodesByID()), nil
	}
	f := filters.NewArgs(filters.Arg("label", stack.LabelController+"="+d.owner),
		filters.Arg("label", stack.LabelApplication+"="+app))
	tasks, err := d.engine.TaskList(ctx, dswarm.TaskListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list tasks of application %s: %w", app, err)
	}
	nodes := map[string]dswarm.Node{}
	if lister, ok := d.engine.(interface {
		NodeList(context.Context, dswarm.NodeListOptions) ([]dswarm.Node, error)
	}); ok {
		// Without the names the tasks are still worth showing, by node id.
		list, _ := lister.NodeList(ctx, dswarm.NodeListOptions{})
		for _, n := range list {
			nodes[n.ID] = n
		}
	}
	return withNodeNames(tasks, nodes), nil
}

// withNodeNames pairs each task with its node's hostname.
func withNodeNames(tasks []dswarm.Task, nodes map[string]dswarm.Node) []Task {
	out := make([]Task, len(tasks))
	for i, t := range tasks {
		out[i] = Task{Task: t, NodeName: nodes[t.NodeID].Description.Hostname}
	}
	return out
}

// Revisions returns the revisions recorded in the swarm for release of
// application name ("" = its only release), oldest first.
func (c *Controller) Revisions(ctx context.Context, name, release string) ([]apply.Revision, error) {
	app, err := c.Application(name)
	if err != nil {
		return nil, err
	}
	names, _ := c.Releases(app.Name)
	release, err = releaseOf(app, names, release)
	if err != nil {
		return nil, err
	}
	d := c.dest(app.Destination.Swarm)
	owner := d.ownerOf(app)
	owner.Release = release
	revs, err := apply.Revisions(ctx, d.engine, owner)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return revs, nil
}

// releaseOf checks that release ("" = the application's only one) is one
// of app's releases, named names, and returns its name.
func releaseOf(app appset.Application, names []string, release string) (string, error) {
	switch {
	case release == "" && len(names) == 1:
		return names[0], nil
	case release == "" && !multiRelease(app):
		return app.Release, nil
	case release == "":
		return "", fmt.Errorf("%w: application %s has several releases; name one of %s", ErrInvalidRequest, app.Name, strings.Join(names, ", "))
	case slices.Contains(names, release) || release == app.Release && !multiRelease(app):
		return release, nil
	}
	return "", fmt.Errorf("%w: application %s has no release %q", ErrNotRecorded, app.Name, release)
}

// Resolve turns a revision a caller named (a branch, tag or commit) into a
// commit of name's repository; "" stays "". A revision git does not know
// wraps ErrInvalidRequest.
func (c *Controller) Resolve(ctx context.Context, name, revision string) (string, error) {
	app, err := c.Application(name)
	if err != nil || revision == "" {
		return "", err
	}
	commit, err := c.git.Resolve(ctx, app.Source.Repo, revision)
	if errors.Is(err, gitsource.ErrRevisionNotFound) {
		return "", fmt.Errorf("%w: revision %q of application %s: %w", ErrInvalidRequest, revision, app.Name, err)
	}
	if err != nil {
		return "", fmt.Errorf("resolve revision %q of application %s: %w", revision, app.Name, err)
	}
	return commit, nil
}

// Plan renders name at commit ("" = the revision it tracks, or the commit
// it is held at) and compares it with what was last recorded, writing
// nothing. It is safe to call beside the workers.
func (c *Controller) Plan(ctx context.Context, name, commit string) (Result, error) {
	app, err := c.Application(name)
	if err != nil {
		return Result{}, err
	}
	if commit == "" {
		st, _ := c.status.Get(name)
		commit = st.Held.Revision
	}
	return syncpass.Plan(ctx, c.dest(app.Destination.Swarm).env, app, commit)
}

// SyncOptions shape a requested sync. The zero value syncs what the
// application tracks, with its prune policy.
type SyncOptions struct {
	// Revision is a commit (resolved with Resolve) to deploy and hold the
	// application at; "" deploys what it tracks and releases a hold.
	Revision string
	// Prune turns resource pruning on or off for this sync; nil keeps the
	// policy.
	Prune *bool
	// Canary, when set, asks the release's running canary to be promoted
	// or aborted instead: nothing else of the sync applies, and
	// ErrNoCanary refuses it when none runs.
	Canary CanaryAction
}

// Queued says what became of a requested sync.
type Queued struct {
	// ID is the sync's number; when Merged, the number of the sync already
	// queued that absorbed it.
	ID       uint64
	Revision string
	Merged   bool
}

// Sync queues a sync of name by the actor ctx carries and returns at once.
// A sync window that allows no manual sync refuses it (ErrSyncWindow).
func (c *Controller) Sync(ctx context.Context, name string, opts SyncOptions) (Queued, error) {
	app, err := c.Application(name)
	if err != nil {
		return Queued{}, err
	}
	if v := window.Evaluate(app.SyncWindows, app.Name, c.now()); v.ManualDenied {
		return Queued{}, fmt.Errorf("%w: application %s is %s, which allows no manual sync", ErrSyncWindow, app.Name, v)
	}
	if opts.Canary != "" {
		return askCanary(ctx, c, app.Name, opts.Canary)
	}
	// Deploy what git declares now: an ls-remote answer the cache still
	// reuses may predate a push made just before the request (see
	// TestSyncReadsTheBranchAfresh).
	c.git.Forget(app.Source.Repo)
	queued, merged, err := c.enqueue(name, Request{Sync: true, Actor: notify.ActorFrom(ctx), Revision: opts.Revision, Prune: opts.Prune})
	if err != nil {
		return Queued{}, err
	}
	return Queued{ID: queued.ID, Revision: queued.Revision, Merged: merged}, nil
}

// Rollback queues a sync to the commit recorded in revision number of
// release ("" = the application's only release), re-rendered from git
// (revisions hold no secret values), which holds the application there.
func (c *Controller) Rollback(ctx context.Context, name, release string, number int) (Queued, error) {
	app, err := c.Application(name)
	if err != nil {
		return Queued{}, err
	}
	if number <= 0 {
		return Queued{}, fmt.Errorf("%w: revision: want a recorded revision number, got %d", ErrInvalidRequest, number)
	}
	names, _ := c.Releases(app.Name)
	if release, err = releaseOf(app, names, release); err != nil {
		return Queued{}, err
	}
	revs, err := c.Revisions(ctx, name, release)
	if err != nil {
		return Queued{}, err
	}
	i := slices.IndexFunc(revs, func(r apply.Revision) bool { return r.Number == number })
	if i < 0 {
		return Queued{}, fmt.Errorf("%w: revision %d of release %s", ErrNotRecorded, number, release)
	}
	if revs[i].Commit == "" {
		return Queued{}, fmt.Errorf("%w: revision %d of release %s records no commit", ErrInvalidRequest, number, release)
	}
	return c.Sync(ctx, name, SyncOptions{Revision: revs[i].Commit})
}

// Unhold releases name's hold, in the status and in the swarm, and queues
// a tick.
func (c *Controller) Unhold(ctx context.Context, name string) error {
	app, err := c.Application(name)
	if err != nil {
		return err
	}
	c.status.Update(name, func(s *AppStatus) { s.Held = apply.Hold{} })
	d := c.dest(app.Destination.Swarm)
	if err := apply.SaveHold(ctx, d.engine, d.ownerOf(app), apply.Hold{}); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	c.log.InfoContext(ctx, "hold released", "app", name, "actor", notify.ActorFrom(ctx))
	_, _, err = c.enqueue(name, Request{})
	return err
}

// Refresh forgets what is known of name's repository and queues a tick:
// git is re-read; nothing is applied unless the application is automated.
func (c *Controller) Refresh(_ context.Context, name string) error {
	return c.refresh(name, Request{})
}

// refresh is Refresh with the tick req to queue.
func (c *Controller) refresh(name string, req Request) error {
	app, err := c.Application(name)
	if err != nil {
		return err
	}
	c.git.Forget(app.Source.Repo)
	_, _, err = c.enqueue(name, req)
	return err
}

// Refreshed says what RefreshRepository refreshed.
type Refreshed struct {
	Applications []string
	AppSet       bool
}

// RefreshRepository refreshes every application whose source matches
// (repository URL and tracked revision), and reloads the app set now when
// it comes from a matching git source. It serves a forge's push webhook:
// a sync the refresh leads to names the webhook as its trigger.
func (c *Controller) RefreshRepository(ctx context.Context, matches func(repo, revision string) bool) Refreshed {
	var out Refreshed
	if c.MatchRepository(matches).AppSet {
		out.AppSet = true
		if _, err := c.watcher.Reload(ctx); err == nil {
			c.watcher.Wake() // Run takes the new set in and starts its workers
		}
	}
	// Matched after the reload, so an application the push itself changed
	// is refreshed with its new definition.
	for _, name := range c.MatchRepository(matches).Applications {
		if c.refresh(name, Request{webhook: true}) == nil {
			out.Applications = append(out.Applications, name)
		}
	}
	return out
}

// MatchRepository says what RefreshRepository would refresh for the same
// predicate, without refreshing anything or doing I/O.
func (c *Controller) MatchRepository(matches func(repo, revision string) bool) Refreshed {
	var out Refreshed
	if g, ok := c.appSet.(GitAppSet); ok && matches(g.Repo, g.Revision) {
		out.AppSet = true
	}
	// A push to a generator's repository may add or remove directories:
	// the set is read again.
	for _, g := range c.watcher.Current().Set.Generators() {
		if matches(g.Repo, g.Revision) {
			out.AppSet = true
		}
	}
	for _, app := range c.Applications() {
		if matches(app.Source.Repo, app.Source.Revision) {
			out.Applications = append(out.Applications, app.Name)
		}
	}
	return out
}

// Overview describes the controller as a whole.
type Overview struct {
	ID           string
	Ready        bool
	AppSet       AppSetStatus
	Applications int
	// Orphans are the releases deployed that no loaded application
	// declares, each with why it stays; Pruned names the applications
	// whose releases were removed.
	Orphans []Orphan
	Pruned  []string
	Git     gitsource.Stats
	// Swarm is the local swarm's manager; Destinations every swarm's state.
	Swarm        swarm.Identity
	Destinations []DestinationState
	Workers      int
}

// Overview returns the controller's state now.
func (c *Controller) Overview() Overview {
	c.mu.Lock()
	workers := len(c.workers)
	c.mu.Unlock()
	return Overview{
		ID:           c.id,
		Ready:        c.Loaded(),
		AppSet:       c.status.AppSet(),
		Applications: c.watcher.Current().Set.Len(),
		Orphans:      c.Orphans(),
		Pruned:       c.status.Pruned(),
		Git:          c.git.Stats(),
		Swarm:        c.dest(swarm.Local).engine.Identity(),
		Destinations: c.Destinations(),
		Workers:      workers,
	}
}

// Ready returns nil once the first app set is loaded and the swarm answers
// a ping, and an error wrapping ErrUnavailable saying what is missing.
func (c *Controller) Ready(ctx context.Context) error {
	if !c.Loaded() {
		return fmt.Errorf("%w: app set not loaded yet", ErrUnavailable)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Only the local swarm decides readiness: a remote swarm that does not
	// answer is that swarm's applications' problem, not the controller's.
	if _, err := c.dest(swarm.Local).engine.Ping(ctx); err != nil {
		return fmt.Errorf("%w: swarm does not answer: %w", ErrUnavailable, err)
	}
	return nil
}

// DisplayRepo is app's repository URL as it may be shown: without the
// credentials a URL can carry.
func DisplayRepo(app appset.Application) string { return gitsource.RedactURL(app.Source.Repo) }

// readable returns d's live snapshot when it can answer a read in place of
// the Engine: d has one, and its last list succeeded.
func (d *destination) readable() (swarm.Snapshot, bool) {
	if d.live == nil {
		return swarm.Snapshot{}, false
	}
	snap := d.live.Current()
	if snap.ReadFailed() || snap.TakenAt().IsZero() {
		return swarm.Snapshot{}, false
	}
	return snap, true
}

// services lists d's services of this controller (of app when app is not
// ""), with task counts, from the live snapshot when it is readable.
func (d *destination) services(ctx context.Context, app string) ([]dswarm.Service, error) {
	list := []dswarm.Service(nil)
	if snap, ok := d.readable(); ok {
		list = snap.Services()
	} else {
		f := filters.NewArgs(filters.Arg("label", stack.LabelController+"="+d.owner))
		if app != "" {
			f.Add("label", stack.LabelApplication+"="+app)
		}
		var err error
		if list, err = d.engine.ServiceList(ctx, dswarm.ServiceListOptions{Filters: f, Status: true}); err != nil {
			return nil, err
		}
	}
	// The label filter is a hint to the daemon; ownership is decided on
	// the labels themselves.
	out := list[:0]
	for _, s := range list {
		if ownedBy(s, d.owner, app) {
			out = append(out, s)
		}
	}
	return out, nil
}

// ownedBy reports whether s carries the controller label owner and, when
// app is not "", belongs to app.
func ownedBy(s dswarm.Service, owner, app string) bool {
	return s.Spec.Labels[stack.LabelController] == owner && (app == "" || s.Spec.Labels[stack.LabelApplication] == app)
}

// askCanary queues a request for name's running canary (see
// SyncOptions.Canary) by the actor ctx carries; ErrNoCanary when its
// status shows none progressing or paused.
func askCanary(ctx context.Context, c *Controller, name string, action CanaryAction) (Queued, error) {
	switch action {
	case CanaryPromote, CanaryAbort:
	default:
		return Queued{}, fmt.Errorf("%w: canary action %q; want promote or abort", ErrInvalidRequest, action)
	}
	st, _ := c.status.Get(name)
	if st.Canary.Phase != syncpass.CanaryProgressing && st.Canary.Phase != syncpass.CanaryPaused {
		return Queued{}, fmt.Errorf("%w: application %s", ErrNoCanary, name)
	}
	actor := notify.ActorFrom(ctx)
	queued, _, err := c.enqueue(name, Request{Canary: action, Actor: actor})
	if err != nil {
		return Queued{}, err
	}
	c.log.InfoContext(ctx, "canary request queued", "app", name, "action", string(action), "actor", actor)
	return Queued{ID: queued.ID, Revision: st.Canary.Commit}, nil
}

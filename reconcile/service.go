package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/filters"
	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/stack"
	skepswarm "github.com/skep-cd/skep/swarm"
)

// This file implements api.Reconciler on *Controller: the API's view of
// the controller. Nothing here decides who may do what; the API's guard
// did that. The actor comes from the context (notify.ActorFrom) and only
// labels what is recorded and raised.

var _ api.Reconciler = (*Controller)(nil)

// taskLister is the one Engine call the application detail needs beyond
// apply.Engine; *swarm.Client has it.
type taskLister interface {
	TaskList(ctx context.Context, options dswarm.TaskListOptions) ([]dswarm.Task, error)
}

type pinger interface {
	Ping(ctx context.Context) (types.Ping, error)
}

// GitStats returns the git cache's counters of remote calls.
func (c *Controller) GitStats() gitsource.Stats { return c.git.Stats() }

// notFound wraps ErrUnknownApplication with api.ErrNotFound.
func notFound(name string) error {
	return fmt.Errorf("%w: %w: %s", api.ErrNotFound, ErrUnknownApplication, name)
}

// lookup returns the application called name in the running app set.
func (c *Controller) lookup(name string) (appset.Application, error) {
	app, ok := c.app(name)
	if !ok {
		return appset.Application{}, notFound(name)
	}
	return app, nil
}

// ListApplications implements api.Reconciler with one ServiceList call (with
// task counts) for every application of this controller.
func (c *Controller) ListApplications(ctx context.Context) (api.ApplicationList, error) {
	apps := c.watcher.Current().Set.Applications()
	list := api.ApplicationList{Applications: make([]api.Application, 0, len(apps))}
	services, err := c.liveServices(ctx, "")
	if err != nil {
		list.LiveError = err.Error()
	}
	counts := map[string]api.ServiceCounts{}
	for _, s := range services {
		name := s.Spec.Labels[stack.LabelApplication]
		n := counts[name]
		n.Services++
		if s.ServiceStatus != nil {
			n.Running += int(s.ServiceStatus.RunningTasks)
			n.Desired += int(s.ServiceStatus.DesiredTasks)
		}
		counts[name] = n
	}
	for _, app := range apps {
		a := c.summary(app)
		a.Services = counts[app.Name]
		list.Applications = append(list.Applications, a)
	}
	return list, nil
}

// liveServices lists this controller's services (of one application when
// app is not ""), with running and desired task counts.
func (c *Controller) liveServices(ctx context.Context, app string) ([]dswarm.Service, error) {
	f := filters.NewArgs(filters.Arg("label", stack.LabelController+"="+c.id))
	if app != "" {
		f.Add("label", stack.LabelApplication+"="+app)
	}
	list, err := c.engine.ServiceList(ctx, dswarm.ServiceListOptions{Filters: f, Status: true})
	if err != nil {
		return nil, fmt.Errorf("list services of controller %s: %w", c.id, err)
	}
	// The label filter is a hint to the daemon; ownership is decided on the
	// labels themselves.
	out := list[:0]
	for _, s := range list {
		if s.Spec.Labels[stack.LabelController] == c.id && (app == "" || s.Spec.Labels[stack.LabelApplication] == app) {
			out = append(out, s)
		}
	}
	return out, nil
}

// summary is app's list entry from the status table, without live counts.
func (c *Controller) summary(app appset.Application) api.Application {
	st, ok := c.status.Get(app.Name)
	if !ok {
		st = AppStatus{Name: app.Name, Sync: Unknown, Automated: app.SyncPolicy.Automated}
	}
	a := api.Application{
		Name:             app.Name,
		Repo:             gitsource.RedactURL(app.Source.Repo),
		TargetRevision:   app.Source.Revision,
		Path:             app.Source.Path,
		Swarm:            app.Destination.Swarm,
		Releases:         []string{app.Release},
		Automated:        app.SyncPolicy.Automated,
		Sync:             string(st.Sync),
		Health:           cmp.Or(string(st.Health), api.HealthUnknown),
		HealthMessage:    st.HealthMessage,
		DriftReason:      string(st.Drift),
		Drift:            driftView(st.Findings),
		Unmanaged:        st.Unmanaged,
		Revision:         st.Revision,
		DeployedRevision: st.DeployedRevision,
		Phase:            cmp.Or(st.Phase, api.PhaseIdle),
		PendingSync:      st.PendingSync,
		Plan:             st.Plan,
		LastError:        st.LastError,
		LastErrorClass:   st.LastErrorClass,
	}
	if st.Held.Revision != "" {
		h := st.Held
		a.Held = &h
	}
	if !st.LastReconcile.IsZero() {
		t := st.LastReconcile.UTC()
		a.LastReconcile = &t
	}
	if st.LastRequestedSync.ID != 0 {
		s := st.LastRequestedSync
		a.LastSync = &s
	}
	return a
}

// Application implements api.Reconciler: the summary, the release's last
// recorded revision, and its live services and tasks (one ServiceList and
// one TaskList call).
func (c *Controller) Application(ctx context.Context, name string) (api.ApplicationDetail, error) {
	app, err := c.lookup(name)
	if err != nil {
		return api.ApplicationDetail{}, err
	}
	detail := api.ApplicationDetail{Application: c.summary(app)}
	rel := api.Release{Name: app.Release, Services: []api.Service{}}
	var problems []error
	if rev, err := apply.LatestRevision(ctx, c.engine, c.owner(app)); err != nil {
		problems = append(problems, err)
	} else if rev != nil {
		at := rev.AppliedAt.UTC()
		rel.Revision, rel.Commit, rel.AppliedAt = rev.Number, rev.Commit, &at
	}
	services, err := c.liveServices(ctx, app.Name)
	if err != nil {
		problems = append(problems, err)
	}
	tasks, err := c.liveTasks(ctx, app.Name)
	if err != nil {
		problems = append(problems, err)
	}
	byService := map[string][]api.Task{}
	for _, t := range tasks {
		byService[t.ServiceID] = append(byService[t.ServiceID], taskView(t))
	}
	for _, s := range services {
		if s.Spec.Labels[stack.LabelRelease] != app.Release {
			continue
		}
		v := serviceView(s)
		v.Tasks = byService[s.ID]
		if v.Tasks == nil {
			v.Tasks = []api.Task{}
		}
		slices.SortFunc(v.Tasks, func(a, b api.Task) int {
			return cmp.Or(cmp.Compare(a.Slot, b.Slot), b.UpdatedAt.Compare(a.UpdatedAt))
		})
		detail.Application.Services.Services++
		detail.Application.Services.Running += v.Running
		detail.Application.Services.Desired += v.Desired
		rel.Services = append(rel.Services, v)
	}
	slices.SortFunc(rel.Services, func(a, b api.Service) int { return cmp.Compare(a.Name, b.Name) })
	detail.Releases = []api.Release{rel}
	if len(problems) > 0 {
		detail.LiveError = errors.Join(problems...).Error()
	}
	return detail, nil
}

func (c *Controller) liveTasks(ctx context.Context, app string) ([]dswarm.Task, error) {
	tl, ok := c.engine.(taskLister)
	if !ok {
		return nil, nil
	}
	f := filters.NewArgs(filters.Arg("label", stack.LabelController+"="+c.id),
		filters.Arg("label", stack.LabelApplication+"="+app))
	tasks, err := tl.TaskList(ctx, dswarm.TaskListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list tasks of application %s: %w", app, err)
	}
	return tasks, nil
}

func serviceView(s dswarm.Service) api.Service {
	v := api.Service{Name: s.Spec.Name, ID: s.ID, Mode: "replicated"}
	if cs := s.Spec.TaskTemplate.ContainerSpec; cs != nil {
		v.Image = cs.Image
	}
	switch m := s.Spec.Mode; {
	case m.Global != nil:
		v.Mode = "global"
	case m.ReplicatedJob != nil:
		v.Mode = "replicated-job"
	case m.GlobalJob != nil:
		v.Mode = "global-job"
	}
	if s.ServiceStatus != nil {
		v.Running, v.Desired = int(s.ServiceStatus.RunningTasks), int(s.ServiceStatus.DesiredTasks)
	}
	if s.UpdateStatus != nil {
		v.UpdateState = string(s.UpdateStatus.State)
	}
	return v
}

func taskView(t dswarm.Task) api.Task {
	return api.Task{
		ID:           t.ID,
		Slot:         t.Slot,
		Node:         t.NodeID,
		State:        string(t.Status.State),
		DesiredState: string(t.DesiredState),
		Message:      t.Status.Message,
		Error:        t.Status.Err,
		UpdatedAt:    t.UpdatedAt.UTC(),
	}
}

// Diff implements api.Reconciler. A revision is resolved in the
// application's repository first.
func (c *Controller) Diff(ctx context.Context, name, revision string) (api.Diff, error) {
	app, err := c.lookup(name)
	if err != nil {
		return api.Diff{}, err
	}
	commit, err := c.resolve(ctx, app, revision)
	if err != nil {
		return api.Diff{}, err
	}
	out, err := c.PlanAt(ctx, name, commit)
	if err != nil {
		return api.Diff{}, err
	}
	return api.Diff{Application: name, Revision: out.Commit, Releases: []plan.Release{out.Plan}}, nil
}

// resolve turns a revision a caller named into a commit of app's
// repository; "" stays "". A revision git does not know is api.ErrInvalid.
func (c *Controller) resolve(ctx context.Context, app appset.Application, revision string) (string, error) {
	if revision == "" {
		return "", nil
	}
	commit, err := c.git.Resolve(ctx, app.Source.Repo, revision)
	if errors.Is(err, gitsource.ErrRevisionNotFound) {
		return "", fmt.Errorf("%w: revision %q of application %s: %w", api.ErrInvalid, revision, app.Name, err)
	}
	if err != nil {
		return "", fmt.Errorf("resolve revision %q of application %s: %w", revision, app.Name, err)
	}
	return commit, nil
}

// History implements api.Reconciler with the revisions recorded in the
// swarm; the sync history is the store's, added by the API.
func (c *Controller) History(ctx context.Context, name string) (api.History, error) {
	app, err := c.lookup(name)
	if err != nil {
		return api.History{}, err
	}
	revs, err := apply.Revisions(ctx, c.engine, c.owner(app))
	if err != nil {
		return api.History{}, fmt.Errorf("%w: %w", api.ErrUnavailable, err)
	}
	rh := api.ReleaseHistory{Name: app.Release, Revisions: make([]api.Revision, 0, len(revs))}
	for _, r := range revs {
		rh.Revisions = append(rh.Revisions, api.Revision{
			Number: r.Number, Commit: r.Commit, AppliedAt: r.AppliedAt.UTC(), Actor: r.Actor, Images: r.Images,
		})
	}
	return api.History{Application: name, Releases: []api.ReleaseHistory{rh}, Syncs: []api.HistorySync{}}, nil
}

// Sync implements api.Reconciler. The actor is notify.ActorFrom(ctx). A
// revision is resolved now, so an unknown one is refused before anything
// is queued; a dry run plans synchronously and queues nothing.
func (c *Controller) Sync(ctx context.Context, name string, opts api.SyncOptions) (api.SyncResponse, error) {
	app, err := c.lookup(name)
	if err != nil {
		return api.SyncResponse{}, err
	}
	commit, err := c.resolve(ctx, app, opts.Revision)
	if err != nil {
		return api.SyncResponse{}, err
	}
	if opts.DryRun {
		d, err := c.Diff(ctx, name, commit)
		if err != nil {
			return api.SyncResponse{}, err
		}
		return api.SyncResponse{Application: name, Status: api.SyncPlanned, Revision: d.Revision, Diff: &d}, nil
	}
	queued, merged, err := c.enqueue(name, Request{Sync: true, Actor: notify.ActorFrom(ctx), Revision: commit, Prune: opts.Prune})
	if err != nil {
		return api.SyncResponse{}, notFound(name)
	}
	resp := api.SyncResponse{Application: name, Status: api.SyncQueued, ID: queued.ID, Revision: queued.Revision}
	if merged {
		resp.Status = api.SyncMerged
	}
	return resp, nil
}

// Rollback implements api.Reconciler: a sync to the commit recorded in the
// revision, re-rendered from git (revisions hold no secret values), which
// holds the application at that commit.
func (c *Controller) Rollback(ctx context.Context, name string, opts api.RollbackOptions) (api.SyncResponse, error) {
	app, err := c.lookup(name)
	if err != nil {
		return api.SyncResponse{}, err
	}
	if opts.Release != "" && opts.Release != app.Release {
		return api.SyncResponse{}, fmt.Errorf("%w: application %s has no release %q", api.ErrNotFound, name, opts.Release)
	}
	if opts.Revision <= 0 {
		return api.SyncResponse{}, fmt.Errorf("%w: revision: want a recorded revision number, got %d", api.ErrInvalid, opts.Revision)
	}
	revs, err := apply.Revisions(ctx, c.engine, c.owner(app))
	if err != nil {
		return api.SyncResponse{}, fmt.Errorf("%w: %w", api.ErrUnavailable, err)
	}
	i := slices.IndexFunc(revs, func(r apply.Revision) bool { return r.Number == opts.Revision })
	if i < 0 {
		return api.SyncResponse{}, fmt.Errorf("%w: revision %d of release %s is not recorded", api.ErrNotFound, opts.Revision, app.Release)
	}
	if revs[i].Commit == "" {
		return api.SyncResponse{}, fmt.Errorf("%w: revision %d of release %s records no commit", api.ErrInvalid, opts.Revision, app.Release)
	}
	return c.Sync(ctx, name, api.SyncOptions{Revision: revs[i].Commit})
}

// Unhold implements api.Reconciler.
func (c *Controller) Unhold(ctx context.Context, name string) error {
	app, err := c.lookup(name)
	if err != nil {
		return err
	}
	c.status.Update(name, func(s *AppStatus) { s.Held = api.Hold{} })
	if err := c.saveHold(ctx, app, api.Hold{}); err != nil {
		return fmt.Errorf("%w: %w", api.ErrUnavailable, err)
	}
	c.log.InfoContext(ctx, "hold released", "app", name, "actor", notify.ActorFrom(ctx))
	if _, _, err := c.enqueue(name, Request{}); err != nil {
		return notFound(name)
	}
	return nil
}

// Refresh implements api.Reconciler.
func (c *Controller) Refresh(_ context.Context, name string) error {
	app, err := c.lookup(name)
	if err != nil {
		return err
	}
	c.git.Forget(app.Source.Repo)
	if _, _, err := c.enqueue(name, Request{}); err != nil {
		return notFound(name)
	}
	return nil
}

// RefreshRepository implements api.Reconciler: every application whose
// repository and revision the push names is refreshed, and the app set is
// reloaded now when it comes from that repository.
func (c *Controller) RefreshRepository(ctx context.Context, push api.Push) (api.Refreshed, error) {
	var out api.Refreshed
	if g, ok := c.appSet.(GitAppSet); ok && push.Matches(g.Repo, g.Revision) {
		out.AppSet = true
		if _, err := c.watcher.Reload(ctx); err == nil {
			c.onAppSet(c.watcher.Current())
		}
	}
	for _, app := range c.watcher.Current().Set.Applications() {
		if !push.Matches(app.Source.Repo, app.Source.Revision) {
			continue
		}
		if err := c.Refresh(ctx, app.Name); err == nil {
			out.Applications = append(out.Applications, app.Name)
		}
	}
	return out, nil
}

// Status implements api.Reconciler.
func (c *Controller) Status(ctx context.Context) (api.ControllerStatus, error) {
	as := c.status.AppSet()
	st := api.ControllerStatus{
		ControllerID: c.id,
		Ready:        c.Loaded(),
		AppSet: api.AppSetStatus{
			Source: as.Source, Revision: as.Revision, Loaded: as.Loaded, Stale: as.Stale, Error: as.Error,
		},
		Applications: c.watcher.Current().Set.Len(),
		Orphaned:     c.status.Orphaned(),
		Pruned:       c.status.Pruned(),
	}
	if !as.LoadedAt.IsZero() {
		t := as.LoadedAt.UTC()
		st.AppSet.LoadedAt = &t
	}
	gs := c.git.Stats()
	d := &api.StatusDetails{Git: api.GitStats{ListRefs: gs.ListRefs, Fetches: gs.Fetches, Exports: gs.Exports}}
	if sc, ok := c.engine.(*skepswarm.Client); ok {
		d.Swarm = api.SwarmInfo{NodeID: sc.NodeID, ClusterID: sc.ClusterID, EngineVersion: sc.EngineVersion}
	}
	c.mu.Lock()
	d.Workers = len(c.workers)
	c.mu.Unlock()
	st.Details = d
	return st, nil
}

// Ready implements api.Reconciler: the first app set is loaded and the
// swarm answers a ping.
func (c *Controller) Ready(ctx context.Context) error {
	if !c.Loaded() {
		return fmt.Errorf("%w: app set not loaded yet", api.ErrUnavailable)
	}
	p, ok := c.engine.(pinger)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := p.Ping(ctx); err != nil {
		return fmt.Errorf("%w: swarm does not answer: %w", api.ErrUnavailable, err)
	}
	return nil
}

// runRequest runs one worker request: it applies or clears a hold, keeps
// the requested sync's record, and reconciles.
func (c *Controller) runRequest(ctx context.Context, app appset.Application, req Request, st *appState) error {
	now := c.now().UTC()
	c.restoreHold(ctx, app, st)
	var hold *api.Hold // set when this request changes the hold
	c.status.Update(app.Name, func(s *AppStatus) {
		switch {
		case req.Sync && req.Revision != "":
			s.Held = api.Hold{Revision: req.Revision, Actor: req.Actor, Since: now}
			hold = &s.Held
		case req.Sync:
			if s.Held.Revision != "" {
				hold = &api.Hold{}
			}
			s.Held = api.Hold{}
		default:
			req.Revision = s.Held.Revision
		}
		if req.Sync {
			if s.PendingSync <= req.ID {
				s.PendingSync = 0
			}
			s.LastRequestedSync = api.SyncRecord{ID: req.ID, Revision: req.Revision, Actor: req.Actor,
				Outcome: api.OutcomeRunning, StartedAt: now}
		}
	})
	if hold != nil {
		if err := c.saveHold(ctx, app, *hold); err != nil {
			c.log.Warn("hold not recorded in the swarm; it lasts until the controller restarts", "app", app.Name, "err", err)
		}
	}
	out, err := c.reconcile(ctx, app, req, st)
	if req.Sync {
		done := c.now().UTC()
		c.status.Update(app.Name, func(s *AppStatus) {
			if s.LastRequestedSync.ID != req.ID {
				return
			}
			r := &s.LastRequestedSync
			r.FinishedAt, r.Revision, r.Outcome = &done, cmp.Or(out.Commit, r.Revision), api.OutcomeSucceeded
			if out.Plan.Action.Valid() {
				r.Summary = out.Plan.Summary()
			}
			if Class(err) == "waiting" {
				// Still queued: the worker runs it again once the rollout ends.
				r.FinishedAt, r.Outcome, s.PendingSync = nil, api.OutcomeRunning, req.ID
				return
			}
			if err != nil {
				r.Outcome, r.Error = api.OutcomeFailed, err.Error()
			}
			if s.PendingSync <= req.ID {
				s.PendingSync = 0
			}
		})
	}
	return err
}

// observe tells the observer what one reconcile took.
func (c *Controller) observe(app appset.Application, req Request, out Outcome, d desired, took time.Duration, err error) {
	if c.observer == nil {
		return
	}
	o := api.Observation{
		Application:   app.Name,
		Outcome:       cmp.Or(Class(err), "ok"),
		Duration:      took,
		Sync:          out.Applied || out.applyTook > 0,
		SyncFailed:    out.applyTook > 0 && !out.Applied,
		ApplyDuration: out.applyTook,
		GitDuration:   d.gitTook,
		GitFailed:     d.gitFailed,
		Requested:     req.Sync,
	}
	c.observer.ObserveReconcile(o)
}

// driftView is the API's shape of live drift findings; never nil.
func driftView(findings []plan.Finding) []api.DriftFinding {
	out := make([]api.DriftFinding, 0, len(findings))
	for _, f := range findings {
		out = append(out, api.DriftFinding{Release: f.Release, Service: f.Service, Kind: string(f.Kind),
			Path: f.Path, Field: f.Field, Desired: f.Desired, Live: f.Live, Message: f.Reason})
	}
	return out
}

package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/wire"
)

// Controller adapts *reconcile.Controller to Reconciler: it reads the
// controller's own types and answers in the wire model. It holds no state
// of its own and is safe for concurrent use, as the controller is.
type Controller struct{ ctrl *reconcile.Controller }

// NewController returns the Reconciler of ctrl. ctrl must not be nil; the
// adapter only reads it and queues work on it, it never starts or stops it.
func NewController(ctrl *reconcile.Controller) *Controller { return &Controller{ctrl: ctrl} }

// The compiler keeps Controller in step with Reconciler.
var _ Reconciler = (*Controller)(nil)

// apiError wraps the controller's error sentinels in the API's, which
// choose the status code; other errors pass unchanged.
func apiError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, reconcile.ErrUnknownApplication), errors.Is(err, reconcile.ErrNotRecorded):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, reconcile.ErrInvalidRequest):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	case errors.Is(err, reconcile.ErrUnavailable):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case errors.Is(err, reconcile.ErrSyncWindow), errors.Is(err, reconcile.ErrNoCanary):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
}

// ListApplications implements Reconciler with one ServiceList call (with
// task counts) for every application of the controller. It never fails: a
// swarm that cannot be read leaves the counts at zero and says why in
// LiveError, since the status table's part of the list is still true.
func (a *Controller) ListApplications(ctx context.Context) (wire.ApplicationList, error) {
	apps := a.ctrl.Applications()
	list := wire.ApplicationList{Applications: make([]wire.Application, 0, len(apps))}
	services, err := a.ctrl.LiveServices(ctx, "")
	if err != nil {
		list.LiveError = err.Error()
	}
	// Group by the application label the stack package puts on every
	// service it deploys; a service without it counts for no application.
	counts := map[string]wire.ServiceCounts{}
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
		v := a.summary(app)
		v.Services = counts[app.Name]
		list.Applications = append(list.Applications, v)
	}
	return list, nil
}

// summary is app's list entry from the status table, without live counts.
func (a *Controller) summary(app appset.Application) wire.Application {
	st, ok := a.ctrl.Statuses().Get(app.Name)
	// An application whose worker has not reported yet (it was just added)
	// is listed as unknown rather than left out.
	if !ok {
		st = reconcile.AppStatus{Name: app.Name, Sync: reconcile.Unknown, Automated: app.SyncPolicy.Automated}
	}
	v := wire.Application{
		Name:             app.Name,
		Repo:             reconcile.DisplayRepo(app),
		TargetRevision:   app.Source.Revision,
		Path:             app.Source.Path,
		Swarm:            app.Destination.Swarm,
		Releases:         a.releases(app),
		Automated:        app.SyncPolicy.Automated,
		Sync:             string(st.Sync),
		Health:           cmp.Or(string(st.Health), wire.HealthUnknown),
		HealthMessage:    st.HealthMessage,
		DriftReason:      string(st.Drift),
		Drift:            driftView(st.Findings),
		Unmanaged:        st.Unmanaged,
		Revision:         st.Revision,
		DeployedRevision: st.DeployedRevision,
		Phase:            string(cmp.Or(st.Phase, reconcile.PhaseIdle)),
		PendingSync:      st.PendingSync,
		Plan:             st.Plan,
		Warnings:         st.Warnings,
		LastError:        st.LastError,
		LastErrorClass:   string(st.LastErrorClass),
	}
	for _, o := range st.Artifacts {
		v.Artifacts = append(v.Artifacts, ArtifactView(o))
	}
	for _, p := range st.Previews {
		pv := wire.Preview{Branch: p.Branch, Hash: p.Hash, Release: p.Release, Commit: p.Commit, Domain: p.Domain,
			Health: cmp.Or(string(p.Health), wire.HealthUnknown), Deployed: p.Deployed, Error: p.Error}
		for _, o := range p.Artifacts {
			if o.Entry.Deploy.Preview {
				pv.Artifacts = append(pv.Artifacts, ArtifactView(o))
			}
		}
		v.Previews = append(v.Previews, pv)
	}
	v.PreviewProblems = st.PreviewProblems
	v.DependsOn, v.WaitingFor, v.Generator, v.Self = app.DependsOn, st.WaitingFor, app.Generator, app.Self
	if w := st.Window; w.Message != "" {
		v.SyncWindow = &wire.SyncWindow{Kind: w.Kind, Schedule: w.Schedule, TimeZone: w.TimeZone, Duration: w.Duration.String(),
			Outside: w.Outside, ManualSync: w.ManualSync, Message: w.Message}
		if !w.Until.IsZero() {
			t := w.Until.UTC()
			v.SyncWindow.Until = &t
		}
	}
	if h := st.Held; h.Revision != "" {
		v.Held = &wire.Hold{Revision: h.Revision, Actor: h.Actor, Since: h.Since}
	}
	if f := st.Held.Failed; f != nil {
		v.RolledBack = &wire.RolledBack{Revision: f.Commit, Restored: f.Restored, RestoredRevision: f.Revision, Cause: f.Cause, Since: f.Since.UTC()}
	}
	if c := st.Canary; c.Phase != "" {
		v.Canary = canaryView(c)
	}
	if c := st.Cause; c.Known() {
		v.Cause = &wire.Cause{Line: c.String(), Service: c.Service, Kind: string(c.Kind), Task: c.Task, State: c.State,
			Error: c.Err, Message: c.Message, ExitCode: c.ExitCode, Logs: c.Logs, Shared: c.Shared}
	}
	// A zero time means "never"; nil keeps it out of the JSON rather than
	// showing the year 1.
	if !st.LastReconcile.IsZero() {
		t := st.LastReconcile.UTC()
		v.LastReconcile = &t
	}
	if s := st.LastSync; !s.At.IsZero() {
		v.LastApplied = &wire.AppliedSync{At: s.At.UTC(), Revision: s.Revision, Actor: s.Actor, Trigger: string(s.Trigger)}
	}
	if r := st.LastRequestedSync; r.ID != 0 {
		v.LastSync = &wire.SyncRecord{ID: r.ID, Revision: r.Revision, Actor: r.Actor, Outcome: string(r.Outcome),
			StartedAt: r.StartedAt, Summary: r.Summary, Error: r.Error}
		if !r.FinishedAt.IsZero() {
			t := r.FinishedAt
			v.LastSync.FinishedAt = &t
		}
	}
	return v
}

// releases names app's releases for its summary.
func (a *Controller) releases(app appset.Application) []string {
	names, err := a.ctrl.Releases(app.Name)
	if err != nil || names == nil {
		return []string{}
	}
	return names
}

// Application implements Reconciler: the summary, the release's last
// recorded revision, and its live services and tasks (one ServiceList and
// one TaskList call). What could not be read is named in LiveError.
func (a *Controller) Application(ctx context.Context, name string) (wire.ApplicationDetail, error) {
	app, err := a.ctrl.Application(name)
	if err != nil {
		return wire.ApplicationDetail{}, apiError(err)
	}
	detail := wire.ApplicationDetail{Application: a.summary(app)}
	names, _ := a.ctrl.Releases(name)
	var problems []error
	// Read before the services: the snapshot only moves forward, so when
	// this one shows the last write, the services read next do too.
	converging, err := a.ctrl.Converging(name)
	if err != nil {
		problems = append(problems, err)
	}
	detail.Converging = converging
	services, err := a.ctrl.LiveServices(ctx, app.Name)
	if err != nil {
		problems = append(problems, err)
	}
	tasks, err := a.ctrl.LiveTasks(ctx, app.Name)
	if err != nil {
		problems = append(problems, err)
	}
	byService := map[string][]wire.Task{}
	for _, t := range tasks {
		byService[t.ServiceID] = append(byService[t.ServiceID], taskView(t))
	}
	for _, release := range names {
		rel := wire.Release{Name: release, Services: []wire.Service{}}
		if revs, err := a.ctrl.Revisions(ctx, name, release); err != nil {
			problems = append(problems, err)
		} else if len(revs) > 0 {
			last := revs[len(revs)-1]
			at := last.AppliedAt.UTC()
			rel.Revision, rel.Commit, rel.AppliedAt = last.Number, last.Commit, &at
		}
		for _, s := range services {
			// LiveServices selects by application; a service labelled with
			// another release (a preview, another release of the file) is
			// not part of this one.
			if s.Spec.Labels[stack.LabelRelease] != release {
				continue
			}
			v := serviceView(s)
			v.Tasks = byService[s.ID]
			if v.Tasks == nil {
				v.Tasks = []wire.Task{}
			}
			// By slot, newest first within one: each slot's current task leads
			// and the ones it replaced follow.
			slices.SortFunc(v.Tasks, func(a, b wire.Task) int {
				return cmp.Or(cmp.Compare(a.Slot, b.Slot), b.UpdatedAt.Compare(a.UpdatedAt))
			})
			detail.Application.Services.Services++
			detail.Application.Services.Running += v.Running
			detail.Application.Services.Desired += v.Desired
			rel.Services = append(rel.Services, v)
		}
		slices.SortFunc(rel.Services, func(a, b wire.Service) int { return cmp.Compare(a.Name, b.Name) })
		detail.Releases = append(detail.Releases, rel)
	}
	if detail.Releases == nil {
		detail.Releases = []wire.Release{}
	}
	if len(problems) > 0 {
		detail.LiveError = errors.Join(problems...).Error()
	}
	return detail, nil
}

// serviceView is the wire shape of one live service, without its tasks.
// Counts and update state are zero when the Engine did not report them
// (ServiceStatus needs the status option of ServiceList).
func serviceView(s dswarm.Service) wire.Service {
	v := wire.Service{Name: s.Spec.Name, ID: s.ID, Mode: "replicated"}
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

// taskView is the wire shape of one task: its node by hostname (by id
// when the swarm does not name it).
func taskView(t reconcile.Task) wire.Task {
	return wire.Task{
		ID:           t.ID,
		Slot:         t.Slot,
		Node:         cmp.Or(t.NodeName, t.NodeID),
		NodeID:       t.NodeID,
		State:        string(t.Status.State),
		DesiredState: string(t.DesiredState),
		Message:      t.Status.Message,
		Error:        t.Status.Err,
		UpdatedAt:    t.UpdatedAt.UTC(),
	}
}

// driftView is the wire shape of live drift findings; never nil.
func driftView(findings []plan.Finding) []wire.DriftFinding {
	out := make([]wire.DriftFinding, 0, len(findings))
	for _, f := range findings {
		out = append(out, wire.DriftFinding{Release: f.Release, Service: f.Service, Kind: string(f.Kind),
			Path: f.Path, Field: f.Field, Desired: f.Desired, Live: f.Live, Message: f.Reason})
	}
	return out
}

// Diff implements Reconciler. A revision is resolved in the application's
// repository first, so the plan is of one fixed commit even if the branch
// moves meanwhile, and an unknown revision is refused before rendering.
func (a *Controller) Diff(ctx context.Context, name, revision string) (wire.Diff, error) {
	commit, err := a.ctrl.Resolve(ctx, name, revision)
	if err != nil {
		return wire.Diff{}, apiError(err)
	}
	out, err := a.ctrl.Plan(ctx, name, commit)
	if err != nil {
		return wire.Diff{}, apiError(err)
	}
	rel := PlanView(out.Plan)
	rel.Unplaceable = out.Unplaceable
	return wire.Diff{Application: name, Revision: out.Commit, Releases: []wire.ReleasePlan{rel}}, nil
}

// PlanView is the wire shape of a release's plan. Changes is never nil, so
// an empty plan is [] in JSON; the result shares no memory with p.
func PlanView(p plan.Release) wire.ReleasePlan {
	out := wire.ReleasePlan{Name: p.Name, Action: string(p.Action), Reason: p.Reason, Changes: make([]wire.PlanChange, 0, len(p.Changes))}
	for _, c := range p.Changes {
		wc := wire.PlanChange{Kind: string(c.Kind), Name: c.Name, Op: string(c.Op), Reason: c.Reason}
		for _, f := range c.Fields {
			wc.Fields = append(wc.Fields, wire.FieldDiff(f))
		}
		out.Changes = append(out.Changes, wc)
	}
	return out
}

// History implements Reconciler with the revisions recorded in the swarm;
// the sync history is the store's, added by the handler.
func (a *Controller) History(ctx context.Context, name string) (wire.History, error) {
	names, err := a.ctrl.Releases(name)
	if err != nil {
		return wire.History{}, apiError(err)
	}
	h := wire.History{Application: name, Releases: []wire.ReleaseHistory{}, Syncs: []wire.HistorySync{}}
	for _, release := range names {
		revs, err := a.ctrl.Revisions(ctx, name, release)
		if err != nil {
			return wire.History{}, apiError(err)
		}
		rh := wire.ReleaseHistory{Name: release, Revisions: make([]wire.Revision, 0, len(revs))}
		for _, r := range revs {
			wr := wire.Revision{Number: r.Number, Commit: r.Commit, AppliedAt: r.AppliedAt.UTC(), Actor: r.Actor, Images: r.Images}
			if c := r.Chart; c != nil {
				wr.Chart = &wire.RevisionChart{Name: c.Name, Version: c.Version, ValuesFiles: c.ValuesFiles}
				for _, q := range c.Requirements {
					wr.Chart.Requirements = append(wr.Chart.Requirements,
						wire.RevisionRequirement{Kind: q.Kind, Name: q.Name, Description: q.Description, AutoCreate: q.AutoCreate})
				}
			}
			rh.Revisions = append(rh.Revisions, wr)
		}
		h.Releases = append(h.Releases, rh)
	}
	return h, nil
}

// Sync implements Reconciler. A revision is resolved now, so an unknown
// one is refused before anything is queued; a dry run plans synchronously
// and queues nothing.
func (a *Controller) Sync(ctx context.Context, name string, opts wire.SyncOptions) (wire.SyncResponse, error) {
	commit, err := a.ctrl.Resolve(ctx, name, opts.Revision)
	if err != nil {
		return wire.SyncResponse{}, apiError(err)
	}
	if opts.DryRun {
		d, err := a.Diff(ctx, name, commit)
		if err != nil {
			return wire.SyncResponse{}, err
		}
		return wire.SyncResponse{Application: name, Status: wire.SyncPlanned, Revision: d.Revision, Diff: &d}, nil
	}
	q, err := a.ctrl.Sync(ctx, name, reconcile.SyncOptions{Revision: commit, Prune: opts.Prune})
	return queued(name, q, err)
}

// Rollback implements Reconciler: the controller checks that the release
// and revision are recorded before anything is queued.
func (a *Controller) Rollback(ctx context.Context, name string, opts wire.RollbackOptions) (wire.SyncResponse, error) {
	q, err := a.ctrl.Rollback(ctx, name, opts.Release, opts.Revision)
	return queued(name, q, err)
}

// queued answers a sync or rollback that was queued (or refused). Merged
// means an earlier request already queued covers this one: the ID is the
// earlier request's, which is what the client should wait for.
func queued(name string, q reconcile.Queued, err error) (wire.SyncResponse, error) {
	if err != nil {
		return wire.SyncResponse{}, apiError(err)
	}
	resp := wire.SyncResponse{Application: name, Status: wire.SyncQueued, ID: q.ID, Revision: q.Revision}
	if q.Merged {
		resp.Status = wire.SyncMerged
	}
	return resp, nil
}

// Canary implements Reconciler.
func (a *Controller) Canary(ctx context.Context, name, action string) (wire.SyncResponse, error) {
	q, err := a.ctrl.Sync(ctx, name, reconcile.SyncOptions{Canary: reconcile.CanaryAction(action)})
	return queued(name, q, err)
}

// Unhold implements Reconciler; unholding an application that is not held
// still queues a tick.
func (a *Controller) Unhold(ctx context.Context, name string) error {
	return apiError(a.ctrl.Unhold(ctx, name))
}

// Refresh implements Reconciler.
func (a *Controller) Refresh(ctx context.Context, name string) error {
	return apiError(a.ctrl.Refresh(ctx, name))
}

// RefreshRepository implements Reconciler. It never fails: a push to a
// repository that no application uses refreshes nothing.
func (a *Controller) RefreshRepository(ctx context.Context, push Push) (Refreshed, error) {
	r := a.ctrl.RefreshRepository(ctx, push.Matches)
	return Refreshed{Applications: r.Applications, AppSet: r.AppSet}, nil
}

// MatchPush implements Reconciler.
func (a *Controller) MatchPush(push Push) Refreshed {
	r := a.ctrl.MatchRepository(push.Matches)
	return Refreshed{Applications: r.Applications, AppSet: r.AppSet}
}

// Status implements Reconciler from the controller's in-memory overview;
// it makes no Docker or git call, so it answers even when both are down.
func (a *Controller) Status(context.Context) (wire.ControllerStatus, error) {
	o := a.ctrl.Overview()
	st := wire.ControllerStatus{
		ControllerID: o.ID,
		Ready:        o.Ready,
		AppSet: wire.AppSetStatus{
			Source: o.AppSet.Source, Revision: o.AppSet.Revision, Loaded: o.AppSet.Loaded, Stale: o.AppSet.Stale, Error: o.AppSet.Error,
		},
		Applications:     o.Applications,
		OrphanedReleases: []wire.OrphanedRelease{},
		Orphaned:         []string{},
		Pruned:           o.Pruned,
		Details: &wire.StatusDetails{
			Git:     wire.GitStats{ListRefs: o.Git.ListRefs, Fetches: o.Git.Fetches, Exports: o.Git.Exports},
			Swarm:   wire.SwarmInfo{NodeID: o.Swarm.NodeID, ClusterID: o.Swarm.ClusterID, EngineVersion: o.Swarm.EngineVersion},
			Workers: o.Workers,
		},
	}
	for _, r := range o.Orphans {
		st.OrphanedReleases = append(st.OrphanedReleases, wire.OrphanedRelease{Application: r.Application, Release: r.Release, Swarm: r.Swarm, Reason: r.Reason})
		if !slices.Contains(st.Orphaned, r.Application) {
			st.Orphaned = append(st.Orphaned, r.Application) // Orphans is sorted by application
		}
	}
	if !o.AppSet.LoadedAt.IsZero() {
		t := o.AppSet.LoadedAt.UTC()
		st.AppSet.LoadedAt = &t
	}
	st.Swarms = make([]wire.Swarm, 0, len(o.Destinations))
	for _, d := range o.Destinations {
		w := wire.Swarm{Name: d.Name, Reachable: d.Reachable, Error: d.Error, EngineVersion: d.Identity.EngineVersion,
			APIVersion: d.Identity.APIVersion, Nodes: d.Identity.Nodes, Managers: d.Identity.Managers, Applications: d.Applications}
		if !d.UnreachableSince.IsZero() {
			t := d.UnreachableSince.UTC()
			w.UnreachableSince = &t
		}
		st.Swarms = append(st.Swarms, w)
	}
	return st, nil
}

// Ready implements Reconciler; it pings the swarm, which the controller
// bounds at five seconds.
func (a *Controller) Ready(ctx context.Context) error {
	return apiError(a.ctrl.Ready(ctx))
}

// ArtifactView is the wire shape of one resolved artifact.
func ArtifactView(o artifact.Object) wire.Artifact {
	drift := wire.ArtifactInSync
	switch {
	case o.Drift(true):
		drift = wire.ArtifactReady
	case o.Drift(false):
		drift = wire.ArtifactWaiting
	}
	return wire.Artifact{
		Name: o.Entry.Name, Kind: string(o.Entry.Kind), Strategy: string(o.Entry.Deploy.Strategy()),
		Suspended: o.Suspended(), Preview: o.Entry.Deploy.Preview, Image: o.Entry.Image,
		Desired: o.Desired, Current: o.Current, Version: o.Version(), Condition: string(o.Condition),
		Reason: o.Reason, Digest: o.Digest, Drift: drift,
	}
}

// canaryView is a release's canary in the wire shape.
func canaryView(c reconcile.Canary) *wire.Canary {
	v := &wire.Canary{Service: c.Service, CanaryService: c.Canary, Revision: c.Commit, Phase: string(c.Phase), Step: c.Step,
		Steps: c.Steps, StepName: c.StepName, Weight: c.Weight, Replicas: c.Replicas, StableReplicas: c.Stable,
		TotalReplicas: c.Total, Started: c.Started.UTC(), Since: c.Since.UTC(), Message: c.Message}
	if !c.Next.IsZero() {
		t := c.Next.UTC()
		v.Next = &t
	}
	for _, r := range c.Analysis {
		m := wire.CanaryMetric{Metric: r.Metric, Phase: string(r.Phase), Count: r.Count, Successful: r.Successful, Failed: r.Failed,
			Inconclusive: r.Inconclusive, Errors: r.Errors, Message: r.Message, Measurements: []wire.CanaryMeasurement{}}
		if !r.Next.IsZero() {
			t := r.Next.UTC()
			m.Next = &t
		}
		for _, x := range r.Measurements {
			m.Measurements = append(m.Measurements, wire.CanaryMeasurement{At: x.At.UTC(), Phase: string(x.Phase), Value: x.Value, Error: x.Error})
		}
		v.Analysis = append(v.Analysis, m)
	}
	return v
}

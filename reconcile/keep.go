package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/prune"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// servicesOf returns the snapshot's services in release's namespace, by name.
func servicesOf(snap swarm.Snapshot, release string) map[string]dswarm.Service {
	out := map[string]dswarm.Service{}
	for _, s := range snap.Services() {
		if s.Spec.Labels[stack.LabelNamespace] == release || strings.HasPrefix(s.Spec.Name, release+"_") {
			out[s.Spec.Name] = s
		}
	}
	return out
}

// releaseHealth rolls up the health of every service rel declares, as the
// snapshot shows them.
func releaseHealth(rel stack.Release, snap swarm.Snapshot) health.Result {
	results := map[string]health.Result{}
	for name, spec := range rel.Services {
		in := health.ServiceInput{Declared: &spec, EligibleNodes: snap.EligibleNodes(), Now: snap.TakenAt(), ReadFailed: snap.ReadFailed()}
		if live, ok := snap.Service(name); ok {
			in.Live = &live
			in.Tasks = snap.TasksOf(live.ID)
		}
		results[name] = health.Service(in)
	}
	return health.Release(results)
}

// rollout names a service of rel that the swarm is still updating or
// rolling back, or "" when none is: no write may go to the release then.
func rollout(rel stack.Release, snap swarm.Snapshot) string {
	for _, name := range slices.Sorted(maps.Keys(rel.Services)) {
		live, ok := snap.Service(name)
		if !ok || live.UpdateStatus == nil {
			continue
		}
		switch live.UpdateStatus.State {
		case dswarm.UpdateStateUpdating, dswarm.UpdateStateRollbackStarted:
			return fmt.Sprintf("service %s is %s", name, live.UpdateStatus.State)
		}
	}
	return ""
}

// rolledBack returns the daemon's reason when a service of rel was rolled
// back by Swarm, or "".
func rolledBack(rel stack.Release, snap swarm.Snapshot) string {
	for _, name := range slices.Sorted(maps.Keys(rel.Services)) {
		live, ok := snap.Service(name)
		if ok && live.UpdateStatus != nil && live.UpdateStatus.State == dswarm.UpdateStateRollbackCompleted {
			return fmt.Sprintf("swarm rolled back service %s: %s", name, live.UpdateStatus.Message)
		}
	}
	return ""
}

// liveDrift compares the running services of an unchanged release with its
// render.
func (c *Controller) liveDrift(app appset.Application, rel stack.Release, snap swarm.Snapshot) []plan.Finding {
	return plan.Drift(rel, servicesOf(snap, rel.Name), plan.DriftOptions{
		Owner:        c.owner(app),
		NetworkNames: snap.NetworkNames(),
		ConfigNames:  snap.ConfigNames(),
	})
}

// correctable returns the findings an automated application puts right:
// everything but what Swarm rolled back, which must never be pushed back
// into the failing spec.
func correctable(findings []plan.Finding) []plan.Finding {
	var out []plan.Finding
	for _, f := range findings {
		if f.Kind != plan.RolledBack && f.Kind != plan.Unexpected {
			out = append(out, f)
		}
	}
	return out
}

// describeFindings is the one-line summary events and the status carry.
func describeFindings(findings []plan.Finding) string {
	var parts []string
	for _, f := range findings {
		what := string(f.Kind)
		if f.Field != "" {
			what += " " + f.Field
		}
		parts = append(parts, f.Service+": "+what)
	}
	slices.Sort(parts)
	return strings.Join(slices.Compact(parts), "; ")
}

// correct redeploys the drifted services of rel from the recorded state,
// without writing a revision, and leaves rolled-back services alone.
func (c *Controller) correct(ctx context.Context, app appset.Application, d desired, findings []plan.Finding) error {
	skip := map[string]bool{}
	for _, f := range findings {
		if f.Kind == plan.RolledBack {
			skip[f.Service] = true
		}
	}
	rel := d.release
	rel.Services = maps.Clone(rel.Services)
	for name := range skip {
		delete(rel.Services, name)
	}
	if err := c.gate(app, rel); err != nil {
		return err
	}
	defer c.markWrite(app.Name)
	_, err := apply.Apply(ctx, c.engine, rel, apply.Options{
		Owner:        c.owner(app),
		ResolveImage: apply.ResolveImage(app.SyncPolicy.ResolveImage),
		Commit:       d.commit,
		Actor:        notify.ActorFrom(ctx),
		Correction:   true,
		Logger:       c.log.With("app", app.Name),
	})
	if err != nil {
		return classifyApply(fmt.Errorf("correct drift of %s: %w", rel.Name, err))
	}
	c.emit(ctx, app, notify.DriftConverged, d.commit, fmt.Sprintf("redeployed release %s: %s", rel.Name, describeFindings(findings)))
	return nil
}

// gate refuses a write while a service of rel is still updating or rolling
// back: the reconcile waits and says so.
func (c *Controller) gate(app appset.Application, rel stack.Release) error {
	if c.live == nil {
		return nil
	}
	if why := rollout(rel, c.live.Current()); why != "" {
		return &WaitingError{Err: fmt.Errorf("release %s: waiting for a rollout: %s", rel.Name, why), Retry: 5 * time.Second}
	}
	return nil
}

// waitHealthy waits, up to the application's timeout, until every service
// of rel is healthy. A rollback by Swarm fails at once with the daemon's
// reason.
func (c *Controller) waitHealthy(ctx context.Context, app appset.Application, rel stack.Release) error {
	if c.live == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, app.SyncPolicy.Timeout)
	defer cancel()
	changes := c.live.Subscribe(ctx)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := health.Result{State: health.Unknown, Message: "not observed yet"}
	for {
		snap := c.live.Current()
		if why := rolledBack(rel, snap); why != "" {
			return &StalledError{Err: fmt.Errorf("release %s: %s", rel.Name, why)}
		}
		last = releaseHealth(rel, snap)
		if last.State == health.Healthy && rollout(rel, snap) == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return &TransientError{Err: fmt.Errorf("release %s not healthy within %s: %s (%s, %d/%d running)",
					rel.Name, app.SyncPolicy.Timeout, last.State, last.Message, last.Running, last.Desired)}
			}
			return ctx.Err()
		case <-changes:
		case <-tick.C:
		}
	}
}

// records turns recorded revisions into what prune proves ownership with.
func records(revs []apply.Revision) []prune.Record {
	out := make([]prune.Record, 0, len(revs))
	for _, r := range revs {
		out = append(out, prune.Record{Application: r.Application, Release: r.Release})
	}
	return out
}

// liveObjects lists the snapshot's objects for prune.
func liveObjects(snap swarm.Snapshot) []prune.Object {
	return prune.LiveObjects(snap.Services(), snap.Networks(), snap.Configs(), snap.Secrets(), snap.Volumes())
}

// describeObjects names what a prune touched: "service web_api, config web_x".
func describeObjects(objs []prune.Object) string {
	parts := make([]string, 0, len(objs))
	for _, o := range objs {
		parts = append(parts, string(o.Kind)+" "+o.Name)
	}
	return strings.Join(parts, ", ")
}

// snapshotConfigs serves apply's revision reads from the live snapshot, so
// that a no-op tick makes no Engine call of its own. apply checks the
// labels of every config itself, so the filters can be ignored here.
type snapshotConfigs struct{ snap swarm.Snapshot }

func (s snapshotConfigs) ConfigList(context.Context, dswarm.ConfigListOptions) ([]dswarm.Config, error) {
	return s.snap.Configs(), nil
}

// revisionSource is where app's recorded revisions are read: the live
// snapshot when it is readable and newer than the application's last write
// (a write it has not seen yet would read as a stale revision), the Engine
// otherwise.
func (c *Controller) revisionSource(app string) apply.ConfigLister {
	if c.live == nil {
		return c.engine
	}
	snap := c.live.Current()
	c.mu.Lock()
	wrote := c.wrote[app]
	c.mu.Unlock()
	if snap.ReadFailed() || snap.TakenAt().IsZero() || !snap.TakenAt().After(wrote) {
		return c.engine
	}
	return snapshotConfigs{snap: snap}
}

// markWrite records that app wrote to the swarm now.
func (c *Controller) markWrite(app string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wrote[app] = time.Now()
}

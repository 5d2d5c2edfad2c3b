package apply

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/stack"
)

// RestoreStep is one service a release rollback writes back: to Spec, the
// spec it ran before the failed write, or, when Spec is nil, removed,
// since the failed write created it.
type RestoreStep struct {
	Service string
	Spec    *swarm.ServiceSpec
}

// Restorer is what Restore writes with: Apply's Engine, and the removal
// of the services the failed write created. *swarm.Client satisfies it.
type Restorer interface {
	Engine
	ServiceRemove(ctx context.Context, serviceID string) error
}

// RestoreOptions are the inputs of Restore. Owner, Steps and To are
// required.
type RestoreOptions struct {
	Owner stack.Owner
	// Steps are written in their order: the reverse of the failed write's.
	Steps []RestoreStep
	// To is the revision written back: recorded again, as the newest
	// revision, with Restores naming it and Failed the failed commit.
	To     Revision
	Failed string
	// KeepRevisions bounds the revisions kept; 0 means
	// DefaultKeepRevisions.
	KeepRevisions int
	// Logger receives a line per service written; nil discards them.
	Logger *slog.Logger
}

// Restore writes a release whose rollout failed back to a revision it ran
// before: each step's service is updated to its earlier spec (unless it
// runs it already, as one Swarm rolled back itself does) or removed, in
// the order given; then the revision is recorded again. It never touches
// a service without the owner's labels, and never deletes a config or a
// secret: those the failed write created stay until the next apply,
// which finds the restored services running, deletes what none uses.
// Like Apply, it must not run concurrently for one release.
func Restore(ctx context.Context, eng Restorer, opts RestoreOptions) (Result, error) {
	if opts.KeepRevisions <= 0 {
		opts.KeepRevisions = DefaultKeepRevisions
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	a := &applier{eng: eng, rel: stack.Release{Name: opts.Owner.Release},
		opts: Options{Owner: opts.Owner, KeepRevisions: opts.KeepRevisions}, log: opts.Logger.With("release", opts.Owner.Release)}
	live, err := releaseServices(ctx, eng, opts.Owner.Release)
	if err != nil {
		return a.result, err
	}
	for _, step := range opts.Steps {
		if err := a.restoreService(ctx, eng, live, step); err != nil {
			return a.result, err
		}
	}
	revs, err := revisionConfigs(ctx, eng, opts.Owner)
	if err != nil {
		return a.result, err
	}
	n := 1
	if len(revs) > 0 {
		last, _ := revisionNumber(revs[len(revs)-1])
		n = last + 1
	}
	rev := opts.To
	rev.Number, rev.AppliedAt, rev.Actor, rev.Application = n, time.Now().UTC(), "", opts.Owner.Application
	rev.Restores, rev.Failed = opts.To.Number, opts.Failed
	if err := a.storeRevision(ctx, revs, rev); err != nil {
		return a.result, err
	}
	a.result.Revision = n
	return a.result, nil
}

// restoreService writes one step: the service found in live by name is
// removed or given its earlier spec back, keeping its live ForceUpdate
// counter, unless it runs that spec already. A service gone already is
// nothing to do.
func (a *applier) restoreService(ctx context.Context, eng Restorer, live map[string]swarm.Service, step RestoreStep) error {
	cur, ok := live[step.Service]
	if !ok {
		return nil
	}
	if !a.owns(cur) {
		return foreign(a.opts.Owner, foreignObject(KindService, step.Service, cur.Spec.Labels))
	}
	if step.Spec == nil {
		if err := eng.ServiceRemove(ctx, cur.ID); err != nil && !cerrdefs.IsNotFound(err) {
			return engineError(fmt.Sprintf("remove service %q", step.Service), err)
		}
		a.record(ctx, Change{Kind: KindService, Name: step.Service, ID: cur.ID, Action: Deleted})
		return nil
	}
	if unchanged(cur.Spec, *step.Spec) {
		a.record(ctx, Change{Kind: KindService, Name: step.Service, ID: cur.ID, Action: Unchanged})
		return nil
	}
	spec, err := copySpec(*step.Spec)
	if err != nil {
		return stalled("service %q: %w", step.Service, err)
	}
	spec.TaskTemplate.ForceUpdate = cur.Spec.TaskTemplate.ForceUpdate
	if _, err := a.eng.ServiceUpdate(ctx, cur.ID, cur.Version, spec, swarm.ServiceUpdateOptions{}); err != nil {
		return engineError(fmt.Sprintf("restore service %q", step.Service), err)
	}
	a.record(ctx, Change{Kind: KindService, Name: step.Service, ID: cur.ID, Action: Updated})
	return nil
}

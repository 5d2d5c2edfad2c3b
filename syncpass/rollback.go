package syncpass

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// rollbackFacts is everything the rollback decision judges once a step of
// a write plan failed.
type rollbackFacts struct {
	policy appset.Rollback
	// err is what the failed step returned: a *rolloutError when the
	// rollout failed after the write (not preempted by a newer commit).
	err error
	// ask is the pass's question: a sync back to a named revision is
	// itself a rollback (Ask.Rollback).
	ask Ask
	// lastHealthy is the revision the release ran healthy as the pass
	// started (see lastHealthy); nil when that is not known.
	lastHealthy *apply.Revision
	// before are the release's services as the pass's first look showed
	// them, by name; written the services this sync created or updated.
	before  map[string]dswarm.Service
	written []written
}

// written is one service a sync wrote: its wave, and whether it created it.
type written struct {
	name    string
	wave    int
	created bool
}

// rollbackPlan is what rollbackDecision decided: the steps to write, in
// order, and the revision they go back to; or why nothing is rolled back
// although the policy asks (reported with the failure). The zero value
// rolls nothing back and says nothing.
type rollbackPlan struct {
	steps []apply.RestoreStep
	to    *apply.Revision
	why   string
}

// rollbackDecision decides whether and how a failed sync's release is
// rolled back. It is pure; the rules run in order and TestRollbackDecision
// names each: only under rollback: release; only a rollout that failed
// after the write (tasks failing, health past the timeout, Swarm rolling
// a service back), not an Engine refusal nor one a newer commit preempts;
// never a rollback itself; only what this sync wrote; never without the
// last healthy revision, nor without the spec each updated service ran
// before. Services go back in the reverse of the write order: the last
// wave first, and within a wave in reverse name order.
func rollbackDecision(f rollbackFacts) rollbackPlan {
	var failed *rolloutError
	switch {
	case f.policy != appset.RollbackRelease:
		return rollbackPlan{}
	case !errors.As(f.err, &failed) || failed.preempted:
		return rollbackPlan{}
	case f.ask.Rollback:
		return rollbackPlan{why: "the failed sync is itself a rollback to a named revision, which is never rolled back"}
	case len(f.written) == 0:
		return rollbackPlan{why: "this sync wrote no service of the release"}
	case f.lastHealthy == nil:
		return rollbackPlan{why: "the last healthy revision is unknown (the release was not seen healthy before this sync)"}
	}
	order := slices.Clone(f.written)
	slices.SortFunc(order, func(a, b written) int { return cmp.Or(cmp.Compare(b.wave, a.wave), strings.Compare(b.name, a.name)) })
	p := rollbackPlan{to: f.lastHealthy}
	for _, w := range order {
		if w.created {
			p.steps = append(p.steps, apply.RestoreStep{Service: w.name})
			continue
		}
		was, ok := f.before[w.name]
		if !ok {
			return rollbackPlan{why: "the spec service " + w.name + " ran before this sync is unknown"}
		}
		spec := was.Spec
		p.steps = append(p.steps, apply.RestoreStep{Service: w.name, Spec: &spec})
	}
	return p
}

// lastHealthy is the revision a failed rollout goes back to: recorded,
// the release's revision before the write, when it was seen running
// healthy (healthy names it: the number the release's passes last saw
// so), or else when the pass's first look (seen: it shows the
// application's writes) finds every service it records healthy and
// converged, with no rollout under way; nil when neither is known. It is
// pure.
func lastHealthy(recorded *apply.Revision, healthy int, snap swarm.Snapshot, seen bool) *apply.Revision {
	switch {
	case recorded == nil || len(recorded.Release.Services) == 0:
		return nil
	case recorded.Number == healthy:
		return recorded
	case !seen || snap.ReadFailed():
		return nil
	}
	rel := Kept(recorded.Release)
	if Health(rel, snap).State != health.Healthy || Rollout(rel, snap) != "" || Converged(rel, snap) != "" {
		return nil
	}
	return recorded
}

// writtenServices lists the services res created or updated, with their
// waves in rel.
func (w *writer) writtenServices() []written {
	var out []written
	for _, ch := range w.out.res.Changes {
		if ch.Kind != apply.KindService || ch.Action != apply.Created && ch.Action != apply.Updated {
			continue
		}
		out = append(out, written{name: ch.Name, wave: waveOf(w.d, ch.Name), created: ch.Action == apply.Created})
	}
	return out
}

// waveOf is the wave of service in d's release.
func waveOf(d desired, service string) int { return stack.WaveOf(d.release.Services[service]) }

// rollback runs the rollback decision for the failure failed and, when
// it says so, writes the release back (apply.Restore), holds the failed
// commit in the swarm and raises release-rolled-back. It reports whether
// the release was rolled back; its error is the rollback's own failure.
func (w *writer) rollback(ctx context.Context, in Input, failed error) (bool, error) {
	p := rollbackDecision(rollbackFacts{policy: w.app.SyncPolicy.Rollback, err: failed, ask: in.Ask,
		lastHealthy: lastHealthy(w.recorded, in.Memo.healthyRevision, in.Live, in.SeenWrites), before: servicesOf(in.Live, w.d.release.Name), written: w.writtenServices()})
	if p.why != "" {
		w.env.Log.Warn("release not rolled back", "app", w.app.Name, "release", w.d.release.Name, "revision", w.d.commit, "why", p.why)
		w.notRolledBack = p.why
	}
	if p.to == nil {
		return false, nil
	}
	res, err := apply.Restore(ctx, w.env.Engine, apply.RestoreOptions{Owner: w.opts.Owner, Steps: p.steps, To: *p.to,
		Failed: w.d.commit, Logger: w.opts.Logger})
	if err != nil {
		return false, transientUnlessStalled(fmt.Errorf("roll %s back to revision %d: %w", w.app.Release, p.to.Number, err))
	}
	cause := causeOf(failed)
	line := cmp.Or(cause.String(), failed.Error())
	hold := apply.Hold{Since: w.env.Now(), Failed: &apply.FailedRollout{Commit: w.d.commit, Key: w.d.key(), Restored: p.to.Commit,
		Revision: res.Revision, Cause: line, Since: w.env.Now()}}
	if err := apply.SaveHold(ctx, w.env.Engine, w.opts.Owner, hold); err != nil {
		w.env.Log.Warn("hold not recorded in the swarm; it lasts until the controller restarts", "app", w.app.Name, "err", err)
	}
	w.out.hold = &hold
	msg := fmt.Sprintf("release %s: the rollout of %s failed; %s written back to revision %d (%s) as revision %d; %s is held until a new commit, a sync or a rollback",
		w.app.Release, gitsource.ShortCommit(w.d.commit), restoredNames(p.steps), p.to.Number, gitsource.ShortCommit(p.to.Commit),
		res.Revision, gitsource.ShortCommit(w.d.commit))
	emitCause(ctx, w.env, w.app, notify.ReleaseRolledBack, w.d.commit, msg, cause, line)
	return true, nil
}

// restoredNames lists the steps' services in their order, each removed
// one marked.
func restoredNames(steps []apply.RestoreStep) string {
	var names []string
	for _, s := range steps {
		if s.Spec == nil {
			names = append(names, s.Service+" (removed)")
			continue
		}
		names = append(names, s.Service)
	}
	return strings.Join(names, ", ")
}

// rolledBackError is the error of a sync whose release was rolled back:
// stalled, since the failed commit is held until git moves.
func rolledBackError(err error) error {
	return &outcome.StalledError{Err: fmt.Errorf("%w; the release was rolled back and the commit is held", err)}
}

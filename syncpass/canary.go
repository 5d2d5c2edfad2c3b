package syncpass

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/canary"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// This file is progressive delivery's part of the pass: a release whose
// service has a canary strategy (stack.Release.Canaries) does not write a
// new spec of it in place. The first write starts a canary service beside
// the stable one, with the new spec; each pass after it takes the canary
// at most one step on (canary.Next, pure), from the state the canary's
// own service records in the swarm, and asks to run again when its next
// step is due (Result.Requeue); the last step promotes it (the release's
// write, then the canary goes) and a failure aborts it (the canary goes,
// the commit is held). Nothing of a canary is kept between passes but
// what the swarm shows.

// CanaryAction is what someone asks of a running canary.
type CanaryAction string

const (
	// CanaryPromote gives the stable service the canary's spec now,
	// whatever steps are left; CanaryAbort removes the canary and holds
	// its commit.
	CanaryPromote CanaryAction = "promote"
	CanaryAbort   CanaryAction = "abort"
)

// CanaryPhase is where a canary stands. The zero value is no canary.
type CanaryPhase string

const (
	CanaryProgressing CanaryPhase = "progressing"
	// CanaryPaused waits for someone: a pause without a duration, or an
	// analysis that was inconclusive.
	CanaryPaused   CanaryPhase = "paused"
	CanaryPromoted CanaryPhase = "promoted"
	CanaryAborted  CanaryPhase = "aborted"
)

// canaryRetry is the least a pass asks to wait before the next one: the
// snapshot must show the write first.
const canaryRetry = 500 * time.Millisecond

// CanaryStatus is a release's canary as the status shows it.
type CanaryStatus struct {
	// Service is the stable service's full name, Canary the canary's.
	Service, Canary string
	Commit          string
	Phase           CanaryPhase
	// Step is the current step, from 1 (Steps+1 once every step passed),
	// and StepName what it does ("setWeight 20").
	Step, Steps int
	StepName    string
	// Weight is the weight in place; Replicas and Stable the canary's and
	// the stable service's replicas as written, of Total.
	Weight, Replicas, Stable, Total int
	Started, Since                  time.Time
	// Next is when the canary is looked at again; zero while it waits for
	// someone.
	Next time.Time
	// Message says why it is paused, promoted or aborted.
	Message string
	// Analysis is the current analysis step's runs, with their values.
	Analysis []canary.Run
}

// canaryFacts is what gate knows of a release's canary: one runs (the
// snapshot shows it), this render starts one (a service with a strategy
// is updated and runs), or either would hold but the snapshot does not
// show the application's last writes, so a canary's state cannot be
// trusted from it (unseen).
type canaryFacts struct {
	running, starts, unseen bool
}

// canaryFactsOf says what gate knows of d's canary, seen being the look
// at the swarm and p the plan.
func canaryFactsOf(in Input, d desired, seen observed, p plan.Release) canaryFacts {
	var f canaryFacts
	if !seen.has {
		return f
	}
	_, wanted := canaryTarget(d, p, in.Live)
	wanted = wanted && !in.Ask.Rollback
	switch {
	case (seen.canary != nil || wanted) && !seen.readable:
		f.unseen = true
	case seen.canary != nil:
		f.running = true
	default:
		f.starts = wanted
	}
	return f
}

// writes is how a write gate lets through goes: a canary's start, or the
// release's write.
func (f canaryFacts) writes() next {
	if f.starts {
		return steer
	}
	return write
}

// judgeCanary is gate's rule for a release whose canary runs (or would
// start, unseen): wait for the snapshot, stay where it is while a window
// holds it (unless someone asks), else take it on.
func judgeCanary(f facts, v verdict) verdict {
	switch {
	case f.canary.unseen:
		v.then, v.err = hold, &outcome.WaitingError{Err: fmt.Errorf("release %s: the live snapshot does not show the canary's last write yet", f.app.Release), Retry: time.Second}
	case f.window.Held && (f.window.ManualDenied || !f.ask.Sync && f.ask.Canary == ""):
	default:
		v.then = steer
	}
	return v
}

// canaryTarget names the service of d's release whose canary this render
// starts: one with a strategy that the plan updates and snap runs.
func canaryTarget(d desired, p plan.Release, snap swarm.Snapshot) (string, bool) {
	for _, ch := range p.Changes {
		if _, has := d.release.Canaries[ch.Name]; !has || ch.Kind != plan.KindService || ch.Op != plan.Update {
			continue
		}
		if _, runs := snap.Service(ch.Name); runs {
			return ch.Name, true
		}
	}
	return "", false
}

// canaryIn returns owner's canary service in snap, nil when none runs.
func canaryIn(snap swarm.Snapshot, owner stack.Owner) *dswarm.Service {
	for _, s := range snap.Namespace(owner.Release).Services {
		if s.Spec.Labels[stack.LabelKind] == stack.KindCanary && owner.Owns(s.Spec.Labels) {
			return &s
		}
	}
	return nil
}

// canaryLook is one pass's look at a release's canary.
type canaryLook struct {
	stable, name string
	// strategy is the render's for stable; nil when it has none (or the
	// pass is a rollback, which never canaries).
	strategy   *canary.Strategy
	live       *dswarm.Service // the canary; nil when none runs
	stableLive *dswarm.Service
	state      canary.State
	// stale: live runs another render than the pass's (or its state does
	// not read).
	stale bool
	// total is the stable service's replicas in the render, before its
	// replicas as the recorded revision (else the swarm) has them.
	total, before int
}

// lookCanary looks at the canary of d's release in the pass's snapshot.
func lookCanary(in Input, d desired, owner stack.Owner, p plan.Release, recorded *apply.Revision) canaryLook {
	var c canaryLook
	if c.live = canaryIn(in.Live, owner); c.live != nil {
		c.stable, c.name = c.live.Spec.Labels[stack.LabelCanaryOf], c.live.Spec.Name
		st, err := canary.Decode(c.live.Spec.Labels[stack.LabelCanary])
		c.state, c.stale = st, err != nil || st.Key != keyDigest(d)
	} else {
		c.stable, _ = canaryTarget(d, p, in.Live)
		c.name = canaryName(c.stable)
	}
	if s, ok := d.release.Canaries[c.stable]; ok && !in.Ask.Rollback {
		c.strategy = &s
	}
	if s, ok := in.Live.Service(c.stable); ok {
		c.stableLive = &s
		c.before = replicasOf(s.Spec)
	}
	if recorded != nil {
		if spec, ok := recorded.Release.Services[c.stable]; ok {
			c.before = replicasOf(spec)
		}
	}
	c.total = replicasOf(d.release.Services[c.stable])
	return c
}

// canary takes the release's canary one step on; see the file's doc.
func (out *Outcome) canary(ctx context.Context, env Env, in Input, d desired) Outcome {
	c := lookCanary(in, d, env.owner(in.App), out.Result.Plan, out.Result.Recorded)
	changed := out.Result.Plan.Changed()
	switch {
	case c.live != nil && (c.strategy == nil || c.stale && !changed):
		// Git moved past the canary (back to what runs, or to a render
		// without a strategy, or a rollback was asked for): it goes, and
		// the release is written as git wants it.
		if err := dropCanary(ctx, env, in, c); err != nil {
			return out.failed(err)
		}
		if !changed {
			return out.failed(nil)
		}
		return out.write(ctx, env, in, d)
	case c.live == nil || c.stale:
		return out.startCanary(ctx, env, in, d, c)
	}
	o := c.observe(in)
	dec := canary.Next(*c.strategy, c.state, o)
	if dec.Action == canary.Measure {
		dec = canary.Measured(*c.strategy, dec, measure(ctx, env, in, d, c, dec), o)
	}
	return out.steer(ctx, env, in, d, c, dec, o)
}

// observe is what the pass's snapshot says of the running canary c, with
// what someone asked of it.
func (c canaryLook) observe(in Input) canary.Observation {
	one := stack.Release{Name: in.App.Release, Services: map[string]dswarm.ServiceSpec{c.name: c.live.Spec}}
	o := canary.Observation{Now: in.Now, CanaryReplicas: replicasOf(c.live.Spec), Timeout: in.App.SyncPolicy.Timeout,
		Promote: in.Ask.Canary == CanaryPromote, Abort: in.Ask.Canary == CanaryAbort}
	if c.stableLive != nil {
		o.StableReplicas = replicasOf(c.stableLive.Spec)
	}
	h := Health(one, in.Live)
	o.Settled = h.State == health.Healthy && h.Running >= o.CanaryReplicas && Converged(one, in.Live) == ""
	o.Failures = failuresSince(in.Live, *c.live, c.state.Since)
	if cause, ok := findFailure(one, in.Live, c.state.Since); ok {
		o.Cause = cause.String()
	}
	return o
}

// failuresSince counts the tasks of svc that failed, were rejected or
// exited since since: each a failure or a restart of the canary.
func failuresSince(snap swarm.Snapshot, svc dswarm.Service, since time.Time) int {
	n := 0
	for _, t := range snap.TasksOf(svc.ID) {
		if t.Status.State == dswarm.TaskStatePending {
			continue // waiting for a node is no failure of the canary's
		}
		if _, failed := newestFailed([]dswarm.Task{t}, svc.Spec.Mode, since); failed {
			n++
		}
	}
	return n
}

// keyDigest identifies d's render (its key) in a canary's state, bounded.
func keyDigest(d desired) string {
	sum := sha256.Sum256([]byte(d.key()))
	return hex.EncodeToString(sum[:8])
}

// canaryName is the name of stable's canary service, within Swarm's 63
// characters: a name too long is cut and a hash of it added.
func canaryName(stable string) string {
	const suffix = "-canary"
	if len(stable)+len(suffix) <= 63 {
		return stable + suffix
	}
	sum := sha256.Sum256([]byte(stable))
	return stable[:63-len(suffix)-9] + "-" + hex.EncodeToString(sum[:4]) + suffix
}

// replicasOf is a replicated spec's replicas (1 when unset), 0 for others.
func replicasOf(spec dswarm.ServiceSpec) int {
	switch r := spec.Mode.Replicated; {
	case r == nil:
		return 0
	case r.Replicas == nil:
		return 1
	}
	return int(*spec.Mode.Replicated.Replicas)
}

// canarySpec is the canary of stable, whose spec in the render is spec:
// the same task on the same networks and aliases, so that DNS spreads
// requests over both by task, with replicas tasks, its state in a label,
// and no published port but a host-mode one the Engine picks (a fixed
// one is the stable service's).
func canarySpec(spec dswarm.ServiceSpec, stable string, replicas int, st canary.State) dswarm.ServiceSpec {
	spec.Name = canaryName(stable)
	spec.Labels = maps.Clone(spec.Labels)
	if spec.Labels == nil {
		spec.Labels = map[string]string{}
	}
	delete(spec.Labels, stack.LabelWave)
	spec.Labels[stack.LabelKind], spec.Labels[stack.LabelCanaryOf], spec.Labels[stack.LabelCanary] = stack.KindCanary, stable, st.Encode()
	n := uint64(replicas)
	spec.Mode = dswarm.ServiceMode{Replicated: &dswarm.ReplicatedService{Replicas: &n}}
	if ep := spec.EndpointSpec; ep != nil {
		e := *ep
		e.Ports = slices.DeleteFunc(slices.Clone(ep.Ports), func(p dswarm.PortConfig) bool {
			return p.PublishMode != dswarm.PortConfigPublishModeHost || p.PublishedPort != 0
		})
		spec.EndpointSpec = &e
	}
	return spec
}

// requeue is how soon a pass asks to run again for a decision due at
// due, at now: never sooner than the snapshot can show a write.
func requeue(now, due time.Time) time.Duration {
	if due.IsZero() {
		return 0
	}
	return max(due.Sub(now), canaryRetry)
}

// status is the canary as dec leaves it, seen with o.
func (c canaryLook) status(d desired, dec canary.Decision, o canary.Observation) *CanaryStatus {
	st := dec.State
	s := &CanaryStatus{Service: c.stable, Canary: c.name, Commit: d.commit, Phase: CanaryProgressing, Step: st.Step + 1,
		Steps: len(c.strategy.Steps), Weight: st.Weight, Replicas: o.CanaryReplicas, Stable: o.StableReplicas, Total: st.Total,
		Started: st.Started, Since: st.Since, Next: dec.Due, Message: st.Paused, Analysis: st.Runs}
	if st.Step < len(c.strategy.Steps) {
		s.StepName = c.strategy.Steps[st.Step].String()
	}
	switch dec.Action {
	case canary.ScaleCanary:
		s.Replicas = dec.Canary
	case canary.ScaleStable:
		s.Stable = dec.Stable
	}
	if st.Paused != "" {
		s.Phase = CanaryPaused
	}
	return s
}

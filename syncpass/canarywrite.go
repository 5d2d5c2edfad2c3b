package syncpass

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/canary"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/hook"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
)

// canaryStartPlan is the part of d's write plan that runs before a canary
// starts: what the new spec needs (restamp, sync-started, a chart's
// required networks, the release's networks, configs and secrets, its
// pre-sync hooks), and no service.
func canaryStartPlan(app appset.Application, d desired, recorded, live bool) []writeStep {
	var steps []writeStep
	for _, s := range writePlan(app, d.release, d.chart, recorded, live, false) {
		switch s.kind {
		case stepStable, stepRestamp, stepAnnounce, stepRequired:
			steps = append(steps, s)
		}
	}
	steps = append(steps, writeStep{kind: stepConfigs})
	if hasHooks(d.release, stack.PreSync) {
		steps = append(steps, writeStep{kind: stepPreSync})
	}
	return steps
}

// startCanary starts the canary of c.stable with d's spec, at its first
// step, or starts it over for a newer render: sync-started, what the new
// spec needs (canaryStartPlan), then the canary service. A hold off an
// earlier failed commit is lifted first, as a write lifts it.
func (out *Outcome) startCanary(ctx context.Context, env Env, in Input, d desired, c canaryLook) Outcome {
	if c.strategy == nil || c.stableLive == nil {
		// Gate and this look read the same snapshot: this is no canary.
		return out.write(ctx, env, in, d)
	}
	st := canary.Start(d.commit, keyDigest(d), c.total, c.before, in.Now)
	o := canary.Observation{Now: in.Now, StableReplicas: replicasOf(c.stableLive.Spec)}
	dec := canary.Next(*c.strategy, st, o)
	// A canary started over for a newer render keeps its tasks (they
	// take the new spec by its update_config); the weight settles from
	// there, the stable service growing first.
	replicas := 0
	if c.live != nil {
		replicas = replicasOf(c.live.Spec)
	}
	if dec.Action == canary.ScaleCanary {
		replicas = dec.Canary
	}
	out.liftHold(ctx, env, in)
	w := newWriter(env, in, d, fmt.Sprintf("canary of %s: %s", c.stable, out.Result.Plan.Summary()), out.Result.Recorded)
	defer w.close()
	for _, s := range canaryStartPlan(in.App, d, out.Result.Recorded != nil, env.Live != nil) {
		err := env.fenceStep(s)
		if err == nil {
			err = w.run(ctx, in, s)
		}
		if err != nil {
			if s.kind >= stepAnnounce {
				syncFailed(ctx, env, in.App, d.commit, err)
			}
			if preSyncFailed(err) {
				out.Memo.hookFailed = refusal{key: d.key(), err: err}
			}
			return out.failed(err)
		}
	}
	err := env.fence()
	if err == nil {
		err = writeCanary(ctx, env, in, d, c, replicas, dec.State)
	}
	if err != nil {
		syncFailed(ctx, env, in.App, d.commit, err)
		return out.failed(err)
	}
	o.CanaryReplicas = replicas
	dec.Due = in.Now
	out.Found.Canary = c.status(d, dec, o)
	emit(ctx, env, in.App, notify.CanaryStep, d.commit, stepMessage(in.App.Release, *out.Found.Canary, "started"))
	out.Result.Requeue = requeue(in.Now, dec.Due)
	return out.failed(nil)
}

// writeCanary writes c's canary from d's render with replicas tasks and
// state st, with the release's networks, configs and secrets (Apply of an
// earlier wave: no revision, nothing rotated removed).
func writeCanary(ctx context.Context, env Env, in Input, d desired, c canaryLook, replicas int, st canary.State) error {
	spec := canarySpec(d.release.Services[c.stable], c.stable, replicas, st)
	rel := d.release
	rel.Services, rel.Hooks, rel.Canaries = map[string]dswarm.ServiceSpec{spec.Name: spec}, nil, nil
	_, err := apply.Apply(ctx, env.Engine, rel, apply.Options{Owner: env.owner(in.App), ResolveImage: apply.ResolveImage(in.App.SyncPolicy.ResolveImage),
		Commit: d.commit, Actor: in.Ask.Actor, Wave: true, Digests: env.Digests, Term: env.Term, Logger: env.Log.With("app", in.App.Name)})
	if err != nil {
		err = fmt.Errorf("write canary %s of %s at %s: %w", spec.Name, in.App.Release, gitsource.ShortCommit(d.commit), err)
		return hideDecrypted(transientUnlessStalled(err), d.release)
	}
	return nil
}

// steer does what canary.Next decided for a running canary: one write at
// most (or the promotion, or the abort), the event of a step that began,
// and when to look again.
func (out *Outcome) steer(ctx context.Context, env Env, in Input, d desired, c canaryLook, dec canary.Decision, o canary.Observation) Outcome {
	switch dec.Action {
	case canary.Promote:
		return out.promote(ctx, env, in, d, c, dec, o)
	case canary.Abort:
		return out.abort(ctx, env, in, d, c, dec, o)
	}
	var err error
	if dec.Action != canary.Wait {
		end := env.beginWrite(in.App.Name)
		if err = env.fence(); err == nil {
			err = canaryWrite(ctx, env, in, c, dec)
		}
		end()
	}
	out.Found.Canary = c.status(d, dec, o)
	// Past the last step the promotion follows, with its own event.
	if err == nil && dec.Stepped && dec.State.Step < len(c.strategy.Steps) {
		emit(ctx, env, in.App, notify.CanaryStep, d.commit, stepMessage(in.App.Release, *out.Found.Canary, "began"))
	}
	out.Result.Requeue = requeue(in.Now, dec.Due)
	return out.failed(err)
}

// canaryWrite makes the one write of a Save or a scale: the canary's
// state label, its replicas with it, or the stable service's replicas.
// Each is a write in place (apply.Edit): nothing but those fields moves.
func canaryWrite(ctx context.Context, env Env, in Input, c canaryLook, dec canary.Decision) error {
	owner, name := env.owner(in.App), c.name
	edit := func(spec *dswarm.ServiceSpec) { spec.Labels[stack.LabelCanary] = dec.State.Encode() }
	switch dec.Action {
	case canary.ScaleCanary:
		edit = func(spec *dswarm.ServiceSpec) {
			spec.Labels[stack.LabelCanary] = dec.State.Encode()
			setReplicas(spec, dec.Canary)
		}
	case canary.ScaleStable:
		name, edit = c.stable, func(spec *dswarm.ServiceSpec) { setReplicas(spec, dec.Stable) }
	}
	if _, err := apply.Edit(ctx, env.Engine, owner, name, edit); err != nil {
		return transientUnlessStalled(fmt.Errorf("canary of %s: write %s: %w", c.stable, name, err))
	}
	return nil
}

// setReplicas sets a replicated spec's replicas.
func setReplicas(spec *dswarm.ServiceSpec, n int) {
	r := uint64(max(n, 0))
	spec.Mode = dswarm.ServiceMode{Replicated: &dswarm.ReplicatedService{Replicas: &r}}
}

// promote gives the stable service the canary's spec: the release's own
// write, which waits until it runs healthy (its update_config rolls it
// out), without the pre-sync hooks that ran as the canary started; then
// the canary goes, whatever the write did: a failed promotion is the
// release's failed rollout, rolled back as its policy says.
func (out *Outcome) promote(ctx context.Context, env Env, in Input, d desired, c canaryLook, dec canary.Decision, o canary.Observation) Outcome {
	waited := in
	waited.App.SyncPolicy.Wait = true
	rest := d
	rest.release.Hooks = withoutPhase(d.release.Hooks, stack.PreSync)
	out.write(ctx, env, waited, rest)
	end := env.beginWrite(in.App.Name)
	rmErr := env.fence()
	if rmErr == nil {
		_, rmErr = apply.RemoveCanaries(ctx, env.Engine, env.owner(in.App))
	}
	end()
	s := c.status(d, dec, o)
	s.Phase, s.Message, s.Next = CanaryPromoted, dec.Why, time.Time{}
	if out.Err != nil {
		s.Phase, s.Message = CanaryAborted, "the promotion failed: "+out.Err.Error()
		emit(ctx, env, in.App, notify.CanaryAborted, d.commit, stepMessage(in.App.Release, *s, "aborted"))
	} else {
		emit(ctx, env, in.App, notify.CanaryPromoted, d.commit, stepMessage(in.App.Release, *s, "promoted"))
	}
	out.Found.Canary = s
	if out.Err == nil && rmErr != nil {
		return out.failed(&outcome.TransientError{Err: fmt.Errorf("canary of %s promoted; remove it: %w", c.stable, rmErr)})
	}
	return *out
}

// withoutPhase is hooks without those of phase, as a new slice.
func withoutPhase(hooks []stack.Hook, phase stack.HookPhase) []stack.Hook {
	var out []stack.Hook
	for _, h := range hooks {
		if h.Phase != phase {
			out = append(out, h)
		}
	}
	return out
}

// abort ends a canary that failed (or that someone aborted): the stable
// service gets its replicas back, the canary goes, and the commit is held
// off as a release rollback holds it, until a new commit, a sync or a
// rollback; sync-failed and canary-aborted say why.
func (out *Outcome) abort(ctx context.Context, env Env, in Input, d desired, c canaryLook, dec canary.Decision, o canary.Observation) Outcome {
	if err := dropCanary(ctx, env, in, c); err != nil {
		return out.failed(err)
	}
	hold := in.Held
	hold.Since = env.Now()
	hold.Failed = &apply.FailedRollout{Commit: d.commit, Key: d.key(), Cause: dec.Why, Since: env.Now()}
	if r := out.Result.Recorded; r != nil {
		hold.Failed.Restored, hold.Failed.Revision = r.Commit, r.Number
	}
	if err := apply.SaveHold(ctx, env.Engine, env.owner(in.App), hold); err != nil {
		env.Log.Warn("hold not recorded in the swarm; it lasts until the controller restarts", "app", in.App.Name, "err", err)
	}
	out.Found.Held = &hold
	s := c.status(d, dec, o)
	s.Phase, s.Message, s.Next = CanaryAborted, dec.Why, time.Time{}
	out.Found.Canary = s
	err := &outcome.StalledError{Err: fmt.Errorf("release %s: the canary of %s at %s was aborted at step %d of %d: %s; %s is held until a new commit, a sync or a rollback",
		in.App.Release, c.stable, gitsource.ShortCommit(d.commit), s.Step, s.Steps, dec.Why, gitsource.ShortCommit(d.commit))}
	syncFailed(ctx, env, in.App, d.commit, err)
	emitCause(ctx, env, in.App, notify.CanaryAborted, d.commit, stepMessage(in.App.Release, *s, "aborted"), Cause{}, dec.Why)
	return out.failed(err)
}

// dropCanary gives the stable service of c the replicas it ran before
// the canary, then removes the canary: the stable service grows before
// the canary's tasks go.
func dropCanary(ctx context.Context, env Env, in Input, c canaryLook) error {
	if err := env.fence(); err != nil {
		return err
	}
	end := env.beginWrite(in.App.Name)
	defer end()
	owner := env.owner(in.App)
	if c.stableLive != nil {
		before := cmp.Or(c.state.Stable, c.before)
		if _, err := apply.Edit(ctx, env.Engine, owner, c.stable, func(spec *dswarm.ServiceSpec) { setReplicas(spec, before) }); err != nil {
			return transientUnlessStalled(fmt.Errorf("canary of %s: give %s its replicas back: %w", c.stable, c.stable, err))
		}
	}
	if _, err := apply.RemoveCanaries(ctx, env.Engine, owner); err != nil {
		return transientUnlessStalled(fmt.Errorf("canary of %s: remove it: %w", c.stable, err))
	}
	env.Log.Info("canary removed", "app", in.App.Name, "service", c.stable, "canary", c.name)
	return nil
}

// measure makes the measurements of the metrics dec names, one after the
// other, each within its timeout (a job within its hook's).
func measure(ctx context.Context, env Env, in Input, d desired, c canaryLook, dec canary.Decision) []canary.Sample {
	a := c.strategy.Steps[dec.State.Step].Analysis
	client := cmp.Or(env.Analysis, http.DefaultClient)
	out := make([]canary.Sample, len(dec.Metrics))
	for i, idx := range dec.Metrics {
		m := a.Metrics[idx]
		mctx, cancel := context.WithTimeout(ctx, m.Timeout)
		var s canary.Sample
		switch {
		case m.Prometheus != nil:
			s.Result, s.Err = m.Prometheus.Measure(mctx, client)
		case m.Web != nil:
			s.Result, s.Err = m.Web.Measure(mctx, client)
		default:
			// A job is a service it creates: a write, fenced as one.
			if s.Err = env.fence(); s.Err == nil {
				s.Result, s.Err = runJob(ctx, env, in, d, m.Job)
			}
		}
		cancel()
		env.Log.Debug("canary measured", "app", in.App.Name, "metric", m.Name, "result", s.Result, "err", s.Err)
		out[i] = s
	}
	return out
}

// runJob runs the analysis hook name of d's release once: its exit code is
// the result; a job that did not exit (refused, timed out) is an error.
func runJob(ctx context.Context, env Env, in Input, d desired, name string) (any, error) {
	for _, h := range d.release.Hooks {
		if h.Service != name || h.Phase != stack.Analysis {
			continue
		}
		res, err := hook.Run(ctx, env.Engine, h, hook.Options{Owner: env.owner(in.App), Commit: d.commit,
			Keep: in.App.SyncPolicy.KeepHookJobs, Logger: env.Log.With("app", in.App.Name, "release", in.App.Release)})
		var failed *hook.FailedError
		if err == nil || errors.As(err, &failed) && res.ExitCode != 0 {
			return res.ExitCode, nil
		}
		return nil, err
	}
	return nil, fmt.Errorf("no analysis hook %s in the release", name)
}

// stepMessage is a canary event's message: what happened, the step, the
// weight and replicas, and why.
func stepMessage(release string, s CanaryStatus, what string) string {
	msg := fmt.Sprintf("release %s: canary of %s %s", release, s.Service, what)
	if s.Step <= s.Steps {
		msg += fmt.Sprintf(" at step %d of %d (%s)", s.Step, s.Steps, s.StepName)
	}
	msg += fmt.Sprintf("; weight %d%%: %d canary and %d stable tasks of %d", s.Weight, s.Replicas, s.Stable, s.Total)
	if s.Message != "" {
		msg += "; " + s.Message
	}
	return msg
}

package syncpass

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/stack"
)

// stepKind is one kind of step of a release's write, in the order they run.
type stepKind int

const (
	// stepStable holds a chart that renders differently each time, once a
	// revision is recorded (see checkStable); before anything is written.
	stepStable stepKind = iota
	// stepRestamp moves what a renamed application left behind to this
	// one, in place (with a live snapshot to find it).
	stepRestamp
	// stepAnnounce raises sync-started and marks the application applying:
	// every step from here on that fails raises sync-failed.
	stepAnnounce
	// stepRequired creates the networks a chart's requirements create.
	stepRequired
	// stepConfigs writes the release's networks, configs and secrets, no
	// service and no revision, for the pre-sync hooks, which use them.
	stepConfigs
	stepPreSync
	// stepWave writes one earlier wave (with the waves before it), and
	// stepWaitWave waits until it converged and is healthy.
	stepWave
	stepWaitWave
	// stepRelease writes the whole release and records the revision.
	stepRelease
	// stepWait waits for health (syncPolicy.wait, or a rollback of the
	// whole release, which must know); stepRollback runs only after a
	// rollout failed in a wait (see rollbackDecision); stepPostSync runs
	// the post-sync hooks once the release is written (and found healthy).
	// A failure of a wait or a hook is raised at once; the self step still
	// runs unless the release was rolled back.
	stepWait
	stepRollback
	stepPostSync
	// stepSelf writes the controller's own service last, whatever the
	// steps before it found, since the revision already records it.
	stepSelf
)

// writeStep is one step of a write plan; wave names the wave of a wave step.
type writeStep struct {
	kind stepKind
	wave int
}

// writePlan lists the steps that write rel, the release app renders: the
// order of a sync is this data, run by writeRelease. recorded says a
// revision of the release exists, live that there is a live snapshot,
// self that rel holds the controller's own service. See TestWritePlan.
func writePlan(app appset.Application, rel stack.Release, cr *chartRender, recorded, live, self bool) []writeStep {
	var steps []writeStep
	add := func(k stepKind) { steps = append(steps, writeStep{kind: k}) }
	if cr != nil && recorded {
		add(stepStable)
	}
	if live {
		add(stepRestamp)
	}
	add(stepAnnounce)
	if cr != nil && len(cr.create) > 0 {
		add(stepRequired)
	}
	if hasHooks(rel, stack.PreSync) {
		add(stepConfigs)
		add(stepPreSync)
	}
	waves := rel.Waves()
	for _, w := range waves[:len(waves)-1] {
		steps = append(steps, writeStep{kind: stepWave, wave: w}, writeStep{kind: stepWaitWave, wave: w})
	}
	add(stepRelease)
	if waits(app, live) {
		add(stepWait)
	}
	if rollsBack(app, live) {
		add(stepRollback)
	}
	if hasHooks(rel, stack.PostSync) {
		add(stepPostSync)
	}
	if self {
		add(stepSelf)
	}
	return steps
}

// waits reports whether a sync of app waits for health after the
// release: syncPolicy.wait asks it, and a release rollback must know.
func waits(app appset.Application, live bool) bool {
	return app.SyncPolicy.Wait || rollsBack(app, live)
}

// rollsBack reports whether a failed rollout of app's release is rolled
// back whole: what was written before is read from the live snapshot.
func rollsBack(app appset.Application, live bool) bool {
	return app.SyncPolicy.Rollback == appset.RollbackRelease && live
}

// hasHooks reports whether rel has hooks at phase.
func hasHooks(rel stack.Release, phase stack.HookPhase) bool {
	return slices.ContainsFunc(rel.Hooks, func(h stack.Hook) bool { return h.Phase == phase })
}

// writeRelease runs the write plan of d's release, raising sync-started
// and then sync-succeeded or sync-failed, and returns what it wrote;
// recorded is the release's revision before it (nil: none). A failed step
// stops the steps after it but two: a rollout that failed in a wait is
// rolled back (stepRollback), and a failure after the release was written
// still lets the self step run, unless the release was rolled back.
func writeRelease(ctx context.Context, env Env, in Input, d desired, summary string, recorded *apply.Revision) (writeResult, error) {
	w := newWriter(env, in, d, summary, recorded)
	defer w.close()
	var failed error
	var failedAt stepKind
	for _, s := range writePlan(in.App, d.release, d.chart, recorded != nil, env.Live != nil, w.opts.Self.ID != "") {
		if failed != nil && !runsAfter(s.kind, failedAt, w.out.rolledBack) {
			continue
		}
		err := env.fenceStep(s)
		switch {
		case err != nil:
		case s.kind == stepRollback:
			w.out.rolledBack, err = w.rollback(ctx, in, failed)
		default:
			err = w.run(ctx, in, s)
		}
		switch {
		case err == nil:
		case s.kind < stepAnnounce:
			return w.out, err
		case s.kind == stepRollback:
			failed = fmt.Errorf("%w; the rollback failed: %w", failed, err)
		case failed == nil:
			syncFailed(ctx, env, in.App, d.commit, err)
			failed, failedAt = err, s.kind
		}
	}
	switch {
	case w.out.rolledBack:
		return w.out, rolledBackError(failed)
	case failed != nil:
		return w.out, withWhy(failed, w.notRolledBack)
	}
	emit(ctx, env, in.App, notify.SyncSucceeded, d.commit, applySummary(in.App.Release, w.out.res))
	return w.out, nil
}

// fenceStep asks the fence before a step that writes; the stable check
// and the waits write nothing.
func (env Env) fenceStep(s writeStep) error {
	switch s.kind {
	case stepStable, stepWaitWave, stepWait:
		return nil
	}
	return env.fence()
}

// runsAfter reports whether a step of kind runs once the step at failedAt
// failed: the rollback after a failed wait, and the controller's own
// service after a failure past the release's write unless the release was
// rolled back.
func runsAfter(kind, failedAt stepKind, rolledBack bool) bool {
	switch kind {
	case stepRollback:
		return failedAt == stepWaitWave || failedAt == stepWait
	case stepSelf:
		return failedAt > stepRelease && failedAt != stepSelf && !rolledBack
	}
	return false
}

// withWhy is err with why the release was not rolled back, when the
// policy asked for it.
func withWhy(err error, why string) error {
	if why == "" {
		return err
	}
	return fmt.Errorf("%w; not rolled back: %s", err, why)
}

// writeResult is what a write did: the changes, whether the release
// counts as applied (written, and healthy when waited for), and what the
// writes took.
type writeResult struct {
	res     apply.Result
	applied bool
	took    time.Duration
	// rolledBack: the rollout failed and the release was written back;
	// hold is then the hold recorded for the failed commit.
	rolledBack bool
	hold       *apply.Hold
}

// String names the step as TestWritePlan and the debug log read it.
func (s writeStep) String() string {
	names := [...]string{stepStable: "stable", stepRestamp: "restamp", stepAnnounce: "announce", stepRequired: "required",
		stepConfigs: "configs", stepPreSync: "pre-sync", stepWave: "wave", stepWaitWave: "wait wave", stepRelease: "release",
		stepWait: "wait", stepRollback: "rollback", stepPostSync: "post-sync", stepSelf: "self"}
	if s.kind < 0 || int(s.kind) >= len(names) {
		return "step " + strconv.Itoa(int(s.kind))
	}
	if s.kind == stepWave || s.kind == stepWaitWave {
		return names[s.kind] + " " + strconv.Itoa(s.wave)
	}
	return names[s.kind]
}

package syncpass

import (
	"context"
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
	// stepWait waits for health (syncPolicy.wait); stepPostSync runs the
	// post-sync hooks once the release is written (and found healthy).
	// A failure of either is raised at once; the self step still runs.
	stepWait
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
	if app.SyncPolicy.Wait {
		add(stepWait)
	}
	if hasHooks(rel, stack.PostSync) {
		add(stepPostSync)
	}
	if self {
		add(stepSelf)
	}
	return steps
}

// hasHooks reports whether rel has hooks at phase.
func hasHooks(rel stack.Release, phase stack.HookPhase) bool {
	return slices.ContainsFunc(rel.Hooks, func(h stack.Hook) bool { return h.Phase == phase })
}

// writeRelease runs the write plan of d's release, raising sync-started
// and then sync-succeeded or sync-failed, and returns what it wrote. The
// first step that fails before the release is written stops the rest; a
// failed wait or post-sync hook still lets the self step run.
func writeRelease(ctx context.Context, env Env, in Input, d desired, summary string, recorded bool) (writeResult, error) {
	w := newWriter(env, in, d, summary)
	defer w.close()
	var failed error
	for _, s := range writePlan(in.App, d.release, d.chart, recorded, env.Live != nil, w.opts.Self.ID != "") {
		if failed != nil && s.kind != stepSelf {
			continue
		}
		err := env.fenceStep(s)
		if err == nil {
			err = w.run(ctx, in, s)
		}
		switch {
		case err == nil:
		case s.kind < stepAnnounce:
			return w.out, err
		case s.kind <= stepRelease || s.kind == stepSelf && failed == nil:
			syncFailed(ctx, env, in.App, d.commit, err.Error())
			return w.out, err
		case s.kind != stepSelf:
			syncFailed(ctx, env, in.App, d.commit, err.Error())
			failed = err
		}
	}
	if failed != nil {
		return w.out, failed
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

// writeResult is what a write did: the changes, whether the release
// counts as applied (written, and healthy when waited for), and what the
// writes took.
type writeResult struct {
	res     apply.Result
	applied bool
	took    time.Duration
}

// String names the step as TestWritePlan and the debug log read it.
func (s writeStep) String() string {
	names := [...]string{stepStable: "stable", stepRestamp: "restamp", stepAnnounce: "announce", stepRequired: "required",
		stepConfigs: "configs", stepPreSync: "pre-sync", stepWave: "wave", stepWaitWave: "wait wave", stepRelease: "release",
		stepWait: "wait", stepPostSync: "post-sync", stepSelf: "self"}
	if s.kind < 0 || int(s.kind) >= len(names) {
		return "step " + strconv.Itoa(int(s.kind))
	}
	if s.kind == stepWave || s.kind == stepWaitWave {
		return names[s.kind] + " " + strconv.Itoa(s.wave)
	}
	return names[s.kind]
}

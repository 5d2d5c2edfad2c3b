package syncpass

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/plan"
)

// This file holds what Run does with each phase's result: the Outcome's
// methods, each named for the moment of the pass it records.

// forGen is m for a definition read at app-set generation gen: the parts
// of the quiet key kept for another generation are dropped.
func (m Memo) forGen(gen uint64) Memo {
	if m.quietInputs.gen != gen {
		m.quietInputs = quietInputs{gen: gen}
	}
	return m
}

// noteResolved keeps the commit the application's own revision named, for
// the wakes that do not ask git again (Ask.Live).
func (m *Memo) noteResolved(in Input, d desired) {
	if in.Ask.Revision == "" && d.source.Repo == in.App.Source.Repo && d.source.Revision == in.App.Source.Revision {
		m.resolved = resolvedCommit{repo: in.App.Source.Repo, revision: in.App.Source.Revision, commit: d.commit}
	}
}

// replay ends a pass whose inputs (key) are those of the last quiet pass,
// which it repeats, refreshing only what moves with time (health, the
// windows), or of the last pass whose chart templates failed, whose
// failure it repeats.
func (out *Outcome) replay(env Env, in Input, d desired, key string) bool {
	out.GitTook, out.GitFailed = d.gitTook, d.gitFailed
	switch {
	case key == "":
		return false
	case key == out.Memo.quiet.key:
		if env.Fleet.RefreshHealth != nil {
			env.Fleet.RefreshHealth(in.App)
		}
		out.Found.Window = ptr(windowAt(in))
		out.Result, out.Quiet = out.Memo.quiet.out, true
		return true
	case key == out.Memo.templateFailed.key:
		out.Result.Commit, out.Result.Artifacts, out.Quiet = d.commit, d.artifacts, true
		out.Err = out.Memo.templateFailed.err
		return true
	}
	return false
}

// rendered records a render (or the resolve before it) that ended with
// err: the quiet caches start over, the artifacts waiting for their image
// are raised once, and a stalled failure once per commit.
func (out *Outcome) rendered(ctx context.Context, env Env, in Input, d desired, key string, err error) {
	out.GitTook, out.GitFailed = d.gitTook, d.gitFailed
	out.Memo.quiet, out.Memo.templateFailed = quietTick{}, templateFailure{}
	if tmpl := (*templateError)(nil); key != "" && errors.As(err, &tmpl) {
		out.Memo.templateFailed = templateFailure{key: key, err: err}
	}
	out.Result.Commit, out.Result.Artifacts = d.commit, d.artifacts
	if line := waitingArtifacts(d.artifacts); out.Memo.notices.raise(noticeArtifactWait, line) {
		emit(ctx, env, in.App, notify.DriftDetected, d.commit, "artifacts waiting for their image: "+line)
	}
	out.Memo.Report(ctx, env, in.App, in.Ask.Sync, d.commit, err)
	out.Err = err
}

// compared records the plan and the recorded revision it was made
// against, and logs the render's warnings once per commit, versions and
// warnings, not on every pass; the status shows them all the while (see
// TestRenderWarningsReachTheLogOnceAndTheStatus).
func (out *Outcome) compared(env Env, in Input, d desired, p plan.Release, latest apply.Latest) {
	out.Result.Plan, out.Result.Recorded = p, latest.Revision
	out.Result.Warnings = slices.Concat(d.release.Warnings, latest.Skipped)
	key := ""
	if len(out.Result.Warnings) > 0 {
		key = d.key() + "\x00" + strings.Join(out.Result.Warnings, "\x00")
	}
	if out.Memo.notices.raise(noticeWarning, key) {
		for _, w := range out.Result.Warnings {
			env.Log.Warn("render warning", "app", in.App.Name, "revision", d.commit, "warning", w)
		}
	}
}

// facts gathers what gate judges for d, seen being the look at the swarm.
func (out *Outcome) facts(in Input, d desired, seen observed) facts {
	return facts{app: in.App, ask: in.Ask, commit: d.commit, key: d.key(), plan: out.Result.Plan, moved: out.Result.Moved,
		window: windowAt(in), seen: seen, notReady: in.NotReady, foreign: out.Memo.foreign, hookFailed: out.Memo.hookFailed, held: in.Held.Failed,
		failedRollout: out.Memo.failedRollout, canary: canaryFactsOf(in, d, seen, out.Result.Plan)}
}

// judged raises what gate found, once per key, and records its findings
// and the refusals the next pass starts from.
func (out *Outcome) judged(ctx context.Context, env Env, in Input, d desired, v verdict) {
	for _, n := range v.notices {
		if n.kind == noticeKinds || out.Memo.notices.raise(n.kind, n.key) {
			emit(ctx, env, in.App, n.typ, d.commit, n.msg)
		}
	}
	out.Found.merge(v.found)
	out.Result.LiveDrift = v.found.Findings != nil && len(*v.found.Findings) > 0
	out.Memo.foreign, out.Memo.hookFailed = v.foreign, v.hookFailed
	if r := out.Result.Recorded; r != nil && v.healthy {
		out.Memo.healthyRevision = r.Number
	}
	if v.recovered {
		out.Memo.failedRollout = ""
	}
}

// corrected records a live drift correction that succeeded.
func (out *Outcome) corrected(in Input, d desired) {
	out.Result.LiveDrift = false
	out.Result.Synced = Sync{Revision: d.commit, Actor: in.Ask.Actor, Trigger: TriggerDriftCorrection}
	out.Memo.notices.raise(noticeLiveDrift, "")
	out.Found.Findings = ptr([]plan.Finding(nil))
}

// write writes d's release and records what came of it: a refusal not to
// retry, a rollback Swarm made, and, once written, what settles after it.
func (out *Outcome) write(ctx context.Context, env Env, in Input, d desired) Outcome {
	recorded := out.Result.Recorded
	out.liftHold(ctx, env, in)
	res, err := writeRelease(ctx, env, in, d, withMoved(out.Result.Plan.Summary(), out.Result.Moved), recorded)
	out.Result.Applying, out.Result.ApplyTook, out.Result.Applied = res.res, res.took, res.applied
	out.Found.Held = cmp.Or(res.hold, out.Found.Held)
	out.Memo.failedRollout = ""
	var r *rolloutError
	switch {
	case errors.As(err, &r) && r.cause.Known():
		out.Found.Cause = &r.cause
		if !res.rolledBack && !r.preempted {
			out.Memo.failedRollout = d.key()
		}
	case res.applied:
		out.Found.Cause = &Cause{}
		if waits(in.App, env.Live != nil) {
			out.Memo.healthyRevision = cmp.Or(res.res.Revision, revisionNumber(recorded))
		}
	}
	if res.applied {
		out.Result.Synced = Sync{Revision: d.commit, Actor: in.Ask.Actor, Trigger: triggerOf(in.Ask, recorded, d.commit)}
	}
	if preSyncFailed(err) {
		out.Memo.hookFailed = refusal{key: d.key(), err: err}
	}
	var foreign *apply.ForeignError
	if errors.As(err, &foreign) && env.Live != nil {
		// The namespace is read at the next pass: the snapshot now may
		// predate what the refused write created before it stopped.
		out.Memo.foreign = refusal{key: d.key(), err: err}
	}
	switch {
	case err == nil:
		out.settled(ctx, env, in, d)
	case env.Live != nil && rolledBack(d.release, env.Live.Current()) != "":
		out.Memo.notices.raise(noticeRolledBack, d.key()) // raised by the failed sync already
	}
	return out.failed(err)
}

// revisionNumber is r's number, 0 for none.
func revisionNumber(r *apply.Revision) int {
	if r == nil {
		return 0
	}
	return r.Number
}

// liftHold lifts the hold off a failed commit before a write the gate let
// through: git moved past it (a new commit or versions) or someone asked
// for a sync. A pin to a revision the hold also carries stays.
func (out *Outcome) liftHold(ctx context.Context, env Env, in Input) {
	if in.Held.Failed == nil {
		return
	}
	h := in.Held
	h.Failed = nil
	if err := apply.SaveHold(ctx, env.Engine, env.owner(in.App), h); err != nil {
		env.Log.Warn("hold not lifted in the swarm; a restarted controller finds it again", "app", in.App.Name, "err", err)
	}
	env.Log.Info("hold lifted", "app", in.App.Name, "revision", in.Held.Failed.Commit, "now", out.Result.Commit)
	out.Found.Held = &h
}

// rememberQuiet keeps a pass that found nothing to do, under its inputs'
// key, for the passes that follow with the same inputs: a drift
// correction made now is not made again by them.
func (out *Outcome) rememberQuiet(key string, d desired) {
	// A rollout left failing is looked at by every pass until it runs
	// healthy (see recovery): tasks moving change no input of the key.
	if key == "" || out.Result.LiveDrift || waitingArtifacts(d.artifacts) != "" || out.Memo.failedRollout != "" {
		return
	}
	q := withoutRecordedRelease(out.Result)
	q.Synced, q.Requeue = Sync{}, 0
	out.Memo.quiet = quietTick{key: key, out: q}
}

// failed ends the pass with err (nil: it succeeded).
func (out *Outcome) failed(err error) Outcome {
	out.Err = err
	return *out
}

// recoverPanic turns a panic of the pass into a failed Outcome.
func (out *Outcome) recoverPanic(env Env, in Input) {
	if r := recover(); r != nil {
		out.Err = fmt.Errorf("reconcile %s: panic: %v", in.App.Name, r)
		env.Log.Error("reconcile panicked", "app", in.App.Name, "err", out.Err, "stack", string(debug.Stack()))
	}
}

// merge takes every field f looked at.
func (f *Found) merge(o Found) {
	if o.Window != nil {
		f.Window = o.Window
	}
	if o.Findings != nil {
		f.Findings = o.Findings
	}
	if o.WaitingFor != nil {
		f.WaitingFor = o.WaitingFor
	}
	if o.Unmanaged != nil {
		f.Unmanaged = o.Unmanaged
	}
	if o.Previews != nil {
		f.Previews = o.Previews
	}
	if o.Cause != nil {
		f.Cause = o.Cause
	}
	if o.Held != nil {
		f.Held = o.Held
	}
	if o.Canary != nil {
		f.Canary = o.Canary
	}
}

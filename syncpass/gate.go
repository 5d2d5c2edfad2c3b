package syncpass

import (
	"fmt"
	"strings"
	"time"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/placement"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/window"
)

// dependencyRetry is how soon an application waiting for its dependencies
// looks again; rolloutRetry how soon one waiting for a rollout does.
const (
	dependencyRetry = 5 * time.Second
	rolloutRetry    = 5 * time.Second
	placeRetry      = time.Second
)

// facts is everything gate judges: the pass's question and what the pass
// found before deciding.
type facts struct {
	app    appset.Application
	ask    Ask
	commit string
	key    string // desired.key(): the commit and artifact versions
	plan   plan.Release
	moved  string // where the release was before a move ("" when none)
	window window.Verdict
	seen   observed
	// placed says whether the release's placement was checked (only once
	// every other rule let a write through); unplaceable is what no node
	// satisfies for its services.
	placed      placeCheck
	unplaceable []placement.Problem
	// notReady are the dependsOn entries not ready; foreign and hookFailed
	// the refusals the last pass left.
	notReady   []Dependency
	foreign    refusal
	hookFailed refusal
	// held is the failed rollout a release rollback holds off; nil: none.
	held *apply.FailedRollout
	// failedRollout is the key of the last write whose rollout failed
	// and was left as it was ("" for none).
	failedRollout string
	// canary is what the pass knows of the release's canary.
	canary canaryFacts
}

// next is what a pass does once gate has judged.
type next int

const (
	report next = iota // write nothing; the pass succeeded
	hold               // write nothing; the pass returns verdict.err
	write              // write the release
	steer              // take the release's canary one step on (see Outcome.canary)
)

// verdict is what gate decided.
type verdict struct {
	then next
	err  error // what a hold returns
	// correct: put live drift back before anything else; settle: the
	// release is where git wants it, so resource prune and previews follow.
	correct bool
	settle  bool
	// notices are raised in order, each once per key of its kind.
	notices []notice
	// found is what the status shows of this judgement.
	found Found
	// foreign and hookFailed are the refusals the next pass starts from.
	foreign, hookFailed refusal
	// recovered forgets the failed rollout the facts named: git moved
	// past it, or it runs healthy now (and sync-succeeded is raised).
	recovered bool
	// healthy: the release, unchanged, runs healthy as the look showed.
	healthy bool
}

// notice is one finding to raise as an event, once per key of its kind
// (noticeKinds: every time); an empty key forgets the kind's last one.
type notice struct {
	kind noticeKind
	key  string
	typ  notify.EventType
	msg  string
}

// gate decides, from what a pass found, whether to correct live drift,
// write, hold or only report, and what to raise. It is pure. The rules run
// in a fixed order, and each that stops the pass stops it before the
// rules after it are looked at; TestGate names every rule.
func gate(f facts) verdict {
	v := verdict{foreign: f.foreign, hookFailed: f.hookFailed}
	v.found.Window = ptr(f.window)
	// A requested sync a window refuses is refused before anything is
	// looked at: it records no findings.
	if f.ask.Sync && f.window.ManualDenied {
		err := &outcome.StalledError{Err: fmt.Errorf("sync of %s refused: %s, which allows no manual sync", f.app.Name, f.window)}
		v.then, v.err = hold, err
		v.notices = []notice{{kind: noticeKinds, typ: notify.SyncFailed, msg: err.Error()}}
		return v
	}
	recovery(f, &v)
	if f.canary.running || f.canary.unseen {
		return judgeCanary(f, v)
	}
	v.healthy = f.seen.healthy && !f.plan.Changed()
	if f.seen.has {
		v.found.Findings = ptr(f.seen.findings)
		if !f.plan.Changed() && judgeLive(f, &v) {
			return v
		}
	}
	if f.window.Held && !f.ask.Sync {
		v.found.WaitingFor = ptr([]string(nil))
		if f.plan.Changed() {
			v.notices = append(v.notices, notice{kind: noticeWindow, key: f.key, typ: notify.DriftDetected, msg: f.window.String() + ": " + f.plan.Summary()})
		}
		return v
	}
	v.notices = append(v.notices, notice{kind: noticeWindow})
	if !f.ask.Sync && !(f.app.SyncPolicy.Automated && f.plan.Changed()) {
		v.found.WaitingFor = ptr([]string(nil))
		if f.plan.Changed() {
			v.notices = append(v.notices, notice{kind: noticeGitDrift, key: f.key, typ: notify.DriftDetected, msg: withMoved(f.plan.Summary(), f.moved)})
		}
		v.settle = !f.plan.Changed()
		return v
	}
	return judgeWrite(f, v)
}

// recovery applies the rule of a rollout that failed and was left as it
// was: once every service runs the tasks it wants at the same commit and
// versions (a registry back, a dependency up), settled, the sync
// succeeded after all and is raised as such, once, though the failures
// just past may keep health at degraded a while; a new commit forgets it.
func recovery(f facts, v *verdict) {
	switch {
	case f.failedRollout == "":
	case f.failedRollout != f.key:
		v.recovered = true
	case !f.plan.Changed() && f.seen.runs:
		v.recovered = true
		v.notices = append(v.notices, notice{kind: noticeKinds, typ: notify.SyncSucceeded,
			msg: fmt.Sprintf("release %s: running at %s after its failed rollout", f.app.Release, gitsource.ShortCommit(f.commit))})
	}
}

// judgeLive applies the rules of an unchanged release's live state: a
// rollout Swarm rolled back holds the commit (raised once), and live drift
// is raised once per finding and corrected when the application is
// automated, no window holds it and no sync is asked for (a sync
// redeploys everything anyway). It reports whether the pass stops.
func judgeLive(f facts, v *verdict) bool {
	if f.seen.rolledBack != "" && !f.ask.Sync && f.app.SyncPolicy.Rollback != appset.RollbackNone {
		err := &outcome.StalledError{Err: fmt.Errorf("release %s at %s: %s", f.app.Release, gitsource.ShortCommit(f.commit), f.seen.rolledBack)}
		v.then, v.err = hold, err
		v.notices = append(v.notices, notice{kind: noticeRolledBack, key: f.key, typ: notify.SyncFailed, msg: err.Error()})
		return true
	}
	if len(f.seen.findings) == 0 {
		v.notices = append(v.notices, notice{kind: noticeLiveDrift})
		return false
	}
	line := describeFindings(f.seen.findings)
	v.notices = append(v.notices, notice{kind: noticeLiveDrift, key: line, typ: notify.LiveDriftDetected,
		msg: fmt.Sprintf("release %s: %s", f.app.Release, line)})
	v.correct = len(correctable(f.seen.findings)) > 0 && !f.ask.Sync && f.app.SyncPolicy.Automated && !f.window.Held
	return false
}

// judgeWrite applies the rules that may still hold a write back: a
// failed commit a release rollback holds off, dependencies not ready, a
// refusal that still stands, a rollout of the release under way unless it
// is failing and may be preempted, a release no node can place.
func judgeWrite(f facts, v verdict) verdict {
	if h := f.held; h != nil && h.Key == f.key && !f.ask.Sync {
		v.found.WaitingFor = ptr([]string(nil))
		v.then, v.err = hold, heldError(f.app.Release, *h)
		return v
	}
	var names, why []string
	for _, d := range f.notReady {
		names = append(names, d.Name)
		why = append(why, d.Name+" ("+d.Why+")")
	}
	v.found.WaitingFor = ptr(names)
	if len(names) > 0 {
		v.then, v.err = hold, &outcome.WaitingError{Err: fmt.Errorf("waiting for %s", strings.Join(why, ", ")), Retry: dependencyRetry}
		return v
	}
	// Someone else's objects refused this very render before, and nothing
	// changed since: say so again in the status, but write nothing and
	// raise no second sync-started/sync-failed pair.
	if f.foreign.holds(f.key, f.ask) && f.seen.has {
		r, stands := f.foreign.look(f.seen)
		if v.foreign = r; stands {
			v.then, v.err = hold, r.err
			return v
		}
	}
	v.foreign = refusal{}
	if f.hookFailed.holds(f.key, f.ask) {
		v.then, v.err = hold, f.hookFailed.err
		return v
	}
	v.hookFailed = refusal{}
	if f.seen.rollout != "" && (f.seen.failing == "" || f.app.SyncPolicy.WaitOutFailing) {
		v.then, v.err = hold, rolloutWait(f.app.Release, f.seen.rollout)
		return v
	}
	// Last, as it asks the registry: a release no node can place is
	// refused before any write, raised once per commit and versions (on
	// every requested sync), unless the application allows it; until the
	// snapshot lists the nodes, the write waits.
	switch f.placed {
	case placeUnlisted:
		v.then, v.err = hold, &outcome.WaitingError{Err: fmt.Errorf("release %s: waiting for the live snapshot to list the nodes, to check placement before the write", f.app.Release), Retry: placeRetry}
		return v
	case placeChecked:
		if err := unplaceableError(f.app, f.commit, f.unplaceable); err != nil {
			v.then, v.err = hold, err
			kind := noticePlacement
			if f.ask.Sync {
				kind = noticeKinds
			}
			v.notices = append(v.notices, notice{kind: kind, key: f.key, typ: notify.SyncFailed, msg: err.Error()})
			return v
		}
		v.notices = append(v.notices, notice{kind: noticePlacement})
	}
	v.then = f.canary.writes()
	return v
}

// heldError is the error of a pass that finds its commit held off after
// a release rollback: stalled until git moves or someone syncs.
func heldError(release string, h apply.FailedRollout) error {
	return &outcome.StalledError{Err: fmt.Errorf("release %s: held off %s since %s: its rollout failed (%s) and revision %d (%s) was written back; a new commit, a sync or a rollback lifts the hold",
		release, gitsource.ShortCommit(h.Commit), h.Since.UTC().Format(time.RFC3339), h.Cause, h.Revision, gitsource.ShortCommit(h.Restored))}
}

// rolloutWait is the error of a write held while Swarm still rolls a
// service of release out (why names it): the pass waits, and retries.
func rolloutWait(release, why string) error {
	return &outcome.WaitingError{Err: fmt.Errorf("release %s: waiting for a rollout: %s", release, why), Retry: rolloutRetry}
}

// look reports whether the release's namespace, as seen, is as it was
// when r was refused, and returns r with what it saw. The first look after
// the refusal that shows the refused write records the namespace; until
// such a look nothing is known to have changed.
func (r refusal) look(seen observed) (refusal, bool) {
	if !seen.readable {
		return r, true
	}
	if !r.observed {
		r.namespace, r.observed = seen.namespace, true
	}
	return r, seen.namespace == r.namespace
}

// withMoved is a plan's summary with where the release moved from.
func withMoved(summary, moved string) string {
	if moved == "" {
		return summary
	}
	return summary + "; " + moved
}

// windowAt is in.App's sync windows' verdict at the pass's calendar reading.
func windowAt(in Input) window.Verdict {
	return window.Evaluate(in.App.SyncWindows, in.App.Name, in.Now)
}

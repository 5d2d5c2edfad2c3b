package syncpass

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/window"
)

// Fixtures of TestGate: the plans a pass compares, the windows it judges
// and the findings a look at the swarm gives.
var (
	changedPlan   = plan.Release{Name: "web", Action: plan.Upgrade, Changes: []plan.Change{{Kind: plan.KindService, Name: "web_api", Op: plan.Update, Reason: "image changed"}}}
	unchangedPlan = plan.Release{Name: "web", Action: plan.Unchanged, Changes: []plan.Change{}}
	drifted       = []plan.Finding{{Release: "web", Service: "web_api", Kind: plan.Modified, Field: "image"}}
	rolledBackOne = []plan.Finding{{Release: "web", Service: "web_api", Kind: plan.RolledBack}}
)

// heldBy is a verdict of a deny window active at now, letting manual syncs
// through or not.
func heldBy(t *testing.T, manual bool) window.Verdict {
	t.Helper()
	w := window.Window{Kind: window.Deny, Schedule: window.MustParseCron("0 12 * * *"), Duration: time.Hour, ManualSync: manual, Applications: []string{"*"}}
	v := window.Evaluate([]window.Window{w}, "web", time.Date(2026, 12, 4, 12, 0, 30, 0, time.UTC))
	if !v.Held {
		t.Fatalf("fixture: window %v does not hold", w)
	}
	return v
}

// gateCase is one rule of TestGate: the facts, and what the verdict must
// say. Fields left zero in want are checked as zero.
type gateCase struct {
	name string
	f    facts
	want gateWant
}

type gateWant struct {
	then    next
	class   outcome.Class // of the error a hold returns
	errHas  string
	correct bool
	settle  bool
	// notices as kind=key pairs ("always" for noticeKinds), in order
	notices []string
	// found: whether findings and waiting-for are recorded, and the names
	findings   bool
	waitingFor []string
	waiting    bool // WaitingFor is recorded (possibly empty)
	// refusals left for the next pass, by their keys
	foreignKey, hookKey string
	// recovered: the failed rollout the facts named is forgotten
	recovered bool
}

func automated() appset.Application {
	app := appset.Application{Name: "web", Release: "web"}
	app.SyncPolicy.Automated = true
	return app
}

func manual() appset.Application { return appset.Application{Name: "web", Release: "web"} }

// TestGate names every rule between "compared" and "write", each as it
// holds against today's end-to-end behaviour (window_e2e_test,
// depends_e2e_test, hook_e2e_test, keep_e2e_test, e2e_test): the
// verdict's next step, its error, what it raises, and what it records.
func TestGate(t *testing.T) {
	live := observed{has: true, readable: true, namespace: "ns-1"}
	withFindings := live
	withFindings.findings = drifted
	rolled := live
	rolled.rolledBack = "swarm rolled back service web_api: update paused due to failure"
	updating := live
	updating.rollout = "service web_api is updating"
	changedNS := live
	changedNS.namespace = "ns-2"
	unreadable := observed{has: true}
	foreign := refusal{key: "c1", err: errors.New("apply web: service web_api belongs to someone else"), namespace: "ns-1", observed: true}
	foreignUnseen := refusal{key: "c1", err: foreign.err}
	hookFailed := refusal{key: "c1", err: &outcome.StalledError{Err: errors.New("pre-sync hook migrate failed")}}
	failingRollout := updating
	failingRollout.failing = "web_api: exit code 1"
	heldOff := &apply.FailedRollout{Commit: "c2", Key: "c2", Restored: "c1", Revision: 4, Cause: "web_api: exit code 1"}
	noneApp := automated()
	noneApp.SyncPolicy.Rollback = appset.RollbackNone
	waitsOut := automated()
	waitsOut.SyncPolicy.WaitOutFailing = true
	healthyNow := live
	healthyNow.healthy, healthyNow.runs = true, true
	runsNow := live
	runsNow.runs = true

	cases := []gateCase{
		{name: "a requested sync in a window that allows no manual sync is refused, with no findings recorded",
			f:    facts{app: automated(), ask: Ask{Sync: true}, key: "c1", plan: changedPlan, window: heldBy(t, false), seen: withFindings},
			want: gateWant{then: hold, class: outcome.Stalled, errHas: "refused", notices: []string{"always"}}},
		{name: "a requested sync in a window that lets manual syncs through is written",
			f:    facts{app: automated(), ask: Ask{Sync: true}, key: "c1", plan: changedPlan, window: heldBy(t, true), seen: live},
			want: gateWant{then: write, findings: true, waiting: true, notices: []string{"window="}}},
		{name: "a rollout Swarm rolled back holds the commit, raised once per commit and versions",
			f:    facts{app: automated(), key: "c1", commit: "c1", plan: unchangedPlan, seen: rolled},
			want: gateWant{then: hold, class: outcome.Stalled, errHas: "rolled back", findings: true, notices: []string{"rolledBack=c1"}}},
		{name: "a rollout Swarm rolled back is written again when a sync is asked",
			f:    facts{app: automated(), ask: Ask{Sync: true}, key: "c1", plan: unchangedPlan, seen: rolled},
			want: gateWant{then: write, findings: true, waiting: true, notices: []string{"liveDrift=", "window="}}},
		{name: "a rollout Swarm rolled back is not looked at once git moved",
			f:    facts{app: automated(), key: "c2", plan: changedPlan, seen: rolled},
			want: gateWant{then: write, findings: true, waiting: true, notices: []string{"window="}}},
		{name: "live drift of an automated application is raised once per finding and corrected, then it settles",
			f:    facts{app: automated(), key: "c1", plan: unchangedPlan, seen: withFindings},
			want: gateWant{then: report, correct: true, settle: true, findings: true, waiting: true, notices: []string{"liveDrift=web_api: modified image", "window="}}},
		{name: "live drift is not corrected while a window holds the application",
			f:    facts{app: automated(), key: "c1", plan: unchangedPlan, window: heldBy(t, true), seen: withFindings},
			want: gateWant{then: report, findings: true, waiting: true, notices: []string{"liveDrift=web_api: modified image"}}},
		{name: "live drift of a manual application is only raised",
			f:    facts{app: manual(), key: "c1", plan: unchangedPlan, seen: withFindings},
			want: gateWant{then: report, settle: true, findings: true, waiting: true, notices: []string{"liveDrift=web_api: modified image", "window="}}},
		{name: "live drift is not corrected by a requested sync, which writes everything anyway",
			f:    facts{app: automated(), ask: Ask{Sync: true}, key: "c1", plan: unchangedPlan, seen: withFindings},
			want: gateWant{then: write, findings: true, waiting: true, notices: []string{"liveDrift=web_api: modified image", "window="}}},
		{name: "what Swarm rolled back is raised but never corrected",
			f:    facts{app: automated(), key: "c1", plan: unchangedPlan, seen: observed{has: true, readable: true, findings: rolledBackOne}},
			want: gateWant{then: report, settle: true, findings: true, waiting: true, notices: []string{"liveDrift=web_api: rolled-back", "window="}}},
		{name: "a look without live drift forgets the drift raised last",
			f:    facts{app: automated(), key: "c1", plan: unchangedPlan, seen: live},
			want: gateWant{then: report, settle: true, findings: true, waiting: true, notices: []string{"liveDrift=", "window="}}},
		{name: "a held application reports git drift once per commit and writes nothing",
			f:    facts{app: automated(), key: "c2", plan: changedPlan, window: heldBy(t, true), seen: live},
			want: gateWant{then: report, findings: true, waiting: true, notices: []string{"window=c2"}}},
		{name: "a held application whose release is unchanged writes and settles nothing",
			f:    facts{app: automated(), key: "c1", plan: unchangedPlan, window: heldBy(t, true), seen: live},
			want: gateWant{then: report, findings: true, waiting: true, notices: []string{"liveDrift="}}},
		{name: "a manual application reports drift once per commit and versions, and does not settle",
			f:    facts{app: manual(), key: "c2", plan: changedPlan, seen: live},
			want: gateWant{then: report, findings: true, waiting: true, notices: []string{"window=", "gitDrift=c2"}}},
		{name: "an unchanged release settles: prune and previews follow",
			f:    facts{app: automated(), key: "c1", plan: unchangedPlan},
			want: gateWant{then: report, settle: true, waiting: true, notices: []string{"window="}}},
		{name: "a sync waits for dependencies that are not synced and healthy, naming each and why",
			f: facts{app: automated(), key: "c2", plan: changedPlan, seen: live,
				notReady: []Dependency{{Name: "db", Why: "not reconciled yet"}, {Name: "cache", Why: "degraded"}}},
			want: gateWant{then: hold, class: outcome.Waiting, errHas: "waiting for db (not reconciled yet), cache (degraded)", findings: true, waiting: true,
				waitingFor: []string{"db", "cache"}, notices: []string{"window="}}},
		{name: "a refusal by foreign objects is not retried while the namespace stays",
			f:    facts{app: automated(), key: "c1", plan: changedPlan, seen: live, foreign: foreign},
			want: gateWant{then: hold, errHas: "someone else", findings: true, waiting: true, foreignKey: "c1", notices: []string{"window="}}},
		{name: "a refusal by foreign objects is retried once the namespace changed",
			f:    facts{app: automated(), key: "c1", plan: changedPlan, seen: changedNS, foreign: foreign},
			want: gateWant{then: write, findings: true, waiting: true, notices: []string{"window="}}},
		{name: "a refusal by foreign objects stands while the swarm cannot show the refused write",
			f:    facts{app: automated(), key: "c1", plan: changedPlan, seen: unreadable, foreign: foreignUnseen},
			want: gateWant{then: hold, errHas: "someone else", findings: true, waiting: true, foreignKey: "c1", notices: []string{"window="}}},
		{name: "a refusal by foreign objects is retried for a new commit",
			f:    facts{app: automated(), key: "c2", plan: changedPlan, seen: live, foreign: foreign},
			want: gateWant{then: write, findings: true, waiting: true, notices: []string{"window="}}},
		{name: "a refusal by foreign objects is retried when a sync is asked",
			f:    facts{app: automated(), ask: Ask{Sync: true}, key: "c1", plan: changedPlan, seen: live, foreign: foreign},
			want: gateWant{then: write, findings: true, waiting: true, notices: []string{"window="}}},
		{name: "a failed pre-sync hook is not rerun for the same render",
			f:    facts{app: automated(), key: "c1", plan: changedPlan, seen: live, hookFailed: hookFailed},
			want: gateWant{then: hold, class: outcome.Stalled, errHas: "migrate", findings: true, waiting: true, hookKey: "c1", notices: []string{"window="}}},
		{name: "a failed pre-sync hook is rerun when a sync is asked",
			f:    facts{app: automated(), ask: Ask{Sync: true}, key: "c1", plan: changedPlan, seen: live, hookFailed: hookFailed},
			want: gateWant{then: write, findings: true, waiting: true, notices: []string{"window="}}},
		{name: "a write waits while a service of the release is updating",
			f:    facts{app: automated(), key: "c2", plan: changedPlan, seen: updating},
			want: gateWant{then: hold, class: outcome.Waiting, errHas: "waiting for a rollout: service web_api is updating", findings: true, waiting: true, notices: []string{"window="}}},
		{name: "a commit a release rollback holds off is not applied again by an automated sync",
			f:    facts{app: automated(), key: "c2", plan: changedPlan, seen: live, held: heldOff},
			want: gateWant{then: hold, class: outcome.Stalled, errHas: "held off c2", findings: true, waiting: true, notices: []string{"window="}}},
		{name: "the hold names why and what was written back",
			f:    facts{app: automated(), key: "c2", plan: changedPlan, held: heldOff},
			want: gateWant{then: hold, class: outcome.Stalled, errHas: "its rollout failed (web_api: exit code 1) and revision 4 (c1) was written back", waiting: true, notices: []string{"window="}}},
		{name: "a held commit is applied when a sync is asked, which lifts the hold",
			f:    facts{app: automated(), ask: Ask{Sync: true}, key: "c2", plan: changedPlan, seen: live, held: heldOff},
			want: gateWant{then: write, findings: true, waiting: true, notices: []string{"window="}}},
		{name: "a new commit is applied past a hold on an older one",
			f:    facts{app: automated(), key: "c3", plan: changedPlan, seen: live, held: heldOff},
			want: gateWant{then: write, findings: true, waiting: true, notices: []string{"window="}}},
		{name: "new artifact versions of the held commit are applied too",
			f:    facts{app: automated(), key: "c2+api=v3", plan: changedPlan, seen: live, held: heldOff},
			want: gateWant{then: write, findings: true, waiting: true, notices: []string{"window="}}},
		{name: "a failing rollout is preempted by a newer commit at once",
			f:    facts{app: automated(), key: "c3", plan: changedPlan, seen: failingRollout},
			want: gateWant{then: write, findings: true, waiting: true, notices: []string{"window="}}},
		{name: "a failing rollout is waited out when preemptFailingRollout is off",
			f:    facts{app: waitsOut, key: "c3", plan: changedPlan, seen: failingRollout},
			want: gateWant{then: hold, class: outcome.Waiting, errHas: "waiting for a rollout", findings: true, waiting: true, notices: []string{"window="}}},
		{name: "under rollback: none a rollout Swarm rolled back holds nothing",
			f:    facts{app: noneApp, key: "c1", commit: "c1", plan: unchangedPlan, seen: rolled},
			want: gateWant{then: report, settle: true, findings: true, waiting: true, notices: []string{"liveDrift=", "window="}}},
		{name: "a rollout left failing that runs healthy now succeeded after all, raised once",
			f:    facts{app: automated(), key: "c1", plan: unchangedPlan, seen: healthyNow, failedRollout: "c1"},
			want: gateWant{then: report, settle: true, findings: true, waiting: true, recovered: true, notices: []string{"always", "liveDrift=", "window="}}},
		{name: "a rollout left failing that runs now, though its restarts keep it degraded a while, succeeded after all",
			f:    facts{app: automated(), key: "c1", plan: unchangedPlan, seen: runsNow, failedRollout: "c1"},
			want: gateWant{then: report, settle: true, findings: true, waiting: true, recovered: true, notices: []string{"always", "liveDrift=", "window="}}},
		{name: "a rollout left failing that is still not running is remembered",
			f:    facts{app: automated(), key: "c1", plan: unchangedPlan, seen: live, failedRollout: "c1"},
			want: gateWant{then: report, settle: true, findings: true, waiting: true, notices: []string{"liveDrift=", "window="}}},
		{name: "a rollout left failing is forgotten, not raised, once git moved past it",
			f:    facts{app: automated(), key: "c2", plan: changedPlan, seen: live, failedRollout: "c1"},
			want: gateWant{then: write, findings: true, waiting: true, recovered: true, notices: []string{"window="}}},
		{name: "an automated change is written",
			f:    facts{app: automated(), key: "c2", plan: changedPlan, seen: live},
			want: gateWant{then: write, findings: true, waiting: true, notices: []string{"window="}}},
		{name: "without a live snapshot a change is written and nothing is observed",
			f:    facts{app: automated(), key: "c2", plan: changedPlan},
			want: gateWant{then: write, waiting: true, notices: []string{"window="}}},
	}
	cases = append(cases, placementCases(live)...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkVerdict(t, gate(tc.f), tc.f, tc.want)
		})
	}
}

// checkVerdict compares v with want, field by field, saying which.
func checkVerdict(t *testing.T, v verdict, f facts, want gateWant) {
	t.Helper()
	if v.then != want.then || v.correct != want.correct || v.settle != want.settle {
		t.Errorf("then, correct, settle = %v, %v, %v; want %v, %v, %v", v.then, v.correct, v.settle, want.then, want.correct, want.settle)
	}
	switch {
	case want.then != hold && v.err != nil:
		t.Errorf("err = %v, want none", v.err)
	case want.then == hold && (v.err == nil || !strings.Contains(v.err.Error(), want.errHas)):
		t.Errorf("err = %v, want one saying %q", v.err, want.errHas)
	case want.class != "" && outcome.Of(v.err) != want.class:
		t.Errorf("err class = %s, want %s", outcome.Of(v.err), want.class)
	}
	if got := noticeList(v.notices); !slices.Equal(got, want.notices) {
		t.Errorf("notices = %q, want %q", got, want.notices)
	}
	if (v.found.Findings != nil) != want.findings {
		t.Errorf("findings recorded = %t, want %t", v.found.Findings != nil, want.findings)
	}
	if v.found.Findings != nil && !slices.Equal(*v.found.Findings, f.seen.findings) {
		t.Errorf("findings = %v, want %v", *v.found.Findings, f.seen.findings)
	}
	if (v.found.WaitingFor != nil) != want.waiting || v.found.WaitingFor != nil && !slices.Equal(*v.found.WaitingFor, want.waitingFor) {
		t.Errorf("waiting for = %v, want recorded %t: %v", v.found.WaitingFor, want.waiting, want.waitingFor)
	}
	if v.found.Window == nil || v.found.Window.Held != f.window.Held {
		t.Errorf("window = %v, want the verdict recorded", v.found.Window)
	}
	if v.recovered != want.recovered {
		t.Errorf("recovered = %t, want %t", v.recovered, want.recovered)
	}
	if v.foreign.key != want.foreignKey || v.hookFailed.key != want.hookKey {
		t.Errorf("refusals kept = %q, %q; want %q, %q", v.foreign.key, v.hookFailed.key, want.foreignKey, want.hookKey)
	}
}

// noticeList writes notices as kind=key, "always" for those raised every time.
func noticeList(ns []notice) []string {
	names := map[noticeKind]string{noticeStalled: "stalled", noticeGitDrift: "gitDrift", noticeWindow: "window",
		noticeLiveDrift: "liveDrift", noticeRolledBack: "rolledBack", noticeArtifactWait: "artifactWait", noticeWarning: "warning",
		noticePlacement: "placement"}
	var out []string
	for _, n := range ns {
		if n.kind == noticeKinds {
			out = append(out, "always")
			continue
		}
		out = append(out, names[n.kind]+"="+n.key)
	}
	return out
}

// TestGateRaisesWhatItFinds: the events a verdict raises carry the words
// operators read: a refused sync, a rollback, live drift, a held commit, a
// moved release.
func TestGateRaisesWhatItFinds(t *testing.T) {
	live := observed{has: true, readable: true}
	withFindings := live
	withFindings.findings = drifted
	rolled := live
	rolled.rolledBack = "swarm rolled back service web_api: update paused"
	for _, tc := range []struct {
		name string
		f    facts
		typ  notify.EventType
		msg  string
	}{
		{"a refused manual sync names the window", facts{app: automated(), ask: Ask{Sync: true}, plan: changedPlan, window: heldBy(t, false)},
			notify.SyncFailed, "sync of web refused: held by sync window deny 0 12 * * *"},
		{"a rollback names the release, the commit and the daemon's reason", facts{app: automated(), commit: "0123456789abcdef", key: "k", plan: unchangedPlan, seen: rolled},
			notify.SyncFailed, "release web at 0123456789ab: swarm rolled back service web_api: update paused"},
		{"live drift names the release and each finding", facts{app: manual(), key: "k", plan: unchangedPlan, seen: withFindings},
			notify.LiveDriftDetected, "release web: web_api: modified image"},
		{"a held commit names the window and the plan", facts{app: automated(), key: "k", plan: changedPlan, window: heldBy(t, true)},
			notify.DriftDetected, "held by sync window deny 0 12 * * *"},
		{"git drift of a manual application says where a moved release was", facts{app: manual(), key: "k", plan: changedPlan, moved: "moved from swarm a"},
			notify.DriftDetected, "; moved from swarm a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := gate(tc.f)
			i := slices.IndexFunc(v.notices, func(n notice) bool { return n.typ == tc.typ })
			if i < 0 || !strings.Contains(v.notices[i].msg, tc.msg) {
				t.Errorf("notices = %+v, want a %s saying %q", v.notices, tc.typ, tc.msg)
			}
		})
	}
}

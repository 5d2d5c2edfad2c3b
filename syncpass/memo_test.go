package syncpass

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
)

// TestNoticesAreRaisedOnceAndForgottenByTheirOwnRule: each kind of finding
// is raised the first time a pass sees it, not again while passes see the
// same key, again for a new key, and again after a pass that saw none
// ("") forgot it. Which passes forget is each kind's rule (gate and
// Outcome.rendered pass ""); TestGate names those.
func TestNoticesAreRaisedOnceAndForgottenByTheirOwnRule(t *testing.T) {
	type seen struct {
		key   string
		raise bool
	}
	for _, tc := range []struct {
		name  string
		kind  noticeKind
		steps []seen
	}{
		{"a stalled commit is raised once per commit, and again once a render succeeded in between", noticeStalled,
			[]seen{{"c1", true}, {"c1", false}, {"c2", true}, {"", false}, {"c2", true}}},
		{"git drift is raised once per commit and versions, and never forgotten: the same key is not raised twice in a row", noticeGitDrift,
			[]seen{{"c1", true}, {"c1", false}, {"c1+v2", true}}},
		{"a window holding a change is raised once, and again after a pass it did not hold", noticeWindow,
			[]seen{{"c1", true}, {"c1", false}, {"", false}, {"c1", true}}},
		{"live drift is raised once per set of findings, and again after a pass that found none or corrected it", noticeLiveDrift,
			[]seen{{"web: modified image", true}, {"web: modified image", false}, {"web: modified image; web: missing", true}, {"", false}, {"web: modified image", true}}},
		{"a rollback Swarm made is raised once per commit and versions", noticeRolledBack,
			[]seen{{"c1", true}, {"c1", false}, {"c2", true}}},
		{"artifacts waiting for their image are raised once, and again after a pass where none waited", noticeArtifactWait,
			[]seen{{"web v2 (not pushed)", true}, {"web v2 (not pushed)", false}, {"", false}, {"web v2 (not pushed)", true}}},
		{"a release no node can place is raised once per commit and versions, and again after a pass that placed it", noticePlacement,
			[]seen{{"c1", true}, {"c1", false}, {"c2", true}, {"", false}, {"c2", true}}},
		{"render warnings are logged once per commit, versions and warnings", noticeWarning,
			[]seen{{"c1\x00privileged", true}, {"c1\x00privileged", false}, {"", false}, {"c1\x00privileged", true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n notices
			for i, s := range tc.steps {
				if got := n.raise(tc.kind, s.key); got != s.raise {
					t.Errorf("step %d: raise(%q) = %t, want %t", i, s.key, got, s.raise)
				}
			}
			// Kinds are kept apart: another kind's key raises anew.
			other := (tc.kind + 1) % noticeKinds
			if !n.raise(other, tc.steps[0].key+"x") {
				t.Errorf("kind %d shares its memory with kind %d", other, tc.kind)
			}
		})
	}
}

// recorder is a notifier that keeps what it is told.
type recorder struct{ events []notify.Event }

func (r *recorder) Notify(_ context.Context, e notify.Event) { r.events = append(r.events, e) }

// TestReportRaisesAStalledCommitOnceAndOnEveryRequestedSync: the stalled
// failures a pass (or a release file) reports reach the notifiers once per
// commit, on every requested sync, never for a transient failure, and a
// success forgets them.
func TestReportRaisesAStalledCommitOnceAndOnEveryRequestedSync(t *testing.T) {
	var rec recorder
	var reg notify.Registry
	reg.Register(&rec)
	env := Env{Notifier: &reg, Now: func() time.Time { return time.Unix(0, 0) }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	app := appset.Application{Name: "web"}
	stalled := &outcome.StalledError{Err: errors.New("render: compose.yaml:3: bad")}
	transient := &outcome.TransientError{Err: errors.New("git: connection refused")}
	var m Memo
	for i, step := range []struct {
		sync   bool
		commit string
		err    error
		want   int // events raised so far
	}{
		{false, "c1", stalled, 1},
		{false, "c1", stalled, 1},
		{true, "c1", stalled, 2},
		{false, "c1", transient, 2},
		{false, "c1", stalled, 2},
		{false, "c2", stalled, 3},
		{false, "c2", nil, 3},
		{false, "c2", stalled, 4},
		{false, "", stalled, 5}, // an unresolved revision is keyed by its error
		{false, "", stalled, 5},
	} {
		m.Report(context.Background(), env, app, step.sync, step.commit, step.err)
		if len(rec.events) != step.want {
			t.Fatalf("step %d: %d events raised, want %d", i, len(rec.events), step.want)
		}
	}
	if i := slices.IndexFunc(rec.events, func(e notify.Event) bool { return e.Type != notify.SyncFailed }); i >= 0 {
		t.Errorf("event %d is %s, want every one sync-failed", i, rec.events[i].Type)
	}
}

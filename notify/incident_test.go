package notify

import (
	"strings"
	"testing"
	"time"
)

// TestIncidentsFoldASharedCause: what an outbound notifier sends of the
// failures several applications share, step by step.
func TestIncidentsFoldASharedCause(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	const registry = "registry r.example:5000"
	failed := func(app, shared string) Event {
		return Event{Application: app, Type: SyncFailed, Shared: shared, Cause: app + "_web: image not pulled"}
	}
	succeeded := func(app string) Event { return Event{Application: app, Type: SyncSucceeded} }
	// step is one event taken (or a look at what is due) at an offset.
	type step struct {
		at      time.Duration
		event   *Event
		matches bool
		sent    bool     // take's answer: sent as it is
		due     []string // what due returns then, as "type message-prefix"
	}
	ev := func(e Event) *Event { return &e }
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{name: "five failures of one cause are one incident naming them, and their five recoveries one resolution", steps: []step{
			{at: 0, event: ev(failed("a", registry)), matches: true},
			{at: time.Second, event: ev(failed("b", registry)), matches: true},
			{at: 2 * time.Second, event: ev(failed("c", registry)), matches: true},
			{at: 3 * time.Second, event: ev(failed("d", registry)), matches: true},
			{at: 4 * time.Second, event: ev(failed("e", registry)), matches: true},
			{at: 29 * time.Second},
			{at: 30 * time.Second, due: []string{"incident-opened " + registry + ": 5 applications failed: a, b, c, d, e"}},
			{at: 31 * time.Second, event: ev(failed("a", registry)), matches: true},
			{at: 40 * time.Second, event: ev(succeeded("a")), matches: true},
			{at: 41 * time.Second, event: ev(succeeded("b")), matches: true},
			{at: 41 * time.Second, event: ev(succeeded("c")), matches: true},
			{at: 42 * time.Second, event: ev(succeeded("d")), matches: true},
			{at: 43 * time.Second},
			{at: 44 * time.Second, event: ev(succeeded("e")), matches: true, due: []string{"incident-resolved " + registry + ": every application recovered"}},
			{at: 45 * time.Second, event: ev(succeeded("e")), matches: true, sent: true},
		}},
		{name: "one application alone failing of a shared cause gets its own failure, late by the window", steps: []step{
			{at: 0, event: ev(failed("a", registry)), matches: true},
			{at: 30 * time.Second, due: []string{"sync-failed "}},
			{at: 40 * time.Second, event: ev(succeeded("a")), matches: true, sent: true},
		}},
		{name: "a failure of the application's own is sent at once", steps: []step{
			{at: 0, event: ev(failed("a", "")), matches: true, sent: true},
			{at: 30 * time.Second},
		}},
		{name: "a failure the routing does not match is neither gathered nor sent", steps: []step{
			{at: 0, event: ev(failed("a", registry)), matches: false, sent: true},
			{at: 30 * time.Second},
		}},
		{name: "two causes are two incidents", steps: []step{
			{at: 0, event: ev(failed("a", registry)), matches: true},
			{at: 0, event: ev(failed("b", registry)), matches: true},
			{at: 0, event: ev(failed("c", "registry other.example")), matches: true},
			{at: 0, event: ev(failed("d", "registry other.example")), matches: true},
			{at: 30 * time.Second, due: []string{"incident-opened registry other.example: 2 applications failed: c, d", "incident-opened " + registry + ": 2 applications failed: a, b"}},
		}},
		{name: "other events pass", steps: []step{
			{at: 0, event: ev(Event{Application: "a", Type: SyncStarted, Shared: registry}), matches: true, sent: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := newIncidents(30 * time.Second)
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				if s.event != nil {
					if got := in.take(*s.event, s.matches, now); got != s.sent {
						t.Errorf("step %d: take(%s of %s) = %t, want %t", i, s.event.Type, s.event.Application, got, s.sent)
					}
				}
				var got []string
				for _, e := range in.due(now) {
					got = append(got, string(e.Type)+" "+e.Message)
				}
				if len(got) != len(s.due) {
					t.Fatalf("step %d: due = %q, want %q", i, got, s.due)
				}
				for j := range got {
					if !strings.HasPrefix(got[j], s.due[j]) {
						t.Errorf("step %d: due[%d] = %q, want it to start %q", i, j, got[j], s.due[j])
					}
				}
			}
		})
	}
}

// TestIncidentWindowOff: a negative window gathers nothing.
func TestIncidentWindowOff(t *testing.T) {
	if in := newIncidents(-1); in != nil {
		t.Errorf("newIncidents(-1) = %+v, want none", in)
	}
	if in := newIncidents(0); in == nil || in.window != DefaultIncidentWindow {
		t.Errorf("newIncidents(0) = %+v, want the default window", in)
	}
}

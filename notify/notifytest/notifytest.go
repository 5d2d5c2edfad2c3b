// Package notifytest checks that a notify.Notifier keeps the seam's
// contract, the way testing/slogtest checks a slog.Handler: one table of
// rules, each run as a subtest named for the rule, against a fresh notifier
// each time. Every implementation (log, event stream, recorder, webhook,
// chat, forge, and any a companion adds) runs it from its own tests.
//
// It only drives notifiers and reads what reached their far end; it never
// looks inside one.
package notifytest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/notify"
)

// Subject is one notifier under test and a view of its far end.
type Subject struct {
	// Notifier is the implementation under test, already running if it
	// has a delivery loop (the caller stops it with t.Cleanup).
	Notifier notify.Notifier
	// Received returns the events the far end has got so far, in arrival
	// order, decoded back into events. It is called repeatedly while the
	// suite waits, and must be safe to call concurrently with deliveries.
	Received func() []notify.Event
	// Stall makes the far end stop taking events until release is called.
	// Nil for a far end that cannot stall; the rule that needs it is then
	// skipped.
	Stall func() (release func())
	// IgnoresAt is true for a far end that does not carry Event.At (a log
	// line's own timestamp stands in for it).
	IgnoresAt bool
	// Takes reports whether the notifier sends e at all, for one whose
	// contract passes on only some events (a forge takes sync events with
	// a revision). Nil means every event. The rules send sync events with
	// a revision wherever the type does not matter, so every notifier
	// takes them, and expect only taken events to arrive.
	Takes func(notify.Event) bool
}

// takes reports whether s's notifier sends e.
func (s Subject) takes(e notify.Event) bool { return s.Takes == nil || s.Takes(e) }

// rev is the revision the rules' events carry.
const rev = "0123456789abcdef0123456789abcdef01234567"

// wait bounds how long a rule waits for deliveries: long enough for a
// loaded machine, and a failure, not a hang, when nothing comes.
const wait = 30 * time.Second

// Rule is one requirement of the contract.
type Rule struct {
	// Name states the rule; it is the subtest's name.
	Name string
	// Check fails t when s breaks the rule; it gets a fresh subject.
	Check func(t *testing.T, s Subject)
}

// Rules is the contract, in the order Run checks it.
var Rules = []Rule{
	{"Notify returns while the far end is stalled", notifyNeverBlocks},
	{"every field of a delivered event arrives unchanged", fieldsUnchanged},
	{"events notified one after another arrive in that order", orderKept},
	{"concurrent Notify calls all arrive", concurrentCalls},
	{"the actor delivered is the event's, never the context's", actorFromEvent},
}

// Run checks every rule in Rules against a fresh subject from newSubject,
// so that what one rule leaves queued cannot pass or fail another. The
// subtests run one after another.
func Run(t *testing.T, newSubject func(t *testing.T) Subject) {
	t.Helper()
	for _, r := range Rules {
		t.Run(r.Name, func(t *testing.T) {
			r.Check(t, newSubject(t))
		})
	}
}

// at is the events' time: fixed, with milliseconds and in UTC, so a far
// end that loses precision or the zone shows up as a changed field.
var at = time.Date(2026, 7, 1, 9, 30, 15, 123_000_000, time.UTC)

// notifyNeverBlocks: Notify is called on the reconcile path, so a dead
// receiver must cost drops, never a stuck reconcile.
func notifyNeverBlocks(t *testing.T, s Subject) {
	if s.Stall == nil {
		t.Skip("this far end cannot stall")
	}
	release := s.Stall()
	defer release()
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		// More than any queue holds: the last calls meet a full one.
		for i := range 5000 {
			s.Notifier.Notify(t.Context(), notify.Event{Application: fmt.Sprintf("app-%d", i), Type: notify.SyncStarted, Revision: rev, At: at})
		}
	}()
	select {
	case <-returned:
	case <-time.After(wait):
		t.Fatal("Notify blocked while the far end was stalled")
	}
}

// fieldsUnchanged: every field survives the trip, including empty ones,
// newlines, non-ASCII and characters JSON and HTML escape. Events the
// notifier does not take are sent too, and must not arrive.
func fieldsUnchanged(t *testing.T, s Subject) {
	all := []notify.Event{
		{Application: "web", Type: notify.SyncSucceeded, Revision: rev,
			Message: "upgrade: 2 services changed", At: at, Swarm: "prod-eu", Actor: "alice@example.com"},
		{Application: "api", Type: notify.LiveDriftDetected, At: at.Add(time.Second)},
		{Application: "db", Type: notify.ResourcesPruned, Message: "service db_old, network db_legacy\nsecond line", At: at.Add(2 * time.Second), Actor: "Zoë Ünïcode"},
		{Application: "q", Type: notify.PruneFailed, Message: `quotes " and <angles> & amps`, At: at.Add(3 * time.Second), Swarm: "staging"},
		{Application: "db", Type: notify.SyncFailed, Revision: rev, Message: "render: line one\nline two", At: at.Add(4 * time.Second), Actor: "Zoë Ünïcode"},
		{Application: "q", Type: notify.SyncStarted, Revision: rev, Message: `quotes " and <angles> & amps`, At: at.Add(5 * time.Second), Swarm: "staging"},
	}
	var sent []notify.Event
	for _, e := range all {
		s.Notifier.Notify(t.Context(), e)
		if s.takes(e) {
			sent = append(sent, e)
		}
	}
	got := awaitN(t, s, len(sent))
	sameTime := cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) || s.IgnoresAt })
	if d := cmp.Diff(sent, got, sameTime); d != "" {
		t.Errorf("delivered events (-sent +received):\n%s", d)
	}
}

// orderKept: a reader of one notifier sees a sync start before it ends;
// retries and queues must not reorder events from one caller.
func orderKept(t *testing.T, s Subject) {
	var want []string
	for i := range 30 {
		app := fmt.Sprintf("app-%02d", i)
		want = append(want, app)
		s.Notifier.Notify(t.Context(), notify.Event{Application: app, Type: notify.SyncSucceeded, Revision: rev, At: at})
	}
	if d := cmp.Diff(want, apps(awaitN(t, s, len(want)))); d != "" {
		t.Errorf("arrival order (-notified +received):\n%s", d)
	}
}

// concurrentCalls: many reconciles notify at once; none may be lost. The
// order across callers is not promised, so it is compared sorted.
func concurrentCalls(t *testing.T, s Subject) {
	var (
		wg   sync.WaitGroup
		want []string
	)
	for g := range 8 {
		for i := range 5 {
			want = append(want, fmt.Sprintf("g%d-%d", g, i))
		}
		wg.Go(func() {
			for i := range 5 {
				s.Notifier.Notify(t.Context(), notify.Event{Application: fmt.Sprintf("g%d-%d", g, i), Type: notify.SyncStarted, Revision: rev, At: at})
			}
		})
	}
	wg.Wait()
	got := apps(awaitN(t, s, len(want)))
	slices.Sort(got)
	slices.Sort(want)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("received from concurrent callers (-notified +received):\n%s", d)
	}
}

// actorFromEvent: the raiser decides who an event names. A notifier that
// read the context instead could credit a prune to whoever's request
// happened to be in flight.
func actorFromEvent(t *testing.T, s Subject) {
	ctx := notify.WithActor(t.Context(), "mallory")
	s.Notifier.Notify(ctx, notify.Event{Application: "web", Type: notify.SyncStarted, Revision: rev, Actor: "alice", At: at})
	s.Notifier.Notify(ctx, notify.Event{Application: "api", Type: notify.SyncStarted, Revision: rev, At: at})
	got := awaitN(t, s, 2)
	if got[0].Actor != "alice" || got[1].Actor != "" {
		t.Errorf("actors delivered %q and %q, want the events' own: \"alice\" and \"\"", got[0].Actor, got[1].Actor)
	}
}

// awaitN waits until the far end has n events and returns them; more than n
// is a failure (something was delivered twice or invented).
func awaitN(t *testing.T, s Subject, n int) []notify.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	for {
		got := s.Received()
		if len(got) >= n {
			if len(got) > n {
				t.Errorf("received %d events, %d notified: %s", len(got), n, strings.Join(apps(got), ", "))
			}
			return got[:n]
		}
		select {
		case <-ctx.Done():
			t.Fatalf("received %d of %d events: %s", len(got), n, strings.Join(apps(got), ", "))
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// apps returns the application of each event, for compact messages.
func apps(es []notify.Event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Application
	}
	return out
}

// Gate stalls a far end: a delivery path calls Pass before each event, and
// Stall holds every Pass until the returned release is called. The zero
// value is open.
type Gate struct {
	mu sync.RWMutex
}

// Pass returns once the gate is open.
func (g *Gate) Pass() {
	g.mu.RLock()
	defer g.mu.RUnlock()
}

// Stall closes the gate, waiting for Pass calls in progress to return;
// release opens it again and may be called more than once.
func (g *Gate) Stall() (release func()) {
	g.mu.Lock()
	var once sync.Once
	return func() { once.Do(g.mu.Unlock) }
}

// Collector keeps received events for Subject.Received. The zero value is
// empty and ready; it is safe for concurrent use.
type Collector struct {
	mu     sync.Mutex
	events []notify.Event
}

// Add records e as received.
func (c *Collector) Add(e notify.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
}

// Events returns a copy of what was received, in order.
func (c *Collector) Events() []notify.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

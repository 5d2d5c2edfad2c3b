package reconcile

import (
	"reflect"
	"testing"
	"time"

	"github.com/skep-cd/skep/syncpass"
	"github.com/skep-cd/skep/tickgrid"
)

func TestBackoffDoublesAndCaps(t *testing.T) {
	for _, tc := range []struct {
		failures int
		limit    time.Duration
		want     time.Duration
	}{
		{1, time.Minute, 5 * time.Second},
		{2, time.Minute, 10 * time.Second},
		{4, time.Minute, 40 * time.Second},
		{5, time.Minute, time.Minute},
		{50, time.Minute, time.Minute},
		{3, 7 * time.Second, 7 * time.Second},
	} {
		if got := backoff(tc.failures, tc.limit); got != tc.want {
			t.Errorf("backoff(%d, %s) = %s, want %s", tc.failures, tc.limit, got, tc.want)
		}
	}
}

func TestPhasedTicksKeepTheirIntervalAndTakeTurns(t *testing.T) {
	interval := 10 * time.Second
	start := time.Now()
	for _, phase := range []float64{0, 0.25, 0.5, 0.999} {
		// A tick that ran on time, whatever it took up to half an
		// interval, is followed by the next exactly one interval later.
		tick := start.Add(phased(start, interval, phase))
		for _, took := range []time.Duration{0, time.Millisecond, 300 * time.Millisecond, 4 * time.Second} {
			if next := tick.Add(took).Add(phased(tick.Add(took), interval, phase)); next.Sub(tick) != interval {
				t.Errorf("phase %.3f: a tick that took %s is followed %s later, want %s", phase, took, next.Sub(tick), interval)
			}
		}
		if rest := tickgrid.Round(tick, tickGrid).Sub(tick); rest != 0 {
			t.Errorf("phase %.3f: the tick is %s off the %s grid", phase, rest, tickGrid)
		}
		// A run off the phase (a sync, a wake) keeps the phase.
		wake := tick.Add(3700 * time.Millisecond)
		if next := wake.Add(phased(wake, interval, phase)); next.Sub(tick) != interval {
			t.Errorf("phase %.3f: after a run 3.7s past the tick, the next is %s after it, want %s", phase, next.Sub(tick), interval)
		}
	}
	// Two applications half a phase apart tick half an interval apart.
	a := start.Add(phased(start, interval, 0.1))
	b := start.Add(phased(start, interval, 0.6))
	if gap := (b.Sub(a) + interval) % interval; gap != interval/2 {
		t.Errorf("phases 0.1 and 0.6 tick %s apart, want %s", gap, interval/2)
	}
}

func TestEnqueueCoalescesAndKeepsTheSync(t *testing.T) {
	w := &worker{}
	w.enqueue(Request{})
	w.enqueue(Request{Sync: true, Actor: "alice"})
	w.enqueue(Request{})
	w.enqueue(Request{Sync: true, Actor: "bob"})
	if w.queued == nil {
		t.Fatal("nothing queued")
	}
	got := *w.queued
	if !got.Sync || got.Actor != "alice" {
		t.Fatalf("coalesced request = %+v, want the first sync, by alice", got)
	}
}

func TestEnqueueReportsTheRequestThatWillRun(t *testing.T) {
	prune := false
	for _, tc := range []struct {
		name       string
		queued     *Request
		req        Request
		want       Request
		wantMerged bool
	}{
		{name: "an empty queue takes the request as it is",
			req: Request{Sync: true, ID: 7, Actor: "alice"}, want: Request{Sync: true, ID: 7, Actor: "alice"}},
		{name: "a sync replaces a queued tick and is not merged",
			queued: &Request{}, req: Request{Sync: true, ID: 8, Actor: "bob"}, want: Request{Sync: true, ID: 8, Actor: "bob"}},
		{name: "a plain sync joins a queued sync, keeping its id and actor",
			queued: &Request{Sync: true, ID: 3, Actor: "alice"}, req: Request{Sync: true, ID: 9, Actor: "bob"},
			want: Request{Sync: true, ID: 3, Actor: "alice"}, wantMerged: true},
		{name: "a sync with a revision brings it, and its actor, into the queued sync's id",
			queued: &Request{Sync: true, ID: 3, Actor: "alice"}, req: Request{Sync: true, ID: 9, Actor: "bob", Revision: "abc", Prune: &prune},
			want: Request{Sync: true, ID: 3, Actor: "bob", Revision: "abc", Prune: &prune}, wantMerged: true},
		{name: "a tick joins a queued sync without changing it",
			queued: &Request{Sync: true, ID: 3, Actor: "alice", Revision: "abc"}, req: Request{},
			want: Request{Sync: true, ID: 3, Actor: "alice", Revision: "abc"}, wantMerged: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &worker{queued: tc.queued}
			got, merged := w.enqueue(tc.req)
			if got.ID != tc.want.ID || got.Actor != tc.want.Actor || got.Revision != tc.want.Revision || got.Sync != tc.want.Sync ||
				(got.Prune == nil) != (tc.want.Prune == nil) || merged != tc.wantMerged {
				t.Errorf("enqueue = %+v, merged %v; want %+v, merged %v", got, merged, tc.want, tc.wantMerged)
			}
			if queued := w.queued; queued == nil || queued.ID != got.ID || queued.Revision != got.Revision {
				t.Errorf("queued %+v, but enqueue reported %+v", queued, got)
			}
		})
	}
}

func TestOnGridEndsATickOnTheGridAndKeepsShortDelays(t *testing.T) {
	now := time.Now().Add(300 * time.Millisecond)
	for _, d := range []time.Duration{10 * time.Second, 27*time.Second + 123*time.Millisecond, 33*time.Second + 900*time.Millisecond, time.Hour} {
		got := onGrid(now, d)
		if at := now.Add(got); !tickgrid.Round(at, tickGrid).Equal(at) {
			t.Errorf("onGrid(%v) = %v: the tick is off the grid", d, got)
		}
		if diff := (got - d).Abs(); diff > tickGrid/2 {
			t.Errorf("onGrid(%v) = %v: moved by %v, more than half a step", d, got, diff)
		}
	}
	for _, d := range []time.Duration{0, 1500 * time.Millisecond, 9 * time.Second} {
		if got := onGrid(now, d); got != d {
			t.Errorf("onGrid(%v) = %v, want the short delay kept", d, got)
		}
	}
}

func TestASwarmWakeMergedWithAnythingElseAsksGit(t *testing.T) {
	wake := Request{live: true}
	for _, tc := range []struct {
		name string
		a, b Request
		live bool
	}{
		{"two wakes", wake, wake, true},
		{"a wake, then a tick", wake, Request{}, false},
		{"a tick, then a wake", Request{}, wake, false},
		{"a wake, then a sync", wake, Request{Sync: true}, false},
		{"a sync, then a wake", Request{Sync: true}, wake, false},
	} {
		if got := merge(tc.a, tc.b).live; got != tc.live {
			t.Errorf("%s: merged live = %t, want %t", tc.name, got, tc.live)
		}
	}
}

// TestMergeKeepsWhatStartedTheSync: a webhook's mark survives a merge
// with a tick or a sync, so the pass names the webhook (or the sync) as
// what started it (syncpass's TestASyncNamesWhatStartedIt).
func TestMergeKeepsWhatStartedTheSync(t *testing.T) {
	hook := Request{webhook: true}
	for _, tc := range []struct {
		name string
		got  Request
		want syncpass.Ask
	}{
		{"a requested sync merged with a webhook is a sync from the webhook", merge(hook, Request{Sync: true, Actor: "alice"}), syncpass.Ask{Sync: true, Actor: "alice", Webhook: true}},
		{"a tick merged into a webhook's refresh is the webhook", merge(Request{}, hook), syncpass.Ask{Webhook: true}},
		{"a webhook's refresh merged into a tick is the webhook", merge(hook, Request{}), syncpass.Ask{Webhook: true}},
		{"two ticks are a tick", merge(Request{}, Request{}), syncpass.Ask{}},
		{"a tick merged into a promotion keeps it and who asked", merge(Request{Canary: CanaryPromote, Actor: "bob"}, Request{}),
			syncpass.Ask{Canary: CanaryPromote, Actor: "bob"}},
		{"a sync merged into an abort keeps the abort and who asked for it", merge(Request{Canary: CanaryAbort, Actor: "bob"}, Request{Sync: true, Actor: "alice"}),
			syncpass.Ask{Sync: true, Canary: CanaryAbort, Actor: "bob"}},
		{"the latest word on a canary wins", merge(Request{Canary: CanaryPromote, Actor: "bob"}, Request{Canary: CanaryAbort, Actor: "carol"}),
			syncpass.Ask{Canary: CanaryAbort, Actor: "carol"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.got.ask(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ask = %+v, want %+v", got, tc.want)
			}
		})
	}
}

package reconcile

import (
	"testing"
	"time"
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

func TestJitterStaysWithinTenPercent(t *testing.T) {
	for range 1000 {
		got := jitter(time.Minute)
		if got < 54*time.Second || got > 66*time.Second {
			t.Fatalf("jitter(1m) = %s, outside ±10%%", got)
		}
	}
}

func TestEnqueueCoalescesAndKeepsTheSync(t *testing.T) {
	w := &worker{requests: make(chan Request, 1)}
	w.enqueue(Request{})
	w.enqueue(Request{Sync: true, Actor: "alice"})
	w.enqueue(Request{})
	w.enqueue(Request{Sync: true, Actor: "bob"})
	if n := len(w.requests); n != 1 {
		t.Fatalf("%d requests queued, want 1", n)
	}
	got := <-w.requests
	if !got.Sync || got.Actor != "alice" {
		t.Fatalf("coalesced request = %+v, want the first sync, by alice", got)
	}
}

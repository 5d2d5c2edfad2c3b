package syncpass

import (
	"testing"
	"time"
)

// TestNextWaitStep: a wait ends only on a snapshot that shows its write
// and finds the release ready; it asks for a full relist while the
// snapshot may predate the write and for the tasks once it does not; and
// a wave that wrote nothing has no write to wait for.
func TestNextWaitStep(t *testing.T) {
	at := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	before, after := at.Add(-time.Second), at.Add(time.Second)
	cases := []struct {
		name        string
		written     time.Time
		taken       time.Time
		seenEarlier bool
		ready       bool
		want        waitStep
	}{
		{name: "a ready release in a snapshot after the write is done", written: at, taken: after, ready: true, want: waitDone},
		{name: "a snapshot from before the write says nothing of it", written: at, taken: before, seenEarlier: true, ready: true, want: waitRelist},
		{name: "a snapshot from the instant of the write says nothing of it", written: at, taken: at, seenEarlier: true, ready: true, want: waitRelist},
		{name: "a written release not ready yet asks for the tasks", written: at, taken: after, want: waitRelistTasks},
		{name: "a wave that wrote nothing goes on from an older snapshot", taken: before, seenEarlier: true, ready: true, want: waitDone},
		{name: "a wave that wrote nothing and is not ready asks for the tasks", taken: before, seenEarlier: true, want: waitRelistTasks},
		{name: "a wave that wrote nothing still needs the earlier writes seen", taken: before, ready: true, want: waitRelist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextWaitStep(tc.written, tc.taken, tc.seenEarlier, tc.ready); got != tc.want {
				t.Errorf("nextWaitStep(written %v, taken %v, seen earlier %t, ready %t) = %d, want %d",
					tc.written, tc.taken, tc.seenEarlier, tc.ready, got, tc.want)
			}
		})
	}
}

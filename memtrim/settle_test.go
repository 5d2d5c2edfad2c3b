package memtrim

import (
	"context"
	"testing"
	"time"
)

func TestSettlerTrimsOnlyWhenABurstIsFollowedByQuiet(t *testing.T) {
	const mib = 1 << 20
	st := settler{policy: Settle{Burst: 32 * mib, Quiet: 4 * mib}}
	for i, step := range []struct {
		allocs uint64 // total allocated at this check
		want   bool
	}{
		{100 * mib, false}, // the start: a mark, never a trim
		{101 * mib, false}, // quiet, but no burst yet
		{120 * mib, false}, // 20 MiB since the start: no burst
		{140 * mib, false}, // 40 MiB since the start, but 20 in this period: busy
		{142 * mib, true},  // 42 since the start, 2 in this period: the burst is over
		{143 * mib, false}, // quiet, but nothing since the trim
		{180 * mib, false}, // a burst under way
		{183 * mib, true},  // and over
		{183 * mib, false},
	} {
		if got := st.check(step.allocs); got != step.want {
			t.Errorf("check %d (%d MiB allocated in all): trim = %v, want %v", i, step.allocs/mib, got, step.want)
		}
	}
}

// sink keeps the test's garbage reachable until it is dropped, so that
// the compiler cannot leave it off the heap.
var sink [][]byte

func TestSettleGivesTheFreedHeapBack(t *testing.T) {
	const mib = 1 << 20
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	trims := make(chan Trim, 1)
	go Settle{Every: 10 * time.Millisecond, Burst: 32 * mib, Quiet: 8 * mib}.Run(ctx, func(tr Trim) {
		select {
		case trims <- tr:
		default:
		}
	})
	// Run marks its start before it counts, so a burst made before it
	// ran may not count: bursts follow each other, each with a quiet
	// second after it, until one is trimmed.
	var tr Trim
	for i := 0; ; i++ {
		for range 64 {
			sink = append(sink, make([]byte, mib))
		}
		sink = nil
		select {
		case tr = <-trims:
		case <-time.After(time.Second):
			if i < 30 {
				continue
			}
			t.Fatal("no trim after 30 bursts of 64 MiB")
		}
		break
	}
	if tr.Allocated < 32*mib {
		t.Errorf("trimmed after %d bytes allocated, want a burst of 32 MiB at least", tr.Allocated)
	}
	// The 64 MiB the burst left are free; the runtime's own scavenger
	// would have given back a little of it by now at most.
	if tr.Released < 16*mib {
		t.Errorf("released %d bytes of heap, want most of the burst's 64 MiB", tr.Released)
	}
	if tr.Err != nil {
		t.Errorf("executable not trimmed: %v", tr.Err)
	}
}

func TestSettleWithoutAPeriodNeverTrims(t *testing.T) {
	trimmed := false
	// Returns at once, where a ticker of no period would panic; the
	// context is never cancelled, so a loop would never end.
	Settle{Burst: 1, Quiet: 1 << 30}.Run(context.Background(), func(Trim) { trimmed = true })
	if trimmed {
		t.Error("trimmed without a period")
	}
}

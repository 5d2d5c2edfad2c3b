package memtrim

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/skep-cd/skep/tickgrid"
)

// Settle returns memory to the kernel once a burst of work is over: a
// first deploy, a full relist of a large swarm, a restart's renders. Go's
// own scavenger gives the freed heap back slowly and keeps some of it,
// and the executable's pages the burst ran stay mapped; a controller at
// rest needs neither.
type Settle struct {
	// Every is how often the allocations are read.
	Every time.Duration
	// Burst is how much the process must have allocated since the last
	// trim (or the start) before it is trimmed again.
	Burst uint64
	// Quiet is the most it may allocate in one Every for the burst to
	// count as over.
	Quiet uint64
}

// Trim is what one trim did.
type Trim struct {
	// Allocated is what was allocated since the last trim, in bytes.
	Allocated uint64
	// Released is how many more bytes of heap the kernel holds no page
	// for than before the trim.
	Released uint64
	// Mappings is how many of the executable's mappings were dropped
	// again (see Executable); Err says why they were not.
	Mappings int
	Err      error
}

// Run reads the allocations every s.Every until ctx ends and trims when a
// burst is over (see Settle): a full GC that returns every free page of
// the heap (debug.FreeOSMemory), then Executable. done, when not nil, is
// told of each trim. With no Every it returns at once: it never trims.
func (s Settle) Run(ctx context.Context, done func(Trim)) {
	if s.Every <= 0 {
		return
	}
	// On Every's grid (package tickgrid): the read comes due with the
	// controller's other periodic work, not at a wake-up of its own.
	t := time.NewTimer(tickgrid.Until(time.Now(), s.Every))
	defer t.Stop()
	st := settler{policy: s}
	st.check(readAllocs()) // the start is the first mark
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			t.Reset(tickgrid.Until(time.Now(), s.Every))
		}
		allocs := readAllocs()
		since := allocs - st.atTrim
		if !st.check(allocs) {
			continue
		}
		before := readReleased()
		debug.FreeOSMemory()
		trim := Trim{Allocated: since}
		if after := readReleased(); after > before {
			trim.Released = after - before
		}
		trim.Mappings, trim.Err = Executable()
		if done != nil {
			done(trim)
		}
	}
}

// settler is Run's memory of the allocation totals it last saw.
type settler struct {
	policy  Settle
	started bool
	atTrim  uint64 // total allocated at the last trim (or the start)
	atCheck uint64 // total allocated at the last check
}

// check takes the total allocated now and says whether to trim: a burst
// since the last trim, and quiet since the last check.
func (st *settler) check(allocs uint64) bool {
	if !st.started {
		st.started, st.atTrim, st.atCheck = true, allocs, allocs
		return false
	}
	due := allocs-st.atTrim >= st.policy.Burst && allocs-st.atCheck < st.policy.Quiet
	st.atCheck = allocs
	if due {
		st.atTrim = allocs
	}
	return due
}

// readAllocs is the total the heap has allocated since the start, in bytes.
func readAllocs() uint64 { return readUint("/gc/heap/allocs:bytes") }

// readReleased is the heap memory the kernel holds no page for, in bytes.
func readReleased() uint64 { return readUint("/memory/classes/heap/released:bytes") }

func readUint(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// memStore is a Store in memory that enforces versions as Swarm does:
// every write moves the version, and a write over a stale one conflicts.
type memStore struct {
	mu      sync.Mutex
	rec     Record
	version uint64
	found   bool
	writes  int
}

func (s *memStore) Get(context.Context) (Record, uint64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec, s.version, s.found, nil
}

func (s *memStore) Create(_ context.Context, rec Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.found {
		return ErrConflict
	}
	s.rec, s.found = rec, true
	s.version += 7 // Swarm's versions are raft indexes: they grow, not by one
	s.writes++
	return nil
}

func (s *memStore) Update(_ context.Context, version uint64, rec Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.found || version != s.version {
		return ErrConflict
	}
	s.rec = rec
	s.version += 7
	s.writes++
	return nil
}

// faulty is one candidate's way to a memStore, which fails while down.
type faulty struct {
	*memStore
	down *bool
}

var errDown = errors.New("manager unreachable")

func (f faulty) Get(ctx context.Context) (Record, uint64, bool, error) {
	if *f.down {
		return Record{}, 0, false, errDown
	}
	return f.memStore.Get(ctx)
}

func (f faulty) Create(ctx context.Context, rec Record) error {
	if *f.down {
		return errDown
	}
	return f.memStore.Create(ctx, rec)
}

func (f faulty) Update(ctx context.Context, version uint64, rec Record) error {
	if *f.down {
		return errDown
	}
	return f.memStore.Update(ctx, version, rec)
}

// tick is the simulation's step: fine enough that no candidate's round
// waits visibly for it.
const tick = 10 * time.Millisecond

// world is several candidates of one lease on a simulated clock. Each
// candidate reads its own clock (offset, rate and jumps of its own) and
// takes its rounds when its timer is due, as Run would; a killed one
// takes none, a paused one none while its clock goes on. After every tick
// the world checks that at most one running candidate may write.
type world struct {
	t       *testing.T
	now     time.Duration // real time since the start
	store   *memStore
	nodes   []*node
	epoch   time.Time
	holders []holding // who could write, tick by tick, as it changed
}

// node is one candidate of a world.
type node struct {
	w       *world
	name    string
	e       *Elector
	offset  time.Duration // added to its clock: skew and jumps
	rate    float64       // its clock's pace against real time
	dead    bool
	paused  bool
	down    bool // its store calls fail
	leading bool // its lead runs
	term    int64
	next    time.Duration // real time its next round is due
}

// holding is the candidate that may write from an instant on ("" none).
type holding struct {
	at   time.Duration
	name string
	term int64
}

func newWorld(t *testing.T) *world {
	return &world{t: t, store: &memStore{}, epoch: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// add starts a candidate with timings tm and version version.
func (w *world) add(name, version string, tm Timings) *node {
	n := &node{w: w, name: name, rate: 1, next: w.now}
	e, err := New(Options{Store: faulty{w.store, &n.down}, Self: Candidate{ID: name + "/1", Name: name, Addr: name + ":8080", Version: version},
		Timings: tm, Now: n.clock})
	if err != nil {
		w.t.Fatal(err)
	}
	n.e = e
	w.nodes = append(w.nodes, n)
	return n
}

// clock is n's own reading of the time.
func (n *node) clock() time.Time {
	return n.w.epoch.Add(time.Duration(float64(n.w.now)*n.rate) + n.offset)
}

// run advances the world by d, tick by tick.
func (w *world) run(d time.Duration) {
	w.t.Helper()
	for end := w.now + d; w.now < end; w.now += tick {
		for _, n := range w.nodes {
			if n.dead || n.paused || n.next > w.now {
				continue
			}
			won, lost := n.e.step(context.Background(), !n.leading)
			switch {
			case won != nil:
				n.leading, n.term = true, won.Number
			case lost:
				n.leading = false
			}
			n.next = w.now + time.Duration(float64(n.e.t.Retry)/n.rate)
		}
		w.check()
	}
}

// check asserts at most one running candidate may write now, and keeps
// who that is when it changed.
func (w *world) check() {
	w.t.Helper()
	var may []*node
	for _, n := range w.nodes {
		if !n.dead && !n.paused && n.term > 0 && n.e.Fence(n.term) == nil {
			may = append(may, n)
		}
	}
	if len(may) > 1 {
		w.t.Fatalf("at %s, %s (term %d) and %s (term %d) may both write", w.now, may[0].name, may[0].term, may[1].name, may[1].term)
	}
	h := holding{at: w.now}
	if len(may) == 1 {
		h.name, h.term = may[0].name, may[0].term
	}
	if last := len(w.holders) - 1; last < 0 || w.holders[last].name != h.name || w.holders[last].term != h.term {
		w.holders = append(w.holders, h)
	}
}

// writer returns who may write now ("" nobody).
func (w *world) writer() holding {
	if len(w.holders) == 0 {
		return holding{}
	}
	return w.holders[len(w.holders)-1]
}

// waitWriter runs the world until someone other than but writes, at most
// within; it returns how long that took.
func (w *world) waitWriter(but string, within time.Duration) (holding, time.Duration) {
	w.t.Helper()
	start := w.now
	for w.now-start <= within {
		if h := w.writer(); h.name != "" && h.name != but {
			return h, w.now - start
		}
		w.run(tick)
	}
	w.t.Fatalf("no writer other than %q within %s of %s; holders %+v", but, within, start, w.holders)
	return holding{}, 0
}

// bound is the longest a standby takes to follow a leader that vanished
// right after a renewal: it sees the renewal up to a Retry late, waits
// Duration, and looks at most a Retry after that.
func bound(tm Timings) time.Duration {
	tm = tm.WithDefaults()
	return tm.Duration + 2*tm.Retry + 2*tick
}

func TestOneCandidateTakesAFreeLeaseAtOnce(t *testing.T) {
	w := newWorld(t)
	a := w.add("a", "v1.0.0", Timings{})
	w.run(tick)
	if h := w.writer(); h.name != "a" || h.term != 1 {
		t.Fatalf("writer %+v after the first round, want a in term 1", h)
	}
	if obs := a.e.Observed(); !obs.Leading || obs.Term != 1 || obs.Leader.Name != "a" {
		t.Errorf("Observed = %+v, want a leading term 1", obs)
	}
}

func TestCandidatesRacingElectOne(t *testing.T) {
	w := newWorld(t)
	for i := range 5 {
		w.add(fmt.Sprintf("c%d", i), "v1.0.0", Timings{})
	}
	// All five ask in the same tick, for a lease nobody ever wrote.
	w.run(30 * time.Second)
	leaders := 0
	for _, n := range w.nodes {
		if n.leading {
			leaders++
		}
	}
	if leaders != 1 || len(w.holders) != 1 || w.holders[0].term != 1 {
		t.Fatalf("%d leaders, holders %+v: want one leader in term 1 all along", leaders, w.holders)
	}
}

func TestReleasedLeaseIsTakenByOneStandbyWithinARetry(t *testing.T) {
	w := newWorld(t)
	a := w.add("a", "v1.0.0", Timings{})
	w.run(tick)
	for i := range 4 {
		w.add(fmt.Sprintf("s%d", i), "v1.0.0", Timings{})
	}
	w.run(5 * time.Second)
	// The standbys look in the same tick, so they race for the release.
	for _, n := range w.nodes {
		n.next = w.now + 500*time.Millisecond
	}
	a.e.release(context.Background())
	a.leading, a.dead = false, true // it stopped, as Run does after releasing
	h, took := w.waitWriter("a", time.Second+2*tick)
	if h.term != 2 || took > time.Second {
		t.Errorf("%s took over in term %d after %s, want term 2 within a retry", h.name, h.term, took)
	}
	w.run(20 * time.Second)
	if got := len(w.holders); got != 3 { // a, nobody, the winner
		t.Errorf("holders %+v, want a, a gap, then one standby", w.holders)
	}
}

func TestStandbyTakesOverAKilledLeaderWithinTheBound(t *testing.T) {
	for _, after := range []time.Duration{0, 300 * time.Millisecond, 990 * time.Millisecond} {
		t.Run(fmt.Sprintf("killed %s after a renewal", after), func(t *testing.T) {
			w := newWorld(t)
			a := w.add("a", "v1.0.0", Timings{})
			w.run(tick)
			w.add("b", "v1.0.0", Timings{})
			w.add("c", "v1.0.0", Timings{})
			w.run(10 * time.Second)
			for a.next-w.now > time.Second-after {
				w.run(tick)
			}
			a.dead = true
			h, took := w.waitWriter("a", bound(Timings{}))
			if h.term != 2 {
				t.Errorf("%s took over in term %d, want 2", h.name, h.term)
			}
			t.Logf("failover %s", took)
		})
	}
}

func TestPausedLeaderWritesNothingOnceResumed(t *testing.T) {
	for _, later := range []time.Duration{0, 20 * time.Second} {
		t.Run(fmt.Sprintf("resumed %s after the take-over", later), func(t *testing.T) {
			w := newWorld(t)
			a := w.add("a", "v1.0.0", Timings{})
			w.run(tick)
			w.add("b", "v1.0.0", Timings{})
			w.run(10 * time.Second)
			a.paused = true
			h, took := w.waitWriter("a", bound(Timings{}))
			if h.name != "b" || h.term != 2 || took > bound(Timings{}) {
				t.Fatalf("writer %+v after %s, want b in term 2", h, took)
			}
			w.run(later)
			// SIGCONT: a's clock went on while it was stopped, so its very
			// first look at the fence, before any round, refuses.
			a.paused = false
			w.check()
			if err := a.e.Fence(a.term); !errors.Is(err, ErrExpired) {
				t.Fatalf("Fence after the pause = %v, want ErrExpired", err)
			}
			w.run(5 * time.Second)
			if a.leading || a.e.Observed().Leading {
				t.Error("a still leads after a round saw b's term")
			}
			if h := w.writer(); h.name != "b" || h.term != 2 {
				t.Errorf("writer %+v, want b in term 2 still", h)
			}
		})
	}
}

func TestLeaderThatCannotRenewStopsBeforeAStandbyTakesOver(t *testing.T) {
	tm := Timings{}.WithDefaults()
	w := newWorld(t)
	a := w.add("a", "v1.0.0", tm)
	w.run(tick)
	b := w.add("b", "v1.0.0", tm)
	w.run(10 * time.Second)
	a.down = true
	start := w.now
	for a.leading {
		w.run(tick)
	}
	if took := w.now - start; took > tm.RenewDeadline+tm.Retry+tick {
		t.Errorf("a stepped down %s after its manager went away, want within the renew deadline %s", took, tm.RenewDeadline)
	}
	h, _ := w.waitWriter("a", bound(tm))
	if h.name != "b" || h.term != 2 {
		t.Errorf("writer %+v, want b in term 2", h)
	}
	// Back again, a follows b and takes nothing.
	a.down = false
	w.run(30 * time.Second)
	if a.leading || !b.leading {
		t.Errorf("a leading %v, b leading %v; want b alone", a.leading, b.leading)
	}
}

func TestLeaderWhoseLeaseWasTakenStepsDownAtItsNextRound(t *testing.T) {
	w := newWorld(t)
	a := w.add("a", "v1.0.0", Timings{})
	w.run(tick)
	// Someone else writes the record over a (an operator, another
	// controller with the same id): a's next renewal sees it.
	rec, ver, _, _ := w.store.Get(context.Background())
	rec.Holder, rec.Name, rec.Term = "x/1", "x", rec.Term+1
	if err := w.store.Update(context.Background(), ver, rec); err != nil {
		t.Fatal(err)
	}
	w.run(time.Second + tick)
	if a.leading {
		t.Error("a still leads after its lease was taken")
	}
	if err := a.e.Fence(1); !errors.Is(err, ErrNotLeader) {
		t.Errorf("Fence(1) = %v, want ErrNotLeader", err)
	}
}

func TestClockJumps(t *testing.T) {
	tests := []struct {
		name string
		// jump is applied to the candidate named who, ten seconds in.
		who  string
		jump time.Duration
		// fenced says a's fence must refuse right after the jump.
		fenced bool
	}{
		{name: "leader's clock jumps forward: it writes nothing until it renews", who: "a", jump: time.Hour, fenced: true},
		{name: "leader's clock goes back: the lease is not stretched", who: "a", jump: -time.Hour, fenced: true},
		{name: "standby's clock goes back: it waits longer, never less", who: "b", jump: -time.Hour},
		{name: "standby's clock is hours ahead of the leader's from the start", who: "b", jump: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			a := w.add("a", "v1.0.0", Timings{})
			w.run(tick)
			b := w.add("b", "v1.0.0", Timings{})
			if tt.jump == 0 {
				b.offset = 3 * time.Hour
			}
			w.run(10 * time.Second)
			map[string]*node{"a": a, "b": b}[tt.who].offset += tt.jump
			if err := a.e.Fence(a.term); (err != nil) != tt.fenced {
				t.Errorf("a's Fence right after the jump = %v, want refused %v", err, tt.fenced)
			}
			w.run(30 * time.Second)
			if !a.leading || b.leading || len(w.holders) > 3 {
				t.Errorf("a leading %v, b leading %v, holders %+v: want a to keep the lease", a.leading, b.leading, w.holders)
			}
		})
	}
}

func TestClockDriftWithinTheMarginKeepsOneWriter(t *testing.T) {
	w := newWorld(t)
	a := w.add("a", "v1.0.0", Timings{})
	a.rate = 0.999 // the leader's clock is slow: its lease looks younger to it
	w.run(tick)
	b := w.add("b", "v1.0.0", Timings{})
	b.rate = 1.001 // the standby's is fast: the lease looks older to it
	for range 5 {
		w.run(20 * time.Second)
		a.dead = true
		w.waitWriter("a", bound(Timings{})+time.Second)
		a = w.add(fmt.Sprintf("a%d", w.now/time.Second), "v1.0.0", Timings{})
		a.rate = 0.999
		a, b = b, a
	}
}

func TestOlderStandbyLetsANewerOneTakeOverFirst(t *testing.T) {
	tm := Timings{}.WithDefaults()
	t.Run("both there: the newer one takes over", func(t *testing.T) {
		w := newWorld(t)
		a := w.add("a", "v1.3.0", tm)
		w.run(tick)
		w.add("old", "v1.2.0", tm)
		w.add("new", "v1.3.0", tm)
		w.run(10 * time.Second)
		a.dead = true
		h, _ := w.waitWriter("a", bound(tm))
		if h.name != "new" {
			t.Errorf("%s took over, want new", h.name)
		}
	})
	t.Run("the older one alone takes over, two durations later", func(t *testing.T) {
		w := newWorld(t)
		a := w.add("a", "v1.3.0", tm)
		w.run(tick)
		w.add("old", "v1.2.0", tm)
		w.run(10 * time.Second)
		a.e.release(context.Background())
		a.dead = true
		h, took := w.waitWriter("a", 2*tm.Duration+2*tm.Retry)
		if h.name != "old" || took < 2*tm.Duration {
			t.Errorf("%s took over after %s, want old after %s", h.name, took, 2*tm.Duration)
		}
	})
}

func TestHolderDurationIsHonouredWithinABound(t *testing.T) {
	w := newWorld(t)
	a := w.add("a", "v1.0.0", Timings{Duration: 20 * time.Second, RenewDeadline: 12 * time.Second})
	w.run(tick)
	w.add("b", "v1.0.0", Timings{})
	w.run(5 * time.Second)
	a.dead = true
	_, took := w.waitWriter("a", 20*time.Second+2*time.Second+2*tick)
	if took < 19*time.Second {
		t.Errorf("b took over after %s, want after a's own duration of 20s", took)
	}
}

func TestTimingsThatAllowTwoWritersAreRefused(t *testing.T) {
	tests := []struct {
		name string
		tm   Timings
	}{
		{name: "retry not below the renew deadline", tm: Timings{Retry: 5 * time.Second}},
		{name: "renew deadline past the fenced duration", tm: Timings{RenewDeadline: 7 * time.Second}},
		{name: "margin as long as the lease", tm: Timings{Duration: 3 * time.Second, RenewDeadline: 2 * time.Second, Margin: 3 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(Options{Store: &memStore{}, Self: Candidate{ID: "a"}, Timings: tt.tm}); err == nil {
				t.Errorf("New accepted %+v", tt.tm.WithDefaults())
			}
		})
	}
	if err := (Timings{}).WithDefaults().Validate(); err != nil {
		t.Errorf("the defaults are refused: %v", err)
	}
}

// TestRunReleasesAfterTheTermDrained runs real electors in a bubble: the
// leader's context ends, its lead sees its own end, the lease is released
// only once lead returned, and the standby takes over at its next look.
func TestRunReleasesAfterTheTermDrained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &memStore{}
		newElector := func(name string) *Elector {
			e, err := New(Options{Store: store, Self: Candidate{ID: name + "/1", Name: name}, Events: func() int64 { return 42 }})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		a, b := newElector("a"), newElector("b")
		actx, stopA := context.WithCancel(t.Context())
		bctx, stopB := context.WithCancel(t.Context())
		var drained time.Time
		terms := make(chan Term, 2)
		aDone := make(chan error, 1)
		go func() {
			aDone <- a.Run(actx, func(ctx context.Context, tm Term) {
				terms <- tm
				<-ctx.Done()
				time.Sleep(1500 * time.Millisecond) // a drain that takes a while
				drained = time.Now()
			})
		}()
		synctest.Wait()
		if got := <-terms; got.Number != 1 {
			t.Fatalf("a's term %d, want 1", got.Number)
		}
		bDone := make(chan error, 1)
		var bStarted time.Time
		go func() {
			bDone <- b.Run(bctx, func(ctx context.Context, tm Term) {
				bStarted = time.Now()
				terms <- tm
				<-ctx.Done()
			})
		}()
		time.Sleep(20 * time.Second)
		stopA()
		if err := <-aDone; err != nil {
			t.Fatal(err)
		}
		got := <-terms
		if got.Number != 2 || got.Previous.Name != "a" || !got.Previous.Released() || got.Previous.Events != 42 {
			t.Errorf("b's term %+v, want 2 after a's release with its last event 42", got)
		}
		if bStarted.Before(drained) || bStarted.Sub(drained) > time.Second {
			t.Errorf("b started %s after a's drain ended, want within a retry and never before", bStarted.Sub(drained))
		}
		stopB()
		if err := <-bDone; err != nil {
			t.Fatal(err)
		}
		if rec, _, _, _ := store.Get(t.Context()); !rec.Released() || rec.Term != 2 {
			t.Errorf("record %+v after both stopped, want released in term 2", rec)
		}
	})
}

func TestRunGivesUpALeaseWhoseLeadReturnedOnItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &memStore{}
		e, err := New(Options{Store: store, Self: Candidate{ID: "a/1", Name: "a"}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var calls atomic.Int32
		done := make(chan error, 1)
		go func() {
			done <- e.Run(ctx, func(context.Context, Term) { calls.Add(1) })
		}()
		time.Sleep(5 * time.Second)
		if rec, _, _, _ := store.Get(ctx); !rec.Released() || calls.Load() != 1 {
			t.Errorf("after lead returned: record %+v, %d calls; want released after one", rec, calls.Load())
		}
		time.Sleep(5 * time.Second) // past its rest, it campaigns again
		if n := calls.Load(); n != 2 {
			t.Errorf("%d calls of lead after its rest, want 2", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

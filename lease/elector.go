package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/mod/semver"
)

// Candidate is this process, as the lease names its holder.
type Candidate struct {
	// ID tells this process apart from every other, restarts included (a
	// restarted process is a new candidate): the record's Holder.
	ID string
	// Name is the replica's name for people; Addr the host:port other
	// replicas reach its API at; Version its build's version (semver, or
	// anything else to opt out of the downgrade guard).
	Name, Addr, Version string
}

// Options wire an Elector. Store and Self.ID are required; the zero value
// of every other field means its default.
type Options struct {
	Store   Store
	Self    Candidate
	Timings Timings
	// Now is the clock every duration is measured on; its readings must
	// only move forward at the pace of real time (time.Now's monotonic
	// reading does, whatever the wall clock does). nil means time.Now.
	Now func() time.Time
	// Events returns the last event id this replica kept, written in the
	// record at each renewal and at release; nil writes 0.
	Events func() int64
	Logger *slog.Logger
}

// Term is one term this process leads.
type Term struct {
	Number int64
	// Previous is the record as it was before this process took the
	// lease: the last leader and the last event id it had kept.
	Previous Record
}

// Observation is what this process knows of the lease.
type Observation struct {
	// Known is set once the record was read (or found missing) once.
	Known bool
	// Leading is set while this process holds the lease for Term.
	Leading bool
	// Term is the lease's term as last read.
	Term int64
	// Leader is the record as last read; Leader.Released() when nobody
	// holds it.
	Leader Record
	// Err is why the last read failed; "" when it succeeded.
	Err string
}

// Elector campaigns for the lease and keeps it while it leads. Build it
// with New; Run must be called once. Fence and Observed are safe for
// concurrent use.
type Elector struct {
	store  Store
	self   Candidate
	t      Timings
	now    func() time.Time
	events func() int64
	log    *slog.Logger

	// changed receives a value after each change of Observed (buffered 1).
	changed chan struct{}

	mu  sync.Mutex
	obs Observation
	// seenVer is the record's version as last read, seenAt when this
	// process first saw it: a standby's wait runs from there.
	seenVer uint64
	seenAt  time.Time
	// sent is when the last successful acquisition or renewal was sent:
	// the lease counts from there, the earliest the swarm can have
	// stored it. failing marks a streak of failed renewals, logged once.
	sent    time.Time
	failing bool
	// rest is when a leader whose term ended on its own may campaign again.
	rest time.Time
}

// New checks opts and returns an Elector that does nothing until Run.
func New(opts Options) (*Elector, error) {
	if opts.Store == nil {
		return nil, errors.New("lease: no store")
	}
	if opts.Self.ID == "" {
		return nil, errors.New("lease: the candidate has no id")
	}
	t := opts.Timings.WithDefaults()
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("lease timings: %w", err)
	}
	e := &Elector{store: opts.Store, self: opts.Self, t: t, now: opts.Now, events: opts.Events, log: opts.Logger,
		changed: make(chan struct{}, 1)}
	if e.now == nil {
		e.now = time.Now
	}
	if e.events == nil {
		e.events = func() int64 { return 0 }
	}
	if e.log == nil {
		e.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return e, nil
}

// Timings returns the timings in force, defaults filled in.
func (e *Elector) Timings() Timings { return e.t }

// Self returns the candidate this elector campaigns as.
func (e *Elector) Self() Candidate { return e.self }

// Observed returns what this process knows of the lease now.
func (e *Elector) Observed() Observation {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.obs
}

// Changes receives a value after Observed changed (the leader, its
// address, the term, this process's role). It holds one value at most: a
// slow reader sees one wake-up for many changes and reads Observed.
func (e *Elector) Changes() <-chan struct{} { return e.changed }

// Fence returns nil while this process may write in term: it holds the
// lease for that term, and its last renewal was sent less than
// Duration-Margin ago by the elector's clock. It does no I/O. A process
// frozen past that (SIGSTOP, a long pause) is refused from the instant it
// resumes, before it has noticed that it lost the lease.
func (e *Elector) Fence(term int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.obs.Leading || e.obs.Term != term {
		return fmt.Errorf("term %d: %w", term, ErrNotLeader)
	}
	age := e.now().Sub(e.sent)
	switch limit := e.t.Duration - e.t.Margin; {
	case age < 0:
		return fmt.Errorf("term %d: the clock went back %s since the last renewal: %w", term, -age, ErrExpired)
	case age >= limit:
		return fmt.Errorf("term %d: last renewal sent %s ago, writes stop at %s: %w", term, age.Round(time.Millisecond), limit, ErrExpired)
	}
	return nil
}

// Run campaigns until ctx ends. Each time this process wins the lease it
// calls lead in a goroutine of its own, with a context that ends when the
// term does (the lease lost, or not renewed within RenewDeadline), and it
// campaigns again only once lead has returned. When ctx ends while it
// leads, it cancels lead's context, keeps renewing until lead returns, and
// then releases the lease, so a standby takes over at its next look. A
// lead that returns on its own while its term lasts gives the lease up:
// the lease is released and this process waits a Duration before it
// campaigns again. Run returns nil once ctx ended and the lease is free.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, t Term)) error {
	var cur *leadership
	stopping := false
	done := ctx.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	// The store is still asked while a term drains after ctx ended.
	base := context.WithoutCancel(ctx)
	for {
		var termDone <-chan struct{}
		if cur != nil {
			termDone = cur.done
		}
		select {
		case <-done:
			done, stopping = nil, true
			if cur == nil {
				return nil
			}
			cur.cancel()
			continue
		case <-termDone:
			cur = nil
			if stopping {
				e.release(base)
				return nil
			}
			if e.Observed().Leading {
				e.log.Warn("leader term ended on its own; lease released")
				e.release(base)
				e.mu.Lock()
				e.rest = e.now().Add(e.t.Duration)
				e.mu.Unlock()
			}
			continue
		case <-timer.C:
		}
		won, lost := e.step(base, cur == nil && !stopping)
		switch {
		case won != nil:
			cur = e.start(ctx, lead, *won)
		case lost && cur != nil:
			cur.cancel()
		}
		timer.Reset(e.t.Retry)
	}
}

// leadership is one running call of lead.
type leadership struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs lead for t until its context ends or it returns.
func (e *Elector) start(ctx context.Context, lead func(context.Context, Term), t Term) *leadership {
	tctx, cancel := context.WithCancel(ctx)
	l := &leadership{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		defer cancel()
		lead(tctx, t)
	}()
	return l
}

// step reads the record once and renews it (leading) or takes it over
// (when may and the lease is due). It returns the term won, or lost when
// this process stopped leading.
func (e *Elector) step(ctx context.Context, may bool) (won *Term, lost bool) {
	now := e.now()
	rec, ver, found, err := e.get(ctx)
	if err != nil {
		e.note(func(o *Observation) { o.Err = err.Error() })
		if e.Observed().Leading {
			return nil, e.checkDeadline(err)
		}
		return nil, false
	}
	e.observe(rec, ver, found, now)
	e.mu.Lock()
	leading, term := e.obs.Leading, e.obs.Term
	e.mu.Unlock()
	if leading {
		if !found || rec.Holder != e.self.ID || rec.Term != term {
			e.stepDown(fmt.Sprintf("lease taken by %s in term %d", rec.Name, rec.Term))
			return nil, true
		}
		return nil, e.renew(ctx, ver, rec)
	}
	if !may || !e.due(rec, found, now) {
		return nil, false
	}
	return e.acquire(ctx, ver, rec, found, now), false
}

// get reads the record within one Retry.
func (e *Elector) get(ctx context.Context) (Record, uint64, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, e.t.Retry)
	defer cancel()
	return e.store.Get(ctx)
}

// observe keeps what a read found; a new version restarts a standby's wait.
func (e *Elector) observe(rec Record, ver uint64, found bool, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.obs.Known || ver != e.seenVer || now.Before(e.seenAt) {
		// A clock that went back restarts the wait rather than shorten it.
		e.seenVer, e.seenAt = ver, now
	}
	old := e.obs
	e.obs.Known, e.obs.Err = true, ""
	e.obs.Leader = rec
	if found && !e.obs.Leading {
		e.obs.Term = rec.Term
	}
	if !old.Known || old.Leader.Holder != rec.Holder || old.Leader.Addr != rec.Addr || old.Term != e.obs.Term || old.Err != "" {
		e.signal()
	}
}

// due reports whether a standby may take the lease now: at once when it
// was released or never written, once unchanged for the longer of the two
// Durations when held; a candidate older than the lease's version waits
// another two Durations, so a newer one takes over first.
func (e *Elector) due(rec Record, found bool, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now.Before(e.rest) {
		return false
	}
	if !found {
		return true
	}
	var wait time.Duration
	if !rec.Released() {
		// The holder's own duration, when longer, is honoured up to a
		// bound: a record naming an hour must not stop every take-over.
		wait = max(e.t.Duration, min(rec.Duration, maxDurationFactor*e.t.Duration))
	}
	if older(e.self.Version, rec.Version) {
		wait += 2 * e.t.Duration
	}
	return now.Sub(e.seenAt) >= wait
}

// maxDurationFactor bounds the holder's Duration a standby honours, in
// multiples of its own.
const maxDurationFactor = 10

// older reports whether version mine is below theirs; a version that is
// not semver (a development build) is never older.
func older(mine, theirs string) bool {
	return semver.IsValid(mine) && semver.IsValid(theirs) && semver.Compare(mine, theirs) < 0
}

// acquire writes this process as the holder of the next term, over the
// version read; it returns the term when the swap won.
func (e *Elector) acquire(ctx context.Context, ver uint64, prev Record, found bool, sent time.Time) *Term {
	next := e.record(prev.Term+1, sent)
	ctx, cancel := context.WithTimeout(ctx, 2*e.t.Retry)
	defer cancel()
	var err error
	if found {
		err = e.store.Update(ctx, ver, next)
	} else {
		err = e.store.Create(ctx, next)
	}
	if err != nil {
		if !errors.Is(err, ErrConflict) {
			e.log.Warn("lease not taken", "term", next.Term, "err", err)
		}
		return nil
	}
	e.mu.Lock()
	e.obs.Leading, e.obs.Term, e.obs.Leader, e.sent, e.failing = true, next.Term, next, sent, false
	e.signal()
	e.mu.Unlock()
	e.log.Info("leader lease taken", "term", next.Term, "previous", prev.Name, "previous_term", prev.Term, "released", found && prev.Released())
	return &Term{Number: next.Term, Previous: prev}
}

// renew writes the lease again over the version read; it reports whether
// the leader must step down.
func (e *Elector) renew(ctx context.Context, ver uint64, rec Record) bool {
	sent := e.now()
	ctx, cancel := context.WithTimeout(ctx, 2*e.t.Retry)
	defer cancel()
	if err := e.store.Update(ctx, ver, e.record(rec.Term, sent)); err != nil {
		return e.checkDeadline(err)
	}
	e.mu.Lock()
	e.sent = sent
	if e.failing {
		e.failing = false
		e.log.Info("leader lease renewed again", "term", rec.Term)
	}
	e.mu.Unlock()
	return false
}

// checkDeadline handles a failed renewal: the leader steps down once none
// succeeded for RenewDeadline. It reports whether it stepped down.
func (e *Elector) checkDeadline(err error) bool {
	e.mu.Lock()
	age, first := e.now().Sub(e.sent), !e.failing
	e.failing = true
	e.mu.Unlock()
	if age >= e.t.RenewDeadline || age < 0 {
		e.stepDown(fmt.Sprintf("not renewed for %s: %v", age.Round(time.Millisecond), err))
		return true
	}
	if first {
		e.log.Warn("leader lease not renewed; retrying", "err", err, "steps_down_in", (e.t.RenewDeadline - age).Round(time.Millisecond))
	}
	return false
}

// stepDown ends this process's term: Fence refuses from now on.
func (e *Elector) stepDown(why string) {
	e.mu.Lock()
	term := e.obs.Term
	e.obs.Leading = false
	e.signal()
	e.mu.Unlock()
	e.log.Warn("leader stepped down", "term", term, "why", why)
}

// release gives the lease up, keeping its term, version and last event
// id for the next leader; a record that moved meanwhile is left alone.
func (e *Elector) release(ctx context.Context) {
	e.mu.Lock()
	term, leading := e.obs.Term, e.obs.Leading
	e.obs.Leading = false
	e.signal()
	e.mu.Unlock()
	if !leading {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*e.t.Retry)
	defer cancel()
	rec, ver, found, err := e.store.Get(ctx)
	if err == nil && found && rec.Holder == e.self.ID && rec.Term == term {
		next := e.record(term, e.now())
		next.Holder = ""
		err = e.store.Update(ctx, ver, next)
	}
	if err != nil {
		e.log.Warn("leader lease not released; a standby takes over once it expires", "term", term, "err", err)
		return
	}
	e.log.Info("leader lease released", "term", term)
}

// record is the record this process writes for term.
func (e *Elector) record(term int64, at time.Time) Record {
	return Record{Holder: e.self.ID, Name: e.self.Name, Addr: e.self.Addr, Version: e.self.Version,
		Term: term, Events: e.events(), Duration: e.t.Duration, Renewed: at}
}

// note changes the observation under the lock and signals the change.
func (e *Elector) note(f func(o *Observation)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.obs
	f(&e.obs)
	if old != e.obs {
		e.signal()
	}
}

// signal wakes a reader of Changes; e.mu is held.
func (e *Elector) signal() {
	select {
	case e.changed <- struct{}{}:
	default:
	}
}

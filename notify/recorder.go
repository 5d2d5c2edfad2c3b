package notify

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Appender keeps records: the store, as the Recorder needs it. Insert stores
// rec under rec.ID, which is above every id stored before.
type Appender interface {
	Insert(ctx context.Context, rec Record) error
}

// Publisher receives records once they are kept: a Broker.
type Publisher interface {
	Publish(rec Record)
}

// RecorderOptions configures a Recorder. The zero value records nothing and
// publishes nowhere, with defaults for the rest.
type RecorderOptions struct {
	// Store keeps every event. Nil when the store could not be opened:
	// events are then published with ids but kept nowhere.
	Store Appender
	// Publish receives every event after the store was asked to keep it,
	// in id order, whether or not the write succeeded. Usually the Broker.
	Publish Publisher
	// LastID is the highest id the store ever handed out (store.LastID),
	// 0 when unknown.
	LastID int64
	// Queue bounds the events waiting to be written. Default 1024.
	Queue int
	// WriteTimeout bounds one write, so a hung disk cannot stall
	// publishing. Default 5s.
	WriteTimeout time.Duration
	// Logger receives Warn lines for write failures and drops.
	// Default slog.Default().
	Logger *slog.Logger
	// Now is the clock the id floor is read from. Default time.Now.
	Now func() time.Time
}

// Recorder is the notifier that keeps events and then publishes them: it
// gives each event its id, appends it to the store from its own goroutine
// (Run) and hands the record to the broker, so that whatever a subscriber
// sees live is already in the store for a replay.
//
// # Ids
//
// The first id is one above max(LastID, the start time in microseconds since
// the Unix epoch); each later event takes the next integer. Because the store
// keeps the ids it is given, LastID after a restart is at least every id
// stored before, and the time floor puts the new ids above any id handed out
// by an earlier run even when that run could not store them (no database, a
// corrupt or replaced one) — so ids only ever grow across restarts, as long
// as the clock does not go back past the previous start and no run issues
// more than one id per microsecond. A client's Last-Event-ID therefore
// replays exactly the stored events it missed. Ids stay below 2^53, exact in
// JavaScript, until the year 2255.
//
// A replicated controller calls BeginTerm when it becomes the leader: the
// term's ids start above the store's last id (which holds what the replica
// copied of the earlier leaders' history) and above the clock, so they
// stay above every id an earlier leader handed out, and each record
// carries the term.
//
// # Failures
//
// Notify never blocks: the event is queued, or, when the queue is full,
// dropped (counted, logged at Warn once per run of drops) and neither stored
// nor published, which keeps published ids in order. A failed write is
// counted and logged at Warn, and the event is still published: live
// subscribers see it, a replay will not.
type Recorder struct {
	store   Appender
	publish Publisher
	timeout time.Duration
	log     *slog.Logger
	queue   chan Record
	stats   counters
	now     func() time.Time

	mu       sync.Mutex
	next     int64
	term     int64
	dropping bool
	// issued is the last id handed out, recorded the last one stored and
	// published; progress is closed and replaced each time recorded moves
	// (Flush waits on it).
	issued   int64
	recorded int64
	progress chan struct{}
}

// NewRecorder returns a Recorder. Events queue until Run is called.
func NewRecorder(opts RecorderOptions) *Recorder {
	if opts.Queue <= 0 {
		opts.Queue = 1024
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Recorder{
		store:    opts.Store,
		publish:  opts.Publish,
		timeout:  opts.WriteTimeout,
		log:      opts.Logger,
		queue:    make(chan Record, opts.Queue),
		next:     max(opts.LastID, opts.Now().UnixMicro()) + 1,
		now:      opts.Now,
		progress: make(chan struct{}),
	}
}

// BeginTerm stamps the events recorded from now on with term and gives
// them ids above floor (the store's LastID) and above the clock's reading
// in microseconds. A replica calls it as it becomes the leader, before
// any event of the term is raised.
func (r *Recorder) BeginTerm(term, floor int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.term = term
	r.next = max(r.next, floor+1, r.now().UnixMicro()+1)
}

// Recorded is the id of the last event this recorder stored (or tried
// to) and published, 0 before the first.
func (r *Recorder) Recorded() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.recorded
}

// Flush waits until every event queued before the call is stored and
// published, or ctx ends (its error). A replica that stops leading calls
// it before it gives its lease up, so the history it hands over is whole.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	target := r.issued
	r.mu.Unlock()
	for {
		r.mu.Lock()
		done, wait := r.recorded >= target, r.progress
		r.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Name implements Named.
func (*Recorder) Name() string { return "store" }

// Stats implements Counted: Delivered counts events stored, Failed writes
// that failed, Dropped events lost to a full queue.
func (r *Recorder) Stats() Stats { return r.stats.snapshot() }

// Notify gives e the next id and queues it, without blocking. A zero At is
// stamped with the current time.
func (r *Recorder) Notify(_ context.Context, e Event) {
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	// The id is taken and the record queued under one lock, so the queue
	// holds records in id order.
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case r.queue <- Record{ID: r.next, Term: r.term, Event: e}:
		r.issued = r.next
		r.next++
		r.dropping = false
	default:
		r.stats.dropped.Add(1)
		if !r.dropping {
			r.dropping = true
			r.log.Warn("event dropped", "reason", "store queue full", "app", e.Application, "type", string(e.Type))
		}
	}
}

// Run writes and publishes queued events until ctx is done, then drains the
// queue within one WriteTimeout and returns nil.
func (r *Recorder) Run(ctx context.Context) error {
	for {
		select {
		case rec := <-r.queue:
			r.record(ctx, rec)
		case <-ctx.Done():
			drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
			defer cancel()
			for {
				select {
				case rec := <-r.queue:
					r.record(drain, rec)
				default:
					return nil
				}
			}
		}
	}
}

// record stores rec, then publishes it, even when storing failed: live
// subscribers should not miss an event because the disk is full, though
// a later replay will not find it.
func (r *Recorder) record(ctx context.Context, rec Record) {
	if r.store != nil {
		wctx, cancel := context.WithTimeout(ctx, r.timeout)
		err := r.store.Insert(wctx, rec)
		cancel()
		if err != nil {
			r.stats.failed.Add(1)
			r.log.Warn("event not stored", "id", rec.ID, "app", rec.Application, "type", string(rec.Type), "err", err)
		} else {
			r.stats.delivered.Add(1)
		}
	}
	if r.publish != nil {
		r.publish.Publish(rec)
	}
	r.mu.Lock()
	r.recorded = rec.ID
	close(r.progress)
	r.progress = make(chan struct{})
	r.mu.Unlock()
}

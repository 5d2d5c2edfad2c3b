package notify

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
)

// BrokerOptions configures a Broker. The zero value means all defaults.
type BrokerOptions struct {
	// Buffer is how many records each subscriber may fall behind before it
	// is marked lagging. Default 256.
	Buffer int
	// Logger receives one Warn line when a subscriber starts lagging.
	// Default slog.Default().
	Logger *slog.Logger
}

// Broker fans records out to subscribers: the API's event stream is built
// on it. It is a Notifier, but in a controller with a store it is fed by a
// Recorder (through Publish) so that every record it carries is already
// stored and has the store's id.
//
// Publishing never blocks: each subscriber has a bounded buffer, and a
// subscriber whose buffer is full is marked lagging and gets nothing more
// until it calls Resume (see Subscription). A slow subscriber therefore holds
// up neither the publisher nor the others. A Broker is safe for concurrent
// use; build it with NewBroker.
type Broker struct {
	buffer  int
	log     *slog.Logger
	dropped atomic.Uint64

	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	last   int64
	nextID uint64
	closed bool
}

// NewBroker returns a broker with no subscribers.
func NewBroker(opts BrokerOptions) *Broker {
	if opts.Buffer <= 0 {
		opts.Buffer = 256
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Broker{buffer: opts.Buffer, log: opts.Logger, subs: map[*Subscription]struct{}{}}
}

// Name implements Named.
func (*Broker) Name() string { return "event-stream" }

// Notify publishes e under the next id after the last one published. Use it
// only when no Recorder feeds this broker: those records are in no store, so
// a lagging subscriber cannot replay them.
func (b *Broker) Notify(_ context.Context, e Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.publishLocked(Record{ID: b.last + 1, Event: e})
}

// Publish delivers rec to every subscriber whose filter matches it, without
// blocking. Callers publish in increasing id order; LastID reports the
// highest id seen. Publishing to a closed broker does nothing.
func (b *Broker) Publish(rec Record) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.publishLocked(rec)
}

// publishLocked is Publish with b.mu held. A subscriber's first overflow
// marks it lagging and signals Lagged once; later records are only counted
// as dropped, never queued, so a resumed subscriber replays from the store
// in order instead of receiving a gap followed by newer records.
func (b *Broker) publishLocked(rec Record) {
	if b.closed {
		return
	}
	b.last = max(b.last, rec.ID)
	for s := range b.subs {
		if !s.filter.Match(rec.Event) {
			continue
		}
		if s.lagging {
			s.dropped.Add(1)
			b.dropped.Add(1)
			continue
		}
		select {
		case s.c <- rec:
		default:
			s.lagging = true
			s.dropped.Add(1)
			b.dropped.Add(1)
			b.log.Warn("event subscriber lagging", "subscriber", s.id, "buffer", b.buffer, "event_id", rec.ID)
			select {
			case s.lagged <- struct{}{}:
			default:
			}
		}
	}
}

// LastID is the highest id published so far, 0 before the first.
func (b *Broker) LastID() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

// Subscribers is the number of open subscriptions, for metrics.
func (b *Broker) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// Dropped is the number of records not delivered to a lagging subscriber,
// summed over all subscriptions ever made, for metrics.
func (b *Broker) Dropped() uint64 { return b.dropped.Load() }

// Subscribe opens a subscription receiving every record published from now
// on that f matches. The caller must Close it. f is copied; the caller keeps
// ownership of its slices. Subscribing to a closed broker returns a
// subscription whose channel is already closed.
func (b *Broker) Subscribe(f Filter) *Subscription {
	f.Applications = slices.Clone(f.Applications)
	f.Types = slices.Clone(f.Types)
	s := &Subscription{
		b:      b,
		filter: f,
		c:      make(chan Record, b.buffer),
		lagged: make(chan struct{}, 1),
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextID++
	s.id = b.nextID
	s.start = b.last
	if b.closed {
		s.closed = true
		close(s.c)
		return s
	}
	b.subs[s] = struct{}{}
	return s
}

// Close closes every subscription's channel, so streams built on them end,
// and makes later publishes no-ops. http.Server.Shutdown does not end
// streaming handlers; closing the broker does.
func (b *Broker) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for s := range b.subs {
		s.closed = true
		close(s.c)
		delete(b.subs, s)
	}
}

// Filter selects the records a subscription receives. The zero value
// matches everything.
type Filter struct {
	// Applications, when not empty, lists the applications wanted.
	Applications []string
	// Types, when not empty, lists the event types wanted.
	Types []EventType
	// Swarms, when not nil, lists the destinations wanted; "" is the
	// local swarm, so an empty but non-nil list matches nothing.
	Swarms []string
	// Allow, when not nil, is asked about every application; false hides
	// the event. The API scopes a token with it. It must be fast and safe
	// for concurrent use: it is called while publishing.
	Allow func(app string) bool
}

// Match reports whether e passes f.
func (f Filter) Match(e Event) bool {
	if len(f.Applications) > 0 && !slices.Contains(f.Applications, e.Application) {
		return false
	}
	if len(f.Types) > 0 && !slices.Contains(f.Types, e.Type) {
		return false
	}
	if f.Swarms != nil && !slices.Contains(f.Swarms, e.Swarm) {
		return false
	}
	return f.Allow == nil || f.Allow(e.Application)
}

// Subscription is one subscriber's view of a Broker.
//
// Records arrive on C in publication (id) order. When the subscriber falls
// Buffer records behind, the subscription is marked lagging: Lagged fires
// once, and further records are dropped (counted in Dropped) until Resume.
// The subscriber then calls Resume first and replays from the store every
// record after the last one it delivered; records published after Resume
// arrive on C again, some of them possibly also in the replay (skip those by
// id). Stream does all of this; see TestStreamReplaysWhatALaggingSubscriberMissed.
//
// Methods are safe for concurrent use.
type Subscription struct {
	b       *Broker
	id      uint64
	filter  Filter
	c       chan Record
	lagged  chan struct{}
	start   int64
	dropped atomic.Uint64

	// Guarded by b.mu.
	lagging bool
	closed  bool
}

// C is the channel records arrive on. It is closed by Close or when the
// broker closes.
func (s *Subscription) C() <-chan Record { return s.c }

// Lagged receives a value each time the subscription becomes lagging.
func (s *Subscription) Lagged() <-chan struct{} { return s.lagged }

// Lagging reports whether records are currently being dropped.
func (s *Subscription) Lagging() bool {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.lagging
}

// Resume ends lagging: records published from now on are delivered again.
// Records still buffered in C stay there. Call it before replaying from the
// store, so that nothing published during the replay is lost.
func (s *Subscription) Resume() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.lagging = false
}

// Start is the broker's LastID when the subscription was opened: no record
// with an id at or below it ever arrives on C.
func (s *Subscription) Start() int64 { return s.start }

// Dropped is how many matching records this subscription lost to lagging.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Filter returns the subscription's filter. The slices are the
// subscription's own: do not modify them.
func (s *Subscription) Filter() Filter { return s.filter }

// Close ends the subscription and closes C. It is idempotent.
func (s *Subscription) Close() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	delete(s.b.subs, s)
	close(s.c)
}

package notify

import (
	"context"
	"errors"
	"log/slog"
	"path"
	"slices"
	"sync"
	"time"
)

// Match selects the events an outbound notifier sends. The zero value
// matches every event.
type Match struct {
	// Types, when not empty, lists the types sent.
	Types []EventType
	// Swarms, when not empty, lists path.Match globs over Event.Swarm. The
	// swarm the controller runs in is "", matched by "" and by "*".
	Swarms []string
	// Applications, when not empty, lists path.Match globs over
	// Event.Application.
	Applications []string
}

// Matches reports whether e passes m. A malformed glob matches nothing;
// LoadConfig refuses them.
func (m Match) Matches(e Event) bool {
	if len(m.Types) > 0 && !slices.Contains(m.Types, e.Type) {
		return false
	}
	return globsMatch(m.Swarms, e.Swarm) && globsMatch(m.Applications, e.Application)
}

// globsMatch reports whether s matches any of globs; no globs match all.
func globsMatch(globs []string, s string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if ok, err := path.Match(g, s); ok && err == nil {
			return true
		}
	}
	return false
}

// Delivery is how an outbound notifier queues, routes and retries. The zero
// value means all defaults, matching every event and suppressing nothing.
type Delivery struct {
	// Match selects the events sent; the rest are counted as Suppressed.
	Match Match
	// Suppress, when above zero, drops an event equal to one sent less than
	// Suppress ago in application, type, revision and message. The window
	// runs from the send, so a condition that persists is sent again once
	// per window.
	Suppress time.Duration
	// Queue bounds the events waiting to be sent. Default 256.
	Queue int
	// Timeout bounds one attempt. Default 10s.
	Timeout time.Duration
	// Retries is how many times a failed attempt is retried; the waits
	// between attempts start at Backoff and double, up to one minute.
	// Default 3; negative means none.
	Retries int
	// Backoff is the first wait before a retry. Default 1s.
	Backoff time.Duration
	// Now is the clock suppression and incidents read. Default time.Now.
	Now func() time.Time
	// IncidentWindow is how long the failures of one shared cause
	// (Event.Shared) are gathered into one incident; 0 means
	// DefaultIncidentWindow and a negative value sends every failure as it
	// comes (see incidents).
	IncidentWindow time.Duration
}

// withDefaults returns d with every zero field set to its default.
// Retries is special: 0 means the default and a negative value means none,
// since a Delivery literal cannot tell "unset" from 0.
func (d Delivery) withDefaults() Delivery {
	if d.Queue <= 0 {
		d.Queue = 256
	}
	if d.Timeout <= 0 {
		d.Timeout = 10 * time.Second
	}
	switch {
	case d.Retries == 0:
		d.Retries = 3
	case d.Retries < 0:
		d.Retries = 0
	}
	if d.Backoff <= 0 {
		d.Backoff = time.Second
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return d
}

// maxBackoff caps the doubling wait between retries.
const maxBackoff = time.Minute

// permanentError marks a failure that a retry cannot fix (a 4xx answer).
type permanentError struct{ err error }

// Error returns the cause's message unchanged.
func (p permanentError) Error() string { return p.err.Error() }

// Unwrap returns the cause.
func (p permanentError) Unwrap() error { return p.err }

// retryAfter marks a failure whose receiver said when to come back (a 429
// or 503 with Retry-After). The next wait is at least After, up to
// maxRetryAfter, whatever the backoff would have been.
type retryAfter struct {
	err   error
	After time.Duration
}

// Error returns the cause's message unchanged.
func (r retryAfter) Error() string { return r.err.Error() }

// Unwrap returns the cause.
func (r retryAfter) Unwrap() error { return r.err }

// maxRetryAfter bounds how long a Retry-After may hold the queue: a
// receiver asking for an hour is waited on for this long, then tried again.
const maxRetryAfter = 5 * time.Minute

// outbound is the queue, routing, suppression and retry loop every outbound
// notifier shares; the notifier provides send.
type outbound struct {
	name  string
	d     Delivery
	log   *slog.Logger
	send  func(ctx context.Context, e Event) error
	queue chan Event
	stats counters

	mu       sync.Mutex
	sent     map[repeatKey]time.Time
	dropping bool
	// incidents folds failures of a shared cause; nil when off.
	incidents *incidents
}

// repeatKey is what makes two events "the same" for suppression; At and
// Actor are left out, so a retried sync that fails alike is suppressed.
type repeatKey struct {
	application string
	typ         EventType
	revision    string
	message     string
}

// newOutbound returns the delivery loop of notifier name; send makes one
// attempt and returns a permanentError when retrying cannot help.
func newOutbound(name string, d Delivery, logger *slog.Logger, send func(ctx context.Context, e Event) error) *outbound {
	d = d.withDefaults()
	if logger == nil {
		logger = slog.Default()
	}
	return &outbound{
		name:      name,
		d:         d,
		log:       logger.With("notifier", name),
		send:      send,
		queue:     make(chan Event, d.Queue),
		sent:      map[repeatKey]time.Time{},
		incidents: newIncidents(d.IncidentWindow),
	}
}

// Name implements Named.
func (o *outbound) Name() string { return o.name }

// Stats implements Counted.
func (o *outbound) Stats() Stats { return o.stats.snapshot() }

// Notify routes, suppresses and queues e without blocking.
func (o *outbound) Notify(_ context.Context, e Event) {
	matches := o.d.Match.Matches(e)
	if o.incidents != nil && !o.incidents.take(e, matches, o.d.Now()) {
		o.stats.suppressed.Add(1)
		return
	}
	if !matches {
		o.stats.suppressed.Add(1)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.d.Suppress > 0 {
		now := o.d.Now()
		key := repeatKey{e.Application, e.Type, e.Revision, e.Message}
		if last, ok := o.sent[key]; ok && now.Sub(last) < o.d.Suppress {
			o.stats.suppressed.Add(1)
			return
		}
		o.forget(now)
		o.sent[key] = now
	}
	// Only the first of consecutive drops is logged: a dead receiver would
	// otherwise add a log line per event to the trouble it causes.
	select {
	case o.queue <- e:
		o.dropping = false
	default:
		o.stats.dropped.Add(1)
		if !o.dropping {
			o.dropping = true
			o.log.Warn("event dropped", "reason", "queue full", "app", e.Application, "type", string(e.Type))
		}
	}
}

// forget sweeps suppression entries past their window once the table has
// grown, so it stays bounded by the events of one window.
func (o *outbound) forget(now time.Time) {
	if len(o.sent) < 256 {
		return
	}
	for k, at := range o.sent {
		if now.Sub(at) >= o.d.Suppress {
			delete(o.sent, k)
		}
	}
}

// Run sends queued events, and the incidents' events as they come due,
// until ctx is done, then returns nil. Events still queued at shutdown are
// given up: an outbound receiver is not history.
func (o *outbound) Run(ctx context.Context) error {
	var due <-chan time.Time
	if o.incidents != nil {
		tick := time.NewTicker(incidentTick)
		defer tick.Stop()
		due = tick.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-o.queue:
			o.deliver(ctx, e)
		case <-due:
			for _, e := range o.incidents.due(o.d.Now()) {
				o.deliver(ctx, e)
			}
		}
	}
}

// incidentTick is how often a notifier looks for incidents come due.
const incidentTick = time.Second

// deliver sends e, retrying with doubling waits, and counts the outcome.
// Shutdown ends the waits and counts nothing: the event was neither
// delivered nor refused.
func (o *outbound) deliver(ctx context.Context, e Event) {
	wait := o.d.Backoff
	var err error
	attempts := 0
	for attempts <= o.d.Retries {
		if attempts > 0 {
			next := wait
			if ra := (retryAfter{}); errors.As(err, &ra) {
				next = max(next, min(ra.After, maxRetryAfter))
			}
			t := time.NewTimer(next)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			wait = min(wait*2, maxBackoff)
		}
		attempts++
		actx, cancel := context.WithTimeout(ctx, o.d.Timeout)
		err = o.send(actx, e)
		cancel()
		if err == nil {
			o.stats.delivered.Add(1)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if errors.As(err, new(permanentError)) {
			break
		}
	}
	o.stats.failed.Add(1)
	o.log.Warn("notification not delivered", "app", e.Application, "type", string(e.Type), "attempts", attempts, "err", err)
}

package reconcile

import (
	"context"
	"math/rand/v2"
	"time"
)

// Request asks a worker for one reconcile. The zero value is a plain tick:
// compare, and apply only when the application is automated. A dry run is
// not a request: it writes nothing, so it runs beside the worker.
type Request struct {
	// Sync applies even when the application is not automated.
	Sync bool
	// Actor names who asked; empty for the controller's own ticks.
	Actor string
}

// worker runs one application's reconciles, one at a time, on the
// application's interval with jitter, backing off while it fails. Requests
// that arrive while a reconcile runs are coalesced into one.
type worker struct {
	name     string
	requests chan Request // buffered 1: a queued request absorbs later ones
	stop     context.CancelFunc
	done     chan struct{}
}

// backoff returns the delay after failures consecutive failures: 5s
// doubling, capped at limit.
func backoff(failures int, limit time.Duration) time.Duration {
	d := 5 * time.Second
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// jitter spreads d by up to ±10 % so that many applications on one interval
// do not reconcile in lockstep.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	spread := int64(d) / 5
	return d - time.Duration(spread/2) + time.Duration(rand.Int64N(spread+1))
}

// enqueue queues req for the worker, merging it into a queued request when
// one is waiting: a sync wins over a tick, and the first actor is kept.
func (w *worker) enqueue(req Request) {
	for {
		select {
		case w.requests <- req:
			return
		default:
		}
		select {
		case queued := <-w.requests:
			req = merge(queued, req)
		default:
		}
	}
}

func merge(a, b Request) Request {
	out := a
	if b.Sync && !a.Sync {
		out = b
	}
	if out.Actor == "" {
		out.Actor = b.Actor
	}
	return out
}

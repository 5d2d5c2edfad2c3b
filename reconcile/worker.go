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
	// ID numbers a requested sync (see Controller.SyncApp); 0 for ticks.
	ID uint64
	// Revision is a resolved commit to deploy instead of what the
	// application tracks; a sync with one holds the application there.
	Revision string
	// Prune turns pruning on or off for this sync; nil keeps the policy.
	// It is recorded and carried; pruning itself is not implemented yet.
	Prune *bool
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
// one is waiting (see merge). It returns the request that will run, so a
// caller learns the id its sync was merged into and whether it was.
func (w *worker) enqueue(req Request) (queued Request, merged bool) {
	for {
		select {
		case w.requests <- req:
			return req, merged
		default:
		}
		select {
		case waiting := <-w.requests:
			req = merge(waiting, req)
			merged = merged || waiting.Sync
		default:
		}
	}
}

// merge coalesces b into a queued a: a sync wins over a tick; of two syncs
// the queued one keeps its id and actor, and a later one that names a
// revision or a prune setting brings those along with its own actor, since
// the latest explicit intent is what runs.
func merge(a, b Request) Request {
	out := a
	switch {
	case b.Sync && !a.Sync:
		out = b
	case b.Sync && a.Sync && (b.Revision != "" || b.Prune != nil):
		out.Revision, out.Prune, out.Actor = b.Revision, b.Prune, b.Actor
	}
	if out.Actor == "" {
		out.Actor = b.Actor
	}
	return out
}

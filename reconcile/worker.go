package reconcile

import (
	"context"
	"sync"
	"time"

	"github.com/skep-cd/skep/syncpass"
)

// Request asks a worker for one reconcile. The zero value is a plain tick:
// compare, and apply only when the application is automated. A dry run is
// not a request: it writes nothing, so it runs beside the worker.
type Request struct {
	// Sync applies even when the application is not automated.
	Sync bool
	// Actor names who asked; empty for the controller's own ticks.
	Actor string
	// ID numbers a requested sync (see Controller.Sync); 0 for ticks.
	ID uint64
	// Revision is a resolved commit to deploy instead of what the
	// application tracks; a sync with one holds the application there.
	Revision string
	// Prune turns resource pruning on or off for this sync; nil keeps the
	// application's syncPolicy.pruneResources.
	Prune *bool
	// Force re-applies every service even when nothing changed, restarting
	// its tasks. Only a one-shot `skep deploy --force` sets it: the
	// controller's loop and the API never do.
	Force bool

	// release marks the sync of one release of a release file: previews,
	// which belong to a whole application, are left out.
	release bool
	// live marks a wake by a change of the application's own objects on
	// its swarm: git is not asked again, and the commit the last reconcile
	// resolved is what the swarm is compared with (appState.resolved).
	// The interval's tick, which asks git, is never put off by one.
	live bool
	// webhook marks a wake by a forge's push webhook (RefreshRepository),
	// so that a sync it leads to names it as its trigger.
	webhook bool
	// rollback marks the sync of one release of a release file whose
	// application goes back to a named revision (Revision names the
	// release file's commit either way).
	rollback bool
}

// worker runs one application's reconciles, one at a time, on the
// application's interval at a phase of its own, backing off while it
// fails. Requests that arrive while a reconcile runs are coalesced into
// one. A waiting worker has no goroutine: its next tick is a timer, and a
// tick or a request runs on a goroutine of its own (see Controller.serve),
// so that a tick wakes one goroutine, not a worker and a runner, and a
// thousand waiting applications hold no stacks.
type worker struct {
	name   string
	ctx    context.Context
	cancel context.CancelFunc
	// start begins serving the worker on a new goroutine; nil for a
	// worker that only queues (tests). Called with mu held. tick is its
	// timer's func.
	start func()
	tick  func()

	mu      sync.Mutex
	queued  *Request    // what the next run serves; nil when nothing waits
	running bool        // a goroutine serves the worker
	stopped bool        // no run starts any more
	timer   *time.Timer // the next tick; nil until the first run ends
	due     time.Time   // when timer fires
	// newer is closed, and set to nil, when a request other than a wake
	// by the swarm is queued: a failing rollout's wait gives way to it
	// (syncpass.Fleet.Newer). nil until a wait asks.
	newer chan struct{}
	// st is the application's state between reconciles: only the
	// goroutine serving the worker touches it.
	st workerState
}

// workerState is what one worker remembers between reconciles: its
// schedule, and what the passes of its release (or of each release of a
// release file) left.
type workerState struct {
	memo       syncpass.Memo
	pending    *Request // a requested sync that must wait for a rollout
	holdLoaded bool     // the recorded hold was read from the swarm
	failures   int
	// phase is where in each interval the application's ticks fall, in
	// [0, 1) (see phased); drawn as its worker starts.
	phase float64
	// sub holds the memo of each release of a release file, by release.
	sub map[string]*syncpass.Memo
}

// ask is what req asks of a sync pass.
func (req Request) ask() syncpass.Ask {
	return syncpass.Ask{Sync: req.Sync, Actor: req.Actor, Revision: req.Revision, Prune: req.Prune, Force: req.Force,
		Release: req.release, Live: req.live, Webhook: req.webhook, Rollback: req.rollback || req.Revision != "" && !req.release}
}

// enqueue queues req for the worker, merging it into a queued request when
// one is waiting (see merge), and starts a run when none serves the
// worker. It returns the request that will run, so a caller learns the id
// its sync was merged into and whether it was.
func (w *worker) enqueue(req Request) (queued Request, merged bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queued != nil {
		merged = w.queued.Sync
		req = merge(*w.queued, req)
	}
	w.queued = &req
	if w.newer != nil && !req.live {
		close(w.newer)
		w.newer = nil
	}
	if !w.running && !w.stopped && w.start != nil {
		w.running = true
		w.start()
	}
	return req, merged
}

// newerRequest returns a channel closed once a request that may bring a
// newer commit (anything but a wake by the swarm) is queued; closed
// already when one is.
func (w *worker) newerRequest() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queued != nil && !w.queued.live {
		done := make(chan struct{})
		close(done)
		return done
	}
	if w.newer == nil {
		w.newer = make(chan struct{})
	}
	return w.newer
}

// stop ends the worker: no run starts after it, and the one running, if
// any, is cancelled.
func (w *worker) stop() {
	w.mu.Lock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
	w.cancel()
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
	out.live = a.live && b.live // anything else asks git
	out.webhook = a.webhook || b.webhook
	return out
}

// next takes the request w's run serves next: the queued one (merged into
// a requested sync that waits for a rollout), or, for a run its timer
// started, the tick (or that waiting sync). With neither, the run ends.
func (w *worker) next(ticked bool) (Request, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := &w.st
	var req Request
	switch {
	case w.queued != nil:
		req, w.queued = *w.queued, nil
		if st.pending != nil {
			req = merge(*st.pending, req)
		}
		st.pending = nil
	case ticked:
		if st.pending != nil {
			req, st.pending = *st.pending, nil
		}
	default:
		w.running = false
		return Request{}, false
	}
	return req, true
}

// schedule sets w's timer, which calls w.tick, for the tick next after now,
// once req was served; it reports whether a request queued meanwhile
// keeps the run going.
func (w *worker) schedule(req Request, next time.Duration, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		w.running = false
		return false
	}
	due := now.Add(onGrid(now, next))
	if req.live && !w.due.IsZero() && w.due.Before(due) {
		// A wake asked git nothing: the tick that does keeps its time,
		// and one that came while the wake ran (and found the worker
		// busy) runs now.
		due = now
		if w.due.After(now) {
			due = w.due
		}
	}
	w.due = due
	if w.timer == nil {
		w.timer = time.AfterFunc(due.Sub(now), w.tick)
	} else {
		w.timer.Reset(due.Sub(now))
	}
	if w.queued == nil {
		w.running = false
		return false
	}
	return true
}

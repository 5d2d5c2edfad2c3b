package reconcile

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/syncpass"
	"github.com/skep-cd/skep/tickgrid"
	"github.com/skep-cd/skep/window"
)

// backoff returns the delay after failures consecutive failures: 5s
// doubling, capped at limit.
func backoff(failures int, limit time.Duration) time.Duration {
	d := 5 * time.Second
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// phased is how long from now until the next tick of an application
// whose ticks fall at phase (in [0, 1)) of each interval, on
// tickgrid's grid moved by that share of the interval in whole grid
// steps: a tick that ran on time is followed by the next exactly one
// interval later, and the applications of one interval take turns
// instead of ticking in lockstep. Each worker draws its phase once.
func phased(now time.Time, interval time.Duration, phase float64) time.Duration {
	offset := time.Duration(phase * float64(interval)).Truncate(tickGrid)
	return tickgrid.NextAt(now, interval, offset).Sub(now)
}

// tickGrid is what the ticks of all applications are aligned to: the
// ticks due within one grid step run together after one wake-up of the
// scheduler, and share one ls-remote per repository, instead of a wake-up
// each (at 500 applications, most of what a controller at rest spent).
const tickGrid = time.Second

// onGrid returns d moved, by half a grid step at most, so that it ends on
// an instant of tickGrid's grid (package tickgrid), which the controller's
// other periodic work of whole seconds is on too; delays shorter than ten
// steps (retries, a window about to open) are kept as they are.
func onGrid(now time.Time, d time.Duration) time.Duration {
	if d < 10*tickGrid {
		return d
	}
	return tickgrid.Round(now.Add(d), tickGrid).Sub(now)
}

// SyncNow asks the application's worker for a sync by actor ("" = the
// controller). It returns at once; a sync already queued absorbs it.
func (c *Controller) SyncNow(name, actor string) error {
	_, _, err := c.enqueue(name, Request{Sync: true, Actor: actor})
	return err
}

// enqueue hands req to name's worker, numbering it first when it is a
// sync, and returns the request that will run and whether req was merged
// into a sync already queued.
func (c *Controller) enqueue(name string, req Request) (Request, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.workers[name]
	if !ok {
		return Request{}, false, fmt.Errorf("%w: %s", ErrUnknownApplication, name)
	}
	if req.Sync {
		req.ID = c.syncs.Add(1)
	}
	queued, merged := w.enqueue(req)
	if queued.Sync {
		c.status.Update(name, func(s *AppStatus) {
			// The worker may have finished it already: never mark a done
			// sync pending again.
			if s.LastRequestedSync.ID < queued.ID {
				s.PendingSync = queued.ID
			}
		})
	}
	return queued, merged, nil
}

// ReconcileOnce runs one reconcile of app in the caller's goroutine,
// outside any worker: `skep deploy` uses it. req.Sync forces an apply.
func (c *Controller) ReconcileOnce(ctx context.Context, name string, req Request) (Result, error) {
	app, _, ok := c.appAt(name)
	if !ok {
		return Result{}, fmt.Errorf("%w: %s", ErrUnknownApplication, name)
	}
	if multiRelease(app) {
		return c.reconcileReleases(ctx, app, req, &workerState{})
	}
	return c.reconcile(ctx, app, req, &syncpass.Memo{}, 0)
}

// startWorker starts the worker of name under ctx, with a tick at once.
// c.mu is held.
func (c *Controller) startWorker(ctx context.Context, name string) {
	ctx, cancel := context.WithCancel(ctx)
	w := &worker{name: name, ctx: ctx, cancel: cancel, st: workerState{phase: rand.Float64()}}
	w.start = func() {
		c.wg.Add(1)
		go c.serve(w, false)
	}
	w.tick = func() { c.tick(w) }
	c.workers[name] = w
	w.enqueue(Request{})
}

// tick is a worker's timer: it serves the worker's tick on the timer's
// own goroutine, unless a run serves the worker already (which sets the
// timer again as it ends).
func (c *Controller) tick(w *worker) {
	w.mu.Lock()
	if w.stopped || w.running {
		w.mu.Unlock()
		return
	}
	w.running = true
	c.wg.Add(1)
	w.mu.Unlock()
	c.serve(w, true)
}

// serve runs w's queued requests (a tick first when ticked) until none is
// left, then sets the timer for its next tick, or until ctx ends or the
// application leaves the app set. The class of each reconcile's error
// decides when the next tick runs.
func (c *Controller) serve(w *worker, ticked bool) {
	defer c.wg.Done()
	growStack(0)
	for {
		req, ok := w.next(ticked)
		if !ok {
			return
		}
		ticked = false
		app, gen, ok := c.appAt(w.name)
		if !ok {
			c.ended(w)
			return
		}
		err := c.runRequest(w.ctx, app, gen, req, &w.st)
		if w.ctx.Err() != nil {
			// Stopping, not failing: whatever the reconcile was doing was cut
			// short on purpose (see syncpass's syncFailed).
			if err != nil {
				c.log.Info("reconcile abandoned", "app", app.Name, "why", context.Cause(w.ctx), "err", err)
			}
			c.ended(w)
			return
		}
		if !w.schedule(req, c.nextTick(app, req, err, &w.st), c.wall()) {
			return
		}
	}
}

// nextTick is how long after a reconcile of app that ended with err the
// next tick runs.
func (c *Controller) nextTick(app appset.Application, req Request, err error, st *workerState) time.Duration {
	// Each application at its own phase of the interval, not all on the
	// interval's grid: a thousand applications ticking at one instant held
	// a third more memory at rest (docs/performance.md, "Ticks together").
	// A fixed phase rather than a random spread of each delay: the time
	// from a push to the tick that sees it then depends on the push alone.
	next := phased(c.wall(), app.SyncPolicy.Interval, st.phase)
	switch outcome.Of(err) {
	case outcome.OK:
		st.failures = 0
		c.wake(c.dest(app.Destination.Swarm), app.Name)
	case outcome.Stalled:
		st.failures = 0
		c.log.Warn("reconcile stalled", "app", app.Name, "err", err)
	case outcome.Waiting:
		if retry := outcome.RetryAfter(err); retry > 0 {
			next = retry
		}
		if req.Sync || req.Canary != "" {
			st.pending = &req // a request waits its turn, it does not fail
		}
	case outcome.Transient:
		st.failures++
		next = backoff(st.failures, app.SyncPolicy.Interval)
		c.log.Error("reconcile failed", "app", app.Name, "err", err, "retry", next)
	}
	// A canary's next step or measurement comes sooner than the interval.
	if st.requeue > 0 && outcome.Of(err) != outcome.Transient {
		next = min(next, st.requeue)
	}
	// A window holding the application is looked at again as it
	// closes, not up to an interval later.
	now := c.now()
	if v := window.Evaluate(app.SyncWindows, app.Name, now); v.Held && !v.Until.IsZero() {
		next = min(next, max(v.Until.Sub(now), 0)+time.Second)
	}
	return next
}

// ended marks w as served no more, as its application left the set or
// the controller stops. A reconcile cut short as its application left the
// set recorded its end after the status was removed; the status goes
// again.
func (c *Controller) ended(w *worker) {
	w.stop() // no run starts after it: running no longer matters
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.apps[w.name]; !ok {
		c.status.Remove(w.name)
	}
}

// stopAll stops every worker and waits until each has returned.
func (c *Controller) stopAll() {
	c.mu.Lock()
	for name, w := range c.workers {
		w.stop()
		delete(c.workers, name)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

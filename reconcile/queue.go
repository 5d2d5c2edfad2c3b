package reconcile

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/tickgrid"
	"github.com/skep-cd/skep/window"
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
	// worker that only queues (tests). Called with mu held.
	start func()

	mu      sync.Mutex
	queued  *Request    // what the next run serves; nil when nothing waits
	running bool        // a goroutine serves the worker
	stopped bool        // no run starts any more
	timer   *time.Timer // the next tick; nil until the first run ends
	due     time.Time   // when timer fires
	// st is the application's state between reconciles: only the
	// goroutine serving the worker touches it.
	st appState
}

// appState is what one worker remembers between reconciles.
type appState struct {
	stalled      string // what a stalled failure was reported for (see stalledKey): reported once
	driftCommit  string // the commit a drift-detected event was raised for
	liveDrift    string // the live drift findings last reported, as one line
	rolledBack   string // the commit and versions whose rollout Swarm rolled back, reported once
	artifactWait string // the artifacts last reported waiting for their image, as one line
	windowCommit string // the commit and versions a sync window was reported holding
	warned       string // the commit, versions and warnings last logged (see warn)
	// foreign is the last apply refused because someone else's objects
	// hold the release: not tried again, nor reported again, until git
	// (the key) or the release's namespace on the swarm changes.
	foreign *foreignRefusal
	// hookFailed is the last sync a pre-sync hook stopped: not tried
	// again, nor reported again, until git (the key) changes or a sync is
	// asked for.
	hookFailed *hookFailure
	pending    *Request // a requested sync that must wait for a rollout
	holdLoaded bool     // the recorded hold was read from the swarm
	failures   int
	// quiet is the last tick that found nothing to do, for the next one.
	quiet quietTick
	// templateFailed is the last tick whose chart templates failed: a tick
	// with the same quiet key fails the same way without rendering.
	templateFailed templateFailure
	// resolved is the commit the last reconcile that asked git found, for
	// the wakes that do not ask (Request.live).
	resolved resolvedCommit
	// quietInputs keeps parts of the quiet key from one tick to the next.
	quietInputs quietInputs
	// phase is where in each interval the application's ticks fall, in
	// [0, 1) (see phased); drawn as its worker starts.
	phase float64
	// sub holds the state of each release of a release file, by release.
	sub map[string]*appState
}

// resolvedCommit is the commit that revision of repo named when git was
// last asked.
type resolvedCommit struct{ repo, revision, commit string }

// known returns the commit a reconcile of app for req may take without
// asking git: one resolved before for the same source, when req is a wake
// by the swarm; "" otherwise.
func (st *appState) known(app appset.Application, req Request) string {
	r := st.resolved
	if !req.live || req.Revision != "" || r.repo != app.Source.Repo || r.revision != app.Source.Revision {
		return ""
	}
	return r.commit
}

// foreignRefusal remembers one refused apply.
type foreignRefusal struct {
	key string
	// namespace is namespaceState as first seen after the refusal;
	// observed says it was.
	namespace string
	observed  bool
	err       error
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
	if !w.running && !w.stopped && w.start != nil {
		w.running = true
		w.start()
	}
	return req, merged
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
	app, ok := c.app(name)
	if !ok {
		return Result{}, fmt.Errorf("%w: %s", ErrUnknownApplication, name)
	}
	if multiRelease(app) {
		return c.reconcileReleases(ctx, app, req, &appState{})
	}
	return c.reconcile(ctx, app, req, &appState{})
}

// startWorker starts the worker of name under ctx, with a tick at once.
// c.mu is held.
func (c *Controller) startWorker(ctx context.Context, name string) {
	ctx, cancel := context.WithCancel(ctx)
	w := &worker{name: name, ctx: ctx, cancel: cancel, st: appState{phase: rand.Float64()}}
	w.start = func() {
		c.wg.Add(1)
		go c.serve(w, false)
	}
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
	st := &w.st
	for {
		w.mu.Lock()
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
			w.mu.Unlock()
			return
		}
		ticked = false
		w.mu.Unlock()
		app, gen, ok := c.appAt(w.name)
		if !ok {
			c.ended(w)
			return
		}
		if st.quietInputs.gen != gen {
			st.quietInputs = quietInputs{gen: gen}
		}
		err := c.runRequest(w.ctx, app, req, st)
		if w.ctx.Err() != nil {
			// Stopping, not failing: whatever the reconcile was doing was cut
			// short on purpose (see syncFailed).
			if err != nil {
				c.log.Info("reconcile abandoned", "app", app.Name, "why", context.Cause(w.ctx), "err", err)
			}
			c.ended(w)
			return
		}
		next := c.nextTick(app, req, err, st)
		w.mu.Lock()
		if w.stopped {
			w.running = false
			w.mu.Unlock()
			return
		}
		now := time.Now()
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
			w.timer = time.AfterFunc(due.Sub(now), func() { c.tick(w) })
		} else {
			w.timer.Reset(due.Sub(now))
		}
		if w.queued == nil {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
	}
}

// nextTick is how long after a reconcile of app that ended with err the
// next tick runs.
func (c *Controller) nextTick(app appset.Application, req Request, err error, st *appState) time.Duration {
	// Each application at its own phase of the interval, not all on the
	// interval's grid: a thousand applications ticking at one instant held
	// a third more memory at rest (docs/performance.md, "Ticks together").
	// A fixed phase rather than a random spread of each delay: the time
	// from a push to the tick that sees it then depends on the push alone.
	next := phased(time.Now(), app.SyncPolicy.Interval, st.phase)
	switch outcome.Of(err) {
	case outcome.OK:
		st.failures = 0
		c.wakeIfMoved(app)
	case outcome.Stalled:
		st.failures = 0
		c.log.Warn("reconcile stalled", "app", app.Name, "err", err)
	case outcome.Waiting:
		if retry := outcome.RetryAfter(err); retry > 0 {
			next = retry
		}
		if req.Sync {
			st.pending = &req // a requested sync waits its turn, it does not fail
		}
	case outcome.Transient:
		st.failures++
		next = backoff(st.failures, app.SyncPolicy.Interval)
		c.log.Error("reconcile failed", "app", app.Name, "err", err, "retry", next)
	}
	// A window holding the application is looked at again as it
	// closes, not up to an interval later.
	if v := window.Evaluate(app.SyncWindows, app.Name, c.now()); v.Held && !v.Until.IsZero() {
		next = min(next, max(v.Until.Sub(c.now()), 0)+time.Second)
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

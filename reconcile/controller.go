package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// ErrUnknownApplication is returned for a name the running app set lacks.
var ErrUnknownApplication = errors.New("unknown application")

// DefaultAppSetInterval is how often the app-set source is re-read.
const DefaultAppSetInterval = 30 * time.Second

// Options wire a Controller. Git, Engine and AppSet are required; the zero
// value of every other field means its default.
type Options struct {
	// ControllerID is stamped in ownership labels; "" means "default".
	ControllerID string
	AppSet       appset.Source
	// AppSetName describes the source in the status, e.g. "file apps.yaml".
	AppSetName string
	// AppSetInterval is how often AppSet is re-read.
	AppSetInterval time.Duration
	Git            *gitsource.Cache
	Engine         apply.Engine
	// Notifier receives every event; nil means none.
	Notifier *notify.Registry
	Logger   *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Observer is told what each reconcile took (metrics); nil means none.
	Observer Observer
	// Live is the swarm's live snapshot, kept fresh by the events stream;
	// Run runs it. Without it there is no health, live drift, write gate or
	// prune (tests of the pure loop and `skep deploy` run without).
	Live *swarm.Watcher
	// PruneApplications removes the releases of applications that left the
	// app set (controller flag --prune).
	PruneApplications bool
	// OwnStack is the stack the controller itself runs in; nothing in it is
	// ever pruned.
	OwnStack string
}

// Observer is told about each reconcile when it ends. It must return
// quickly and be safe for concurrent use; api.Metrics implements it.
type Observer interface {
	ObserveReconcile(api.Observation)
}

// Controller keeps every application of an app set at what git declares.
// Its methods are safe for concurrent use.
type Controller struct {
	id        string
	git       *gitsource.Cache
	engine    apply.Engine
	notifier  *notify.Registry
	log       *slog.Logger
	now       func() time.Time
	watcher   *appset.Watcher
	interval  time.Duration
	source    string
	status    *Statuses
	observer  Observer
	appSet    appset.Source
	syncs     atomic.Uint64 // last sync id handed out
	live      *swarm.Watcher
	pruneApps bool
	ownStack  string
	rendered  map[string]stack.Release // by application: the last render, for health
	wrote     map[string]time.Time     // by application: its last write to the swarm

	appSetMu sync.Mutex // serialises onAppSet between Run and RefreshRepository
	mu       sync.Mutex
	apps     map[string]appset.Application
	workers  map[string]*worker
	wg       sync.WaitGroup
	runCtx   context.Context // set by Run for workers started later; never a request's
}

// New validates opts and returns a Controller that does nothing until Run.
func New(opts Options) (*Controller, error) {
	switch {
	case opts.AppSet == nil:
		return nil, errors.New("controller: no app-set source")
	case opts.Git == nil:
		return nil, errors.New("controller: no git cache")
	case opts.Engine == nil:
		return nil, errors.New("controller: no docker engine")
	}
	c := &Controller{
		id:        opts.ControllerID,
		git:       opts.Git,
		engine:    opts.Engine,
		notifier:  opts.Notifier,
		log:       opts.Logger,
		now:       opts.Now,
		watcher:   appset.NewWatcher(opts.AppSet),
		interval:  opts.AppSetInterval,
		source:    opts.AppSetName,
		status:    NewStatuses(),
		observer:  opts.Observer,
		appSet:    opts.AppSet,
		apps:      map[string]appset.Application{},
		workers:   map[string]*worker{},
		rendered:  map[string]stack.Release{},
		wrote:     map[string]time.Time{},
		live:      opts.Live,
		pruneApps: opts.PruneApplications,
		ownStack:  opts.OwnStack,
	}
	if c.id == "" {
		c.id = "default"
	}
	if c.notifier == nil {
		c.notifier = &notify.Registry{}
	}
	if c.log == nil {
		c.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.interval <= 0 {
		c.interval = DefaultAppSetInterval
	}
	return c, nil
}

// ID returns the controller id stamped in ownership labels.
func (c *Controller) ID() string { return c.id }

// Statuses returns the status table the controller writes.
func (c *Controller) Statuses() *Statuses { return c.status }

// Run loads the app set, starts one worker per application, and follows the
// app set until ctx ends. It then stops every worker and waits for them. An
// app set that cannot be loaded at start is not fatal: Run keeps trying,
// and the status says why nothing runs.
func (c *Controller) Run(ctx context.Context) error {
	c.mu.Lock()
	c.runCtx = ctx
	c.mu.Unlock()
	var side sync.WaitGroup
	if c.live != nil {
		side.Add(2)
		go func() {
			defer side.Done()
			if err := c.live.Run(ctx); err != nil {
				c.log.Error("live snapshot stopped", "err", err)
			}
		}()
		go func() {
			defer side.Done()
			c.followSwarm(ctx)
		}()
	}
	c.watcher.Run(ctx, c.interval, c.onAppSet)
	side.Wait()
	c.stopAll()
	return nil
}

// followSwarm reacts to the live snapshot: it refreshes health, wakes the
// applications that watch for live drift, and looks for releases to prune
// on every app-set interval.
func (c *Controller) followSwarm(ctx context.Context) {
	changes := c.live.Subscribe(ctx)
	tick := time.NewTicker(c.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-changes:
			if !ok {
				return
			}
			c.refreshHealth()
			c.wakeLiveDrift()
		case <-tick.C:
			if c.Loaded() {
				c.pruneReleases(ctx)
				c.status.SetPruneChecked(c.now())
			}
		}
	}
}

// remember keeps app's last render for health between reconciles.
func (c *Controller) remember(app string, rel stack.Release) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rendered[app] = rel
}

// refreshHealth recomputes every application's health from the snapshot.
func (c *Controller) refreshHealth() {
	snap := c.live.Current()
	c.mu.Lock()
	rendered := maps.Clone(c.rendered)
	c.mu.Unlock()
	for app, rel := range rendered {
		h := releaseHealth(rel, snap)
		c.status.Update(app, func(s *AppStatus) {
			s.Health, s.HealthMessage, s.Running, s.Desired = h.State, h.Message, h.Running, h.Desired
		})
	}
}

// wakeLiveDrift queues a tick for every healthy-looking application with
// live drift detection, so an out-of-band change is seen in seconds. A
// failing application keeps its backoff.
func (c *Controller) wakeLiveDrift() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, w := range c.workers {
		app := c.apps[name]
		if st, _ := c.status.Get(name); app.DriftDetection == appset.DriftLive && st.LastErrorClass == "" && st.Phase != api.PhaseApplying {
			w.enqueue(Request{})
		}
	}
}

// LoadAppSet loads the app set once and applies it to the workers' view
// without starting workers; `skep deploy` uses it.
func (c *Controller) LoadAppSet(ctx context.Context) (appset.Snapshot, error) {
	_, err := c.watcher.Reload(ctx)
	snap := c.watcher.Current()
	c.setApps(snap)
	return snap, err
}

// Loaded reports whether a valid app set has been loaded.
func (c *Controller) Loaded() bool { return c.watcher.Current().Set != nil }

func (c *Controller) onAppSet(snap appset.Snapshot) {
	c.appSetMu.Lock()
	defer c.appSetMu.Unlock()
	c.setApps(snap)
	if snap.Err != nil {
		c.log.Error("app set not loaded", "revision", snap.ErrRevision, "stale", snap.Stale, "err", snap.Err)
	} else {
		c.log.Info("app set loaded", "revision", snap.Revision, "applications", snap.Set.Len())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runCtx == nil || snap.Set == nil {
		return
	}
	for name, w := range c.workers {
		if _, ok := c.apps[name]; !ok {
			c.log.Info("application left the app set", "app", name)
			w.stop()
			delete(c.workers, name)
			c.status.Remove(name)
		}
	}
	for name := range c.apps {
		if w, ok := c.workers[name]; ok {
			w.enqueue(Request{}) // the definition may have changed: look now
			continue
		}
		c.startWorker(name)
	}
}

func (c *Controller) setApps(snap appset.Snapshot) {
	st := AppSetStatus{Source: c.source, Revision: snap.Revision,
		Loaded: snap.Set != nil, Stale: snap.Stale}
	if snap.Err != nil {
		st.Error = snap.Err.Error()
	}
	if snap.Set != nil {
		st.LoadedAt = c.now()
	}
	c.status.SetAppSet(st)
	if snap.Set == nil {
		return
	}
	apps := map[string]appset.Application{}
	for _, a := range snap.Set.Applications() {
		apps[a.Name] = a
		c.status.Update(a.Name, func(s *AppStatus) { s.Automated = a.SyncPolicy.Automated })
	}
	c.mu.Lock()
	c.apps = apps
	c.mu.Unlock()
}

func (c *Controller) app(name string) (appset.Application, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[name]
	return a, ok
}

// Applications returns the names of the running app set's applications.
func (c *Controller) Applications() []appset.Application {
	snap := c.watcher.Current()
	return snap.Set.Applications()
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
func (c *Controller) ReconcileOnce(ctx context.Context, name string, req Request) (Outcome, error) {
	app, ok := c.app(name)
	if !ok {
		return Outcome{}, fmt.Errorf("%w: %s", ErrUnknownApplication, name)
	}
	return c.reconcile(ctx, app, req, &appState{})
}

// appState is what one worker remembers between reconciles.
type appState struct {
	stalledCommit string   // a commit that failed to render: not retried until git moves
	driftCommit   string   // the commit a drift-detected event was raised for
	liveDrift     string   // the live drift findings last reported, as one line
	rolledBack    string   // the commit whose rollout Swarm rolled back, reported once
	pending       *Request // a requested sync that must wait for a rollout
	holdLoaded    bool     // the recorded hold was read from the swarm
	failures      int
}

// startWorker starts the worker of name under Run's context. c.mu is held.
func (c *Controller) startWorker(name string) {
	ctx, cancel := context.WithCancel(c.runCtx)
	w := &worker{name: name, requests: make(chan Request, 1), stop: cancel, done: make(chan struct{})}
	c.workers[name] = w
	w.enqueue(Request{})
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(w.done)
		c.runWorker(ctx, w)
	}()
}

func (c *Controller) runWorker(ctx context.Context, w *worker) {
	st := &appState{}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		var req Request
		select {
		case <-ctx.Done():
			return
		case req = <-w.requests:
			if st.pending != nil {
				req = merge(*st.pending, req)
			}
			st.pending = nil
		case <-timer.C:
			if st.pending != nil {
				req, st.pending = *st.pending, nil
			}
		}
		app, ok := c.app(w.name)
		if !ok {
			return
		}
		err := c.runRequest(ctx, app, req, st)
		next := jitter(app.SyncPolicy.Interval)
		switch Class(err) {
		case "":
			st.failures = 0
		case "stalled":
			st.failures = 0
			c.log.Warn("reconcile stalled", "app", app.Name, "err", err)
		case "waiting":
			var waiting *WaitingError
			if errors.As(err, &waiting) && waiting.Retry > 0 {
				next = waiting.Retry
			}
			if req.Sync {
				st.pending = &req // a requested sync waits its turn, it does not fail
			}
		default:
			st.failures++
			next = backoff(st.failures, app.SyncPolicy.Interval)
			c.log.Error("reconcile failed", "app", app.Name, "err", err, "retry", next)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

func (c *Controller) stopAll() {
	c.mu.Lock()
	for name, w := range c.workers {
		w.stop()
		delete(c.workers, name)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

func stackTrace() string { return string(debug.Stack()) }

package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/sops"
	"github.com/skep-cd/skep/swarm"
	"github.com/skep-cd/skep/syncpass"
	"github.com/skep-cd/skep/tickgrid"
)

// DefaultAppSetInterval is how often the app-set source is re-read.
const DefaultAppSetInterval = 30 * time.Second

// Engine is everything the controller asks of a swarm manager: what a
// sync pass writes and reads with (syncpass.Engine), the ping the
// readiness check makes, and who the manager is. *swarm.Client implements
// it; a client lacking a capability does not compile, so no step is ever
// skipped at run time for want of one.
type Engine interface {
	syncpass.Engine
	Ping(ctx context.Context) (types.Ping, error)
	Identity() swarm.Identity
}

// Options wire a Controller. Git, AppSet and the local swarm (Destinations
// "") are required; the zero value of every other field means its default.
type Options struct {
	// ControllerID is stamped in ownership labels; "" means "default".
	ControllerID string
	AppSet       appset.Source
	// AppSetName describes the source in the status, e.g. "file apps.yaml".
	AppSetName string
	// AppSetInterval is how often AppSet is re-read.
	AppSetInterval time.Duration
	Git            *gitsource.Cache
	// Destinations are the swarms the controller deploys to, by the name
	// applications give in destination.swarm: "" is the swarm it runs in.
	Destinations map[string]Remote
	// ParallelWrites bounds the writes in flight on each swarm; zero
	// means DefaultParallelWrites.
	ParallelWrites int
	// Notifier receives every event; nil means none.
	Notifier *notify.Registry
	Logger   *slog.Logger
	// Now is the calendar clock (windows, TTLs, event and status times);
	// nil means time.Now.
	Now func() time.Time
	// Observer is told what each reconcile took (metrics); nil means none.
	Observer Observer
	// PruneApplications removes the releases of applications that left the
	// app set (controller flag --prune).
	PruneApplications bool
	// OwnStack is the stack the controller itself runs in; nothing in it is
	// ever pruned.
	OwnStack string
	// Self is the swarm service this controller runs as (swarm.FindSelf);
	// the zero value when it runs as none. The app set's self application
	// deploys it, and it is never pruned.
	Self swarm.Self
	// Images is the registry gate of release artifacts; nil means a
	// registry with Docker's credentials (artifact.NewRegistry).
	Images artifact.Images
	// Charts fetches charts from chart repositories; nil means an
	// application naming one stalls with a clear error.
	Charts ChartSource
	// Keys decrypt the SOPS-encrypted files of compose releases (secrets,
	// env files); nil means a release using one stalls with an error
	// naming the file.
	Keys *sops.Keys
	// Rebalance rolls, once a drained or lost node is back, the services
	// whose tasks sit unevenly on the nodes, for every application that
	// does not say otherwise (its rebalance key); controller flag
	// --rebalance.
	Rebalance bool
	// CheckAddress judges each host a rendered release would make the
	// Engine connect to (a log driver's address, a network volume's
	// server), as the egress policy judges the hosts git names; a refusal
	// stalls the commit. Nil checks none.
	CheckAddress func(ctx context.Context, host string) error
	// Fence is asked before every write to every swarm, and before each
	// step of a write plan: an error refuses the write (it fails with
	// syncpass.ErrFenced, a transient outcome). A
	// replica of a replicated controller checks its leader lease with it
	// (lease.Elector.Fence); nil writes always.
	Fence func() error
	// Term is the leader term this controller runs in, stamped on the
	// revisions it records; 0 without leader election.
	Term int64
	// Analysis is the HTTP client canaries' analyses measure with
	// (Prometheus and web metrics), under the egress policy; nil means
	// http.DefaultClient.
	Analysis *http.Client
}

// ChartSource fetches charts from chart repositories; *chartrepo.Repos
// implements it.
type ChartSource = syncpass.ChartSource

// Controller keeps every application of an app set at what git declares.
// Its methods are safe for concurrent use.
//
// Locks, always taken in this order: appSetMu (one app-set intake at a
// time) → mu (the running set and the workers) → any of worker.mu,
// liveIndex.mu, previewIndex.mu, Statuses.mu, destination.mu. No lock is
// held while a pass runs or an Engine or git call is made.
type Controller struct {
	id       string
	git      *gitsource.Cache
	dests    map[string]*destination // by name; "" is the local swarm. Fixed at New.
	notifier *notify.Registry
	log      *slog.Logger
	// now is the calendar clock; wall the clock of durations and of the
	// instants compared with a snapshot's TakenAt (time.Now).
	now      func() time.Time
	wall     func() time.Time
	watcher  *appset.Watcher
	interval time.Duration
	source   string
	status   *Statuses
	observer Observer
	appSet   appset.Source
	syncs    atomic.Uint64 // last sync id handed out
	// loaded is set once a valid app set has been taken in: its
	// applications have their workers (see Loaded).
	loaded atomic.Bool
	// running is set as Run starts the live snapshots: a pass may then
	// wait for its swarm's first list (see input).
	running   atomic.Bool
	pruneApps bool
	ownStack  string
	declared  declaredReleases // what release files declared, by application
	previews  previewIndex     // the previews deployed, by application and commit, for notifiers
	live      liveIndex        // renders, writes and wakes, for health and the live-drift wakes

	appSetMu sync.Mutex // serialises onAppSet
	mu       sync.Mutex
	apps     map[string]appset.Application
	appsGen  uint64 // moves each time apps is replaced; 0 before the first set
	workers  map[string]*worker
	// goneGenerated names, with their generator, the generated
	// applications with syncPolicy.prune that left the set since this
	// controller started.
	goneGenerated map[string]string
	wg            sync.WaitGroup
}

// New validates opts and returns a Controller that does nothing until Run.
func New(opts Options) (*Controller, error) {
	switch {
	case opts.AppSet == nil:
		return nil, errors.New("controller: no app-set source")
	case opts.Git == nil:
		return nil, errors.New("controller: no git cache")
	case opts.Destinations[swarm.Local].Engine == nil:
		return nil, errors.New("controller: no docker engine for the local swarm")
	}
	c := &Controller{
		id: cmp.Or(opts.ControllerID, "default"), git: opts.Git, notifier: opts.Notifier, log: opts.Logger,
		now: opts.Now, wall: time.Now, interval: opts.AppSetInterval, source: opts.AppSetName, status: NewStatuses(),
		observer: opts.Observer, appSet: opts.AppSet, pruneApps: opts.PruneApplications, ownStack: opts.OwnStack,
		apps: map[string]appset.Application{}, workers: map[string]*worker{}, goneGenerated: map[string]string{},
	}
	// '@' separates a named destination in the controller label (ownerID).
	if strings.Contains(c.id, "@") {
		return nil, fmt.Errorf("controller id %q: '@' is not allowed", c.id)
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
	if opts.Images == nil {
		opts.Images = artifact.NewRegistry(artifact.RegistryOptions{})
	}
	c.dests = map[string]*destination{}
	for name, r := range opts.Destinations {
		if r.Engine == nil {
			return nil, fmt.Errorf("controller: destination %q has no engine", name)
		}
		c.dests[name] = c.newDestination(name, r, opts)
	}
	c.watcher = appset.NewCheckedWatcher(generated{inner: opts.AppSet, git: opts.Git}, c.checkSwarms)
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
	var side sync.WaitGroup
	c.running.Store(true)
	for _, d := range c.dests {
		if d.live == nil {
			continue
		}
		side.Add(2)
		go func() {
			defer side.Done()
			if err := d.live.Run(ctx); err != nil {
				c.log.Error("live snapshot stopped", "swarm", d.name, "err", err)
			}
		}()
		go func() {
			defer side.Done()
			c.followSwarm(ctx, d)
		}()
	}
	c.watcher.Run(ctx, c.interval, func(snap appset.Snapshot) { c.onAppSet(ctx, snap) })
	side.Wait()
	c.stopAll()
	return nil
}

// followSwarm reacts to one destination's live snapshot: it follows the
// swarm's reachability, refreshes health, wakes the applications there
// that watch for live drift, and looks for releases to prune there on
// every app-set interval.
func (c *Controller) followSwarm(ctx context.Context, d *destination) {
	changes := d.live.Subscribe(ctx)
	observe := func() {
		c.observeDestination(ctx, d)
		c.refreshHealth(d, "")
		c.wake(d, "")
	}
	// The watcher runs in a goroutine of its own: its first snapshot may
	// be out before this subscription, and a failed list is told once, so
	// read what is there now (TestADestinationDownBeforeItIsFollowedIsMarkedDown).
	if !errors.Is(d.live.Current().Err(), swarm.ErrNotListed) {
		observe()
	}
	// On the app set's grid: the prune check comes due with the re-read,
	// not at a wake-up of its own.
	tick := time.NewTimer(tickgrid.Until(c.wall(), c.interval))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-changes:
			if !ok {
				return
			}
			observe()
		case <-tick.C:
			tick.Reset(tickgrid.Until(c.wall(), c.interval))
			if c.Loaded() {
				c.pruneReleases(ctx, d)
				c.status.SetPruneChecked(c.now())
			}
		}
	}
}

// LoadAppSet loads the app set once and applies it to the workers' view
// without starting workers; `skep deploy` uses it.
func (c *Controller) LoadAppSet(ctx context.Context) (appset.Snapshot, error) {
	_, err := c.watcher.Reload(ctx)
	snap := c.watcher.Current()
	c.setApps(snap)
	if snap.Set != nil {
		c.loaded.Store(true)
	}
	return snap, err
}

// Loaded reports whether a valid app set has been taken in: by Run, its
// applications' workers have started, so a sync or refresh asked for the
// moment it turns true finds them (the watcher's own snapshot comes
// before that).
func (c *Controller) Loaded() bool { return c.loaded.Load() }

// onAppSet takes in a new app-set snapshot: workers start for new
// applications under ctx (Run's), stop for those that left, and get a tick
// for those that stayed, since their definition may have changed.
func (c *Controller) onAppSet(ctx context.Context, snap appset.Snapshot) {
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
	if snap.Set == nil || ctx.Err() != nil {
		return
	}
	for name, w := range c.workers {
		if _, ok := c.apps[name]; !ok {
			c.log.Info("application left the app set", "app", name)
			w.stop()
			delete(c.workers, name)
			c.live.forget(name)
			c.status.Remove(name)
		}
	}
	for name := range c.apps {
		if w, ok := c.workers[name]; ok {
			w.enqueue(Request{})
			continue
		}
		c.startWorker(ctx, name)
	}
	c.loaded.Store(true)
}

// setApps records the app-set source's state and, when snap holds a valid
// set, makes it the set the workers read.
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
		c.status.Update(a.Name, func(s *AppStatus) { s.Automated, s.Swarm = a.SyncPolicy.Automated, a.Destination.Swarm })
	}
	c.mu.Lock()
	// A generated application with syncPolicy.prune whose directory went
	// away takes its release with it, as one that stopped declaring a
	// release would (see pruneReleases); one that comes back is kept.
	for name, old := range c.apps {
		if _, still := apps[name]; !still && old.Generator != "" && old.SyncPolicy.Prune {
			c.goneGenerated[name] = old.Generator
		}
	}
	for name := range apps {
		delete(c.goneGenerated, name)
	}
	c.apps = apps
	c.appsGen++
	c.mu.Unlock()
}

// appAt returns the application called name in the set the workers
// read, with the generation of that set: equal generations mean an
// unchanged definition.
func (c *Controller) appAt(name string) (appset.Application, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.apps[name]
	return a, c.appsGen, ok
}

// Applications returns the running app set's applications in declaration
// order; none before a set is loaded.
func (c *Controller) Applications() []appset.Application {
	return c.watcher.Current().Set.Applications()
}

package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/prune"
	"github.com/skep-cd/skep/sops"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
	"github.com/skep-cd/skep/tickgrid"
)

// DefaultAppSetInterval is how often the app-set source is re-read.
const DefaultAppSetInterval = 30 * time.Second

// Engine is everything the controller asks of a swarm manager: apply's
// writes, prune's deletions and re-labelling, the task list and ping the
// API's reads need, and who the manager is. *swarm.Client implements it;
// a client lacking a capability does not compile, so no step is ever
// skipped at run time for want of one.
type Engine interface {
	apply.Engine
	prune.Deleter
	prune.Relabeler
	TaskList(ctx context.Context, options dswarm.TaskListOptions) ([]dswarm.Task, error)
	ServiceLogs(ctx context.Context, serviceID string, options container.LogsOptions) (io.ReadCloser, error)
	Ping(ctx context.Context) (types.Ping, error)
	Identity() swarm.Identity
}

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
	Engine         Engine
	// ParallelWrites bounds the writes in flight on each swarm; zero
	// means DefaultParallelWrites.
	ParallelWrites int
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
	// Remotes are the named swarms besides the local one (Engine, Live),
	// by the name applications give in destination.swarm.
	Remotes map[string]Remote
	// Keys decrypt the SOPS-encrypted files of compose releases (secrets,
	// env files); nil means a release using one stalls with an error
	// naming the file.
	Keys *sops.Keys
	// CheckAddress judges each host a rendered release would make the
	// Engine connect to (a log driver's address, a network volume's
	// server), as the egress policy judges the hosts git names; a refusal
	// stalls the commit. Nil checks none.
	CheckAddress func(ctx context.Context, host string) error
}

// Controller keeps every application of an app set at what git declares.
// Its methods are safe for concurrent use.
type Controller struct {
	id       string
	git      *gitsource.Cache
	dests    map[string]*destination // by name; "" is the local swarm. Fixed at New.
	notifier *notify.Registry
	log      *slog.Logger
	now      func() time.Time
	watcher  *appset.Watcher
	interval time.Duration
	source   string
	status   *Statuses
	observer Observer
	appSet   appset.Source
	syncs    atomic.Uint64 // last sync id handed out
	// loaded is set once a valid app set has been taken in: its
	// applications have their workers (see Loaded).
	loaded    atomic.Bool
	pruneApps bool
	ownStack  string
	self      swarm.Self
	images    artifact.Images
	charts    ChartSource
	keys      *sops.Keys
	checkAddr func(ctx context.Context, host string) error
	declared  declaredReleases      // what release files declared, by application
	previewAt map[string]previewRef // by application@commit: the previews deployed, for notifiers

	appSetMu sync.Mutex // serialises onAppSet
	mu       sync.Mutex
	apps     map[string]appset.Application
	appsGen  uint64 // moves each time apps is replaced; 0 before the first set
	workers  map[string]*worker
	rendered map[string]rendered // by destination and release: the last render, for health
	// renderedBy is keyed by application: its keys in rendered, so that a
	// tick reads its own releases without going through every one.
	renderedBy map[string][]string
	renderGen  uint64               // moves with every change to rendered
	wrote      map[string]time.Time // by application: when its last write to the swarm ended
	// writing counts, by application, its writes to the swarm in flight.
	// Neither map forgets an application that left the set: its last
	// writes are what the prune of its release must see first.
	writing map[string]int
	// goneGenerated names, with their generator, the generated
	// applications with syncPolicy.prune that left the set since this
	// controller started.
	goneGenerated map[string]string
	seenLive      map[string]string // by application: the digest of its objects as the last live-drift wake saw them
	unwoken       map[string]bool   // applications whose objects moved while a wake was held back
	wg            sync.WaitGroup
}

// New validates opts and returns a Controller that does nothing until Run.
func New(opts Options) (*Controller, error) {
	switch {
	case opts.AppSet == nil:
		return nil, errors.New("controller: no app-set source")
	case opts.Git == nil:
		return nil, errors.New("controller: no git cache")
	case opts.Engine == nil:
		return nil, errors.New("controller: no docker engine for the local swarm")
	}
	c := &Controller{
		id:            opts.ControllerID,
		git:           opts.Git,
		notifier:      opts.Notifier,
		log:           opts.Logger,
		now:           opts.Now,
		interval:      opts.AppSetInterval,
		source:        opts.AppSetName,
		status:        NewStatuses(),
		observer:      opts.Observer,
		appSet:        opts.AppSet,
		apps:          map[string]appset.Application{},
		workers:       map[string]*worker{},
		rendered:      map[string]rendered{},
		renderedBy:    map[string][]string{},
		wrote:         map[string]time.Time{},
		writing:       map[string]int{},
		goneGenerated: map[string]string{},
		seenLive:      map[string]string{},
		unwoken:       map[string]bool{},
		pruneApps:     opts.PruneApplications,
		ownStack:      opts.OwnStack,
		self:          opts.Self,
		images:        opts.Images,
		charts:        opts.Charts,
		keys:          opts.Keys,
		checkAddr:     opts.CheckAddress,
	}
	c.dests = map[string]*destination{swarm.Local: {name: swarm.Local, engine: opts.Engine, live: opts.Live}}
	for name, r := range opts.Remotes {
		switch {
		case name == swarm.Local:
			return nil, errors.New(`controller: remote "" is the local swarm; give it as Engine`)
		case r.Engine == nil:
			return nil, fmt.Errorf("controller: remote %q has no engine", name)
		}
		c.dests[name] = &destination{name: name, engine: r.Engine, live: r.Live}
	}
	c.watcher = appset.NewCheckedWatcher(generated{inner: opts.AppSet, git: opts.Git}, c.checkSwarms)
	if c.images == nil {
		c.images = artifact.NewRegistry(artifact.RegistryOptions{})
	}
	if c.id == "" {
		c.id = "default"
	}
	// '@' separates a named destination in the controller label (ownerID).
	if strings.Contains(c.id, "@") {
		return nil, fmt.Errorf("controller id %q: '@' is not allowed", c.id)
	}
	for _, d := range c.dests {
		d.client, d.engine = d.engine, limitWrites(d.engine, opts.ParallelWrites)
		d.owner = ownerID(c.id, d.name)
		d.digests = apply.NewDigestCache(0, 0)
		d.state.Name = d.name
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
	var side sync.WaitGroup
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
		c.refreshHealth(d)
		c.wakeLiveDrift(d)
	}
	// The watcher runs in a goroutine of its own: its first snapshot may
	// be out before this subscription, and a failed list is told once, so
	// read what is there now (TestADestinationDownBeforeItIsFollowedIsMarkedDown).
	if !errors.Is(d.live.Current().Err(), swarm.ErrNotListed) {
		observe()
	}
	// On the app set's grid: the prune check comes due with the re-read,
	// not at a wake-up of its own.
	tick := time.NewTimer(tickgrid.Until(time.Now(), c.interval))
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
			tick.Reset(tickgrid.Until(time.Now(), c.interval))
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
			delete(c.seenLive, name)
			delete(c.unwoken, name)
			c.forgetRendered(name)
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

// generatorGone returns the generator of app when app is a generated
// application with prune on that left the set, or "".
func (c *Controller) generatorGone(app string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.goneGenerated[app]
}

// app returns the application called name in the set the workers read.
func (c *Controller) app(name string) (appset.Application, bool) {
	a, _, ok := c.appAt(name)
	return a, ok
}

// appAt is app with the generation of the set it was read from: equal
// generations mean an unchanged definition.
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

// owner is the ownership of app's release by this controller.
func (c *Controller) owner(app appset.Application) stack.Owner {
	return stack.Owner{Controller: c.destOf(app).owner, Application: app.Name, Release: app.Release}
}

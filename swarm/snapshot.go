package swarm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/volume"

	"github.com/skep-cd/skep/tickgrid"
)

// ErrNotListed is the read error of a Snapshot taken before the Watcher
// first listed the swarm.
var ErrNotListed = errors.New("the swarm has not been listed yet")

// Snapshot is what one swarm held at one moment: every service (with task
// counts), task, swarm network, config, secret, node and local volume. It
// is an immutable value: accessors return new slices, and the elements
// they hold share maps and pointers with the snapshot (services with one
// another too, see compactServices), so callers must treat them as
// read-only. The zero value is an empty snapshot that was
// never taken (ReadFailed).
type Snapshot struct {
	services []swarm.Service
	tasks    []swarm.Task
	networks []network.Summary
	configs  []swarm.Config
	secrets  []swarm.Secret
	nodes    []swarm.Node
	volumes  []volume.Volume
	takenAt  time.Time
	tasksAt  time.Time // when the tasks were listed: takenAt or later
	err      error
	version  uint64
	idx      *index // lookups by name, service and namespace; see lookup
}

// Services returns every service, listed with their running and desired
// task counts (ServiceStatus).
func (s Snapshot) Services() []swarm.Service { return slices.Clone(s.services) }

// Service returns the service named name.
func (s Snapshot) Service(name string) (swarm.Service, bool) {
	i, ok := s.lookup().services[name]
	if !ok {
		return swarm.Service{}, false
	}
	return s.services[i], true
}

// Tasks returns every task the swarm keeps, history included.
func (s Snapshot) Tasks() []swarm.Task { return slices.Clone(s.tasks) }

// TasksOf returns the tasks of the service with id serviceID.
func (s Snapshot) TasksOf(serviceID string) []swarm.Task {
	var out []swarm.Task
	for _, i := range s.lookup().tasks[serviceID] {
		out = append(out, s.tasks[i])
	}
	return out
}

// Networks returns the networks (every scope) as the Engine lists them.
func (s Snapshot) Networks() []network.Summary { return slices.Clone(s.networks) }

// NetworkNames maps network ids to names, as plan.DriftOptions wants; the
// map is new.
func (s Snapshot) NetworkNames() map[string]string {
	out := make(map[string]string, len(s.networks))
	for _, n := range s.networks {
		out[n.ID] = n.Name
	}
	return out
}

// Configs returns every config, with data.
func (s Snapshot) Configs() []swarm.Config { return slices.Clone(s.configs) }

// ConfigNames maps config ids to names, as plan.DriftOptions wants; the
// map is new.
func (s Snapshot) ConfigNames() map[string]string {
	out := make(map[string]string, len(s.configs))
	for _, c := range s.configs {
		out[c.ID] = c.Spec.Name
	}
	return out
}

// Secrets returns every secret (the Engine never returns their data).
func (s Snapshot) Secrets() []swarm.Secret { return slices.Clone(s.secrets) }

// Nodes returns every node of the swarm, as a manager lists them: what
// placement checks and per-node health read.
func (s Snapshot) Nodes() []swarm.Node { return slices.Clone(s.nodes) }

// EligibleNodes counts the nodes a global service may run on, placement
// constraints aside: ready and active.
func (s Snapshot) EligibleNodes() int {
	n := 0
	for _, node := range s.nodes {
		if node.Status.State == swarm.NodeStateReady && node.Spec.Availability == swarm.NodeAvailabilityActive {
			n++
		}
	}
	return n
}

// Volumes returns the volumes of the manager node the Watcher reads, as new
// pointers (the shape prune.LiveObjects takes).
func (s Snapshot) Volumes() []*volume.Volume {
	out := make([]*volume.Volume, len(s.volumes))
	for i := range s.volumes {
		v := s.volumes[i]
		out[i] = &v
	}
	return out
}

// TakenAt is when the last successful read began: everything written
// before it is in the snapshot. Zero if never read.
func (s Snapshot) TakenAt() time.Time { return s.takenAt }

// TasksAt is when the tasks (and the services and nodes, read with them)
// were last listed, TakenAt or later: what health measures the age of a
// task failure from.
func (s Snapshot) TasksAt() time.Time { return s.tasksAt }

// Err is the error of the latest read, nil when it succeeded. When it is
// set, the lists are those of the last successful read (or empty) and must
// not be taken for the swarm's state: health is Unknown, prune is held.
func (s Snapshot) Err() error { return s.err }

// ReadFailed reports whether Err is set, for health.ServiceInput.
func (s Snapshot) ReadFailed() bool { return s.err != nil }

// Version increases each time the content or the read error changes; two
// snapshots with the same Version hold the same data.
func (s Snapshot) Version() uint64 { return s.version }

// Reader is the part of the Engine API a Watcher uses; *client.Client (and
// so *Client) satisfies it. A Watcher calls it from one goroutine, and
// owns the services ServiceList returns: it compacts them in place.
type Reader interface {
	ServiceList(ctx context.Context, options swarm.ServiceListOptions) ([]swarm.Service, error)
	TaskList(ctx context.Context, options swarm.TaskListOptions) ([]swarm.Task, error)
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	ConfigList(ctx context.Context, options swarm.ConfigListOptions) ([]swarm.Config, error)
	SecretList(ctx context.Context, options swarm.SecretListOptions) ([]swarm.Secret, error)
	NodeList(ctx context.Context, options swarm.NodeListOptions) ([]swarm.Node, error)
	VolumeList(ctx context.Context, options volume.ListOptions) (volume.ListResponse, error)
	Events(ctx context.Context, options events.ListOptions) (<-chan events.Message, <-chan error)
}

// WatcherOptions tune a Watcher; the zero value means every default.
type WatcherOptions struct {
	// MinInterval bounds relists: at most one starts per MinInterval,
	// however many events arrive. Default 500ms.
	MinInterval time.Duration
	// ServiceMinInterval bounds the services-only relists that a service
	// event arriving within MinInterval of the last relist makes, so that
	// an out-of-band service change is seen at once even while other work
	// keeps the swarm busy. Default 100ms.
	ServiceMinInterval time.Duration
	// Resync relists even without events, since task state changes on
	// other nodes raise no event on this one. Default 30s. While the
	// events stream works, a resync lists the tasks and nodes alone (and
	// the services when they moved), since every other kind raises an
	// event when it changes; and none is made while the swarm is this
	// one node and every task has arrived (Snapshot.tasksSettled).
	Resync time.Duration
	// SettleInterval is how soon the tasks are listed again, on a swarm of
	// several nodes, while some task has not arrived where it is going
	// (starting, pending, shutting down): its moves on other nodes raise
	// no event here, and health would lag them by up to Resync. The wait
	// grows by SettleInterval, up to Resync, with each list that finds
	// nothing moved. Default 1s.
	SettleInterval time.Duration
	// FullResync bounds how long the snapshot goes without a full relist
	// while no event asks for one, in case the stream lost an event.
	// Default 5m.
	FullResync time.Duration
	// MaxBackoff caps the wait before resubscribing after the events
	// stream failed, or relisting after a list failed; the wait starts at
	// MinInterval and doubles. Default 30s.
	MaxBackoff time.Duration
	// Logger receives Debug detail and Warn notices; nil discards them.
	Logger *slog.Logger
	// IgnoreConfig, when set, names configs the snapshot leaves out and
	// whose events relist nothing: a replicated controller's leader
	// lease, rewritten every second and read by no release
	// (lease.IsConfig). nil keeps every config.
	IgnoreConfig func(name string) bool
}

// withDefaults fills in every zero field.
func (o WatcherOptions) withDefaults() WatcherOptions {
	if o.MinInterval <= 0 {
		o.MinInterval = 500 * time.Millisecond
	}
	if o.ServiceMinInterval <= 0 {
		o.ServiceMinInterval = 100 * time.Millisecond
	}
	if o.Resync <= 0 {
		o.Resync = 30 * time.Second
	}
	if o.SettleInterval <= 0 {
		o.SettleInterval = time.Second
	}
	if o.FullResync <= 0 {
		o.FullResync = 5 * time.Minute
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// watchedTypes are the event types that can change a snapshot.
var watchedTypes = []events.Type{
	events.ServiceEventType, events.ConfigEventType, events.SecretEventType, events.NetworkEventType,
	events.NodeEventType, events.ContainerEventType, events.VolumeEventType,
}

// Watcher keeps a Snapshot of one swarm fresh: it lists everything once,
// then relists when the Docker events stream reports a change (at most once
// per MinInterval; the services alone in between for a service event, at
// most once per ServiceMinInterval), every Resync, and after a failure
// with backoff. One
// Watcher serves every application of its swarm. Current and Subscribe are
// safe for concurrent use; Run must be called once.
type Watcher struct {
	reader Reader
	opts   WatcherOptions

	current atomic.Pointer[Snapshot]
	fp      uint64 // fingerprint of current; Run's goroutine only
	// partial is set while current holds services newer than its TakenAt
	// (a services-only relist); Run's goroutine only.
	partial bool

	// relist carries the asks of Relist, relistTasks those of
	// RelistTasks; buffered 1, so asks coalesce.
	relist, relistTasks chan struct{}

	mu      sync.Mutex
	subs    map[chan struct{}]struct{}
	stopped bool

	// read is closed once the first full list has ended, listed or not.
	read     chan struct{}
	readOnce sync.Once
}

// NewWatcher returns a Watcher reading r. It does nothing until Run.
func NewWatcher(r Reader, opts WatcherOptions) *Watcher {
	w := &Watcher{reader: r, opts: opts.withDefaults(), subs: map[chan struct{}]struct{}{},
		relist: make(chan struct{}, 1), relistTasks: make(chan struct{}, 1), read: make(chan struct{})}
	w.current.Store(&Snapshot{err: ErrNotListed})
	return w
}

// Relist asks for a full relist, at most MinInterval after the last one,
// for a caller whose own write the snapshot's TakenAt may not cover yet
// while no event is coming to bring one: a write that ended after the
// relist its events caused started. It never blocks; asks made before
// the relist starts share it.
func (w *Watcher) Relist() {
	select {
	case w.relist <- struct{}{}:
	default:
	}
}

// RelistTasks asks for the tasks and nodes to be listed again (the
// services too when the tasks moved), at most MinInterval after the last
// such list, for a caller waiting on a change no event brings: a task's
// move from starting to running, which a health check decides, raises
// none. The snapshot keeps its TakenAt. It never blocks; asks made before
// the list starts share it.
func (w *Watcher) RelistTasks() {
	select {
	case w.relistTasks <- struct{}{}:
	default:
	}
}

// Current returns the latest snapshot. It never blocks on the Engine.
func (w *Watcher) Current() Snapshot { return *w.current.Load() }

// Read returns the latest snapshot once the first full list has ended
// (listed, or failed with its error), or the one there is when ctx ends
// first: a pass that starts with the Watcher must not take "not listed
// yet" for what the swarm holds.
func (w *Watcher) Read(ctx context.Context) Snapshot {
	select {
	case <-w.read:
	case <-ctx.Done():
	}
	return w.Current()
}

// Subscribe returns a channel that receives a value after each refresh
// that changed the snapshot (Version moved). It holds at most one pending
// value, so a slow reader sees one wake-up for many changes and never
// blocks the Watcher. The channel is closed when ctx ends or Run returns.
func (w *Watcher) Subscribe(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		close(ch)
		return ch
	}
	w.subs[ch] = struct{}{}
	context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, ok := w.subs[ch]; ok {
			delete(w.subs, ch)
			close(ch)
		}
	})
	return ch
}

// notify wakes every subscriber without blocking: a channel that already
// holds a wake-up needs no second one.
func (w *Watcher) notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// stop closes every subscription and refuses new ones, once Run returns.
func (w *Watcher) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	for ch := range w.subs {
		delete(w.subs, ch)
		close(ch)
	}
}

// Run lists the swarm, then follows the events stream until ctx ends, and
// returns nil then. Failures of the stream or of a list are logged and
// retried with backoff; a failed list sets the snapshot's Err. Run closes
// every subscription before it returns.
func (w *Watcher) Run(ctx context.Context) error {
	defer w.stop()
	log := w.opts.Logger
	backoff := w.opts.MinInterval
	for ctx.Err() == nil {
		// Subscribe before listing, so no change falls between the two.
		streamCtx, cancel := context.WithCancel(ctx)
		msgs, errs := w.reader.Events(streamCtx, events.ListOptions{Filters: eventFilters()})
		started := time.Now()
		err := w.follow(ctx, msgs, errs)
		cancel()
		if ctx.Err() != nil {
			break
		}
		if time.Since(started) > w.opts.MaxBackoff {
			backoff = w.opts.MinInterval // the stream had worked for a while
		}
		log.WarnContext(ctx, "docker events stream ended; relisting", "err", err, "retry_in", backoff)
		if !sleep(ctx, backoff) {
			break
		}
		backoff = min(backoff*2, w.opts.MaxBackoff)
	}
	return nil
}

// watchedActions are the actions, of any watched type, that can change a
// snapshot. Asking the Engine for these alone keeps out what a health check
// raises every few seconds per container (exec_create, exec_start,
// exec_die), which decoding cost most of an idle controller's CPU; also
// out are what needs no relist (attach, mount, pause, rename, top, ...).
// "health_status" matches "health_status: healthy" and the other states:
// the Engine matches that name by prefix.
var watchedActions = []events.Action{
	events.ActionCreate, events.ActionUpdate, events.ActionRemove, events.ActionDestroy,
	events.ActionStart, events.ActionDie, events.ActionOOM, events.ActionHealthStatus,
	events.ActionConnect, events.ActionDisconnect, events.ActionPrune,
}

// eventFilters subscribes to watchedActions of watchedTypes. The Engine
// ANDs the two lists and ORs the values of each.
func eventFilters() filters.Args {
	f := filters.NewArgs()
	for _, t := range watchedTypes {
		f.Add("type", string(t))
	}
	for _, a := range watchedActions {
		f.Add("event", string(a))
	}
	return f
}

// follow refreshes now, then on events (bounded by MinInterval), on
// Resync, and after a failed refresh with backoff, until the stream fails
// (its error is returned) or ctx ends.
func (w *Watcher) follow(ctx context.Context, msgs <-chan events.Message, errs <-chan error) error {
	var (
		lastStart    = time.Now()
		lastServices = lastStart
		retry        = w.opts.MinInterval
		timer        = time.NewTimer(time.Hour)
		timerArmed   = false
		svcTimer     = time.NewTimer(time.Hour)
		svcArmed     = false
		lastTasks    = lastStart
		tasksTimer   = time.NewTimer(time.Hour)
		tasksArmed   = false
		settleTimer  = time.NewTimer(time.Hour)
		settleArmed  = false
		settleDelay  = w.opts.SettleInterval
	)
	timer.Stop()
	defer timer.Stop()
	svcTimer.Stop()
	defer svcTimer.Stop()
	tasksTimer.Stop()
	defer tasksTimer.Stop()
	settleTimer.Stop()
	defer settleTimer.Stop()
	// On a swarm of several nodes the tasks on other nodes move without an
	// event here: while some are on their way, their moves are listed every
	// settleDelay, which grows by SettleInterval (up to Resync) with each
	// list that finds nothing moved. A task that takes x seconds to start
	// is then seen about sqrt(2x) seconds late, and one left pending for
	// good costs little more than the resync.
	armSettle := func() {
		cur := w.Current()
		if cur.err != nil || cur.takenAt.IsZero() || len(cur.nodes) < 2 || cur.tasksArrived() {
			settleDelay = w.opts.SettleInterval
			return
		}
		if !settleArmed {
			settleTimer.Reset(settleDelay)
			settleArmed = true
		}
	}
	// On the Resync's grid (package tickgrid): at rest, the task relist
	// comes due with the controller's other periodic work, not at a
	// wake-up of its own.
	resync := time.NewTimer(tickgrid.Until(time.Now(), w.opts.Resync))
	defer resync.Stop()
	arm := func(at time.Time) {
		if timerArmed {
			return // a refresh is due already; it will see this change too
		}
		timer.Reset(max(time.Until(at), 0))
		timerArmed = true
	}
	// A service event that the full relist must wait for gets a
	// services-only relist of its own, sooner.
	armServices := func(at time.Time) {
		if svcArmed {
			return
		}
		svcTimer.Reset(max(time.Until(at), 0))
		svcArmed = true
	}
	// The first refresh runs at once, so a daemon that is down shows in
	// the snapshot's Err before the stream's failure is noticed.
	if err := w.refresh(ctx); err != nil && ctx.Err() == nil {
		w.opts.Logger.WarnContext(ctx, "swarm not listed", "err", err, "retry_in", retry)
		arm(time.Now().Add(retry))
		retry = min(retry*2, w.opts.MaxBackoff)
	}
	for {
		armSettle()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errs:
			if err == nil {
				err = errors.New("stream closed")
			}
			return err
		case m, ok := <-msgs:
			if !ok {
				return errors.New("stream closed")
			}
			if !w.relevant(m) {
				continue
			}
			full := lastStart.Add(w.opts.MinInterval)
			if m.Type == events.ServiceEventType && time.Until(full) > w.opts.ServiceMinInterval {
				armServices(lastServices.Add(w.opts.ServiceMinInterval))
			}
			arm(full)
		case <-w.relist:
			arm(lastStart.Add(w.opts.MinInterval))
		case <-w.relistTasks:
			if !tasksArmed {
				tasksTimer.Reset(max(time.Until(lastTasks.Add(w.opts.MinInterval)), 0))
				tasksArmed = true
			}
		case <-tasksTimer.C:
			tasksArmed = false
			lastTasks = time.Now()
			// A full relist already due lists the tasks too.
			if !timerArmed && !w.refreshTasks(ctx) {
				arm(lastStart.Add(w.opts.MinInterval))
			}
		case <-settleTimer.C:
			settleArmed = false
			seen := w.Current().Version()
			if !timerArmed && !w.refreshTasks(ctx) {
				arm(lastStart.Add(w.opts.MinInterval))
			}
			if w.Current().Version() == seen {
				settleDelay = min(settleDelay+w.opts.SettleInterval, w.opts.Resync)
			} else {
				settleDelay = w.opts.SettleInterval
			}
		case <-svcTimer.C:
			svcArmed = false
			lastServices = time.Now()
			w.refreshServices(ctx)
		case <-resync.C:
			resync.Reset(tickgrid.Until(time.Now(), w.opts.Resync))
			// A full relist that is due anyway covers the resync; one only
			// every FullResync otherwise: the tasks are what moves unseen.
			if timerArmed {
				continue
			}
			if time.Since(lastStart) < w.opts.FullResync && (w.keepSettledTasks() || w.refreshTasks(ctx)) {
				continue
			}
			arm(lastStart.Add(w.opts.MinInterval))
		case <-timer.C:
			timerArmed = false
			// The events already waiting are covered by the relist about to
			// start: read them first. Taken one per loop, a backlog (what
			// the Engine queued while a long relist ran) made a relist
			// for every other event, since the timer is due at once after
			// one: at 10,000 services, a relist a second for half an hour.
			if err := w.drain(msgs, errs); err != nil {
				return err
			}
			lastStart = time.Now()
			lastServices = lastStart
			if err := w.refresh(ctx); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				w.opts.Logger.WarnContext(ctx, "swarm not listed", "err", err, "retry_in", retry)
				arm(time.Now().Add(retry))
				retry = min(retry*2, w.opts.MaxBackoff)
				continue
			}
			retry = w.opts.MinInterval
		}
	}
}

// drainGap is how long drain waits for the next queued event: the
// Engine's stream hands a backlog over much faster than that.
const drainGap = 2 * time.Millisecond

// drain reads the events msgs has queued, until none comes within
// drainGap or for at most MinInterval (a stream that never pauses is
// relisted on its usual bound). It returns the stream's failure.
func (w *Watcher) drain(msgs <-chan events.Message, errs <-chan error) error {
	gap := time.NewTimer(drainGap)
	defer gap.Stop()
	for deadline := time.Now().Add(w.opts.MinInterval); time.Now().Before(deadline); {
		select {
		case _, ok := <-msgs:
			if !ok {
				return errors.New("stream closed")
			}
			gap.Reset(drainGap)
		case err := <-errs:
			if err == nil {
				err = errors.New("stream closed")
			}
			return err
		case <-gap.C:
			return nil
		}
	}
	return nil
}

// relevant drops the events that change nothing a snapshot holds: a
// health check alone raises exec events every few seconds per container,
// and an ignored config (WatcherOptions.IgnoreConfig) changes nothing.
func (w *Watcher) relevant(m events.Message) bool {
	if m.Type == events.ConfigEventType && w.opts.IgnoreConfig != nil {
		return !w.opts.IgnoreConfig(m.Actor.Attributes["name"])
	}
	return !(m.Type == events.ContainerEventType && strings.HasPrefix(string(m.Action), "exec_"))
}

// refresh lists everything and swaps in a new snapshot. On error it keeps
// the old lists with the error set. Subscribers are woken when anything
// changed.
func (w *Watcher) refresh(ctx context.Context) error {
	next, err := w.list(ctx)
	defer w.readOnce.Do(func() { close(w.read) })
	if err != nil {
		old := w.Current()
		if old.err != nil && old.err.Error() == err.Error() {
			return err // nothing new to tell subscribers
		}
		old.err = err
		old.version++
		w.current.Store(&old)
		w.notify()
		return err
	}
	fp := next.fingerprint()
	old := w.Current()
	if old.err == nil && fp == w.fp && !old.takenAt.IsZero() {
		old.takenAt, old.tasksAt = next.takenAt, next.tasksAt
		w.current.Store(&old)
		if w.partial {
			// Nothing new, but TakenAt caught up with the services: a
			// subscriber that waited for a snapshot showing its own
			// write must look again.
			w.partial = false
			w.notify()
		}
		return nil
	}
	w.publish(old, next, fp, false)
	return nil
}

// publish makes next, with fingerprint fp, the snapshot after old and
// wakes the subscribers; partial says next holds lists newer than its
// TakenAt.
func (w *Watcher) publish(old, next Snapshot, fp uint64, partial bool) {
	w.fp, w.partial = fp, partial
	next.version = old.version + 1
	w.current.Store(&next)
	w.notify()
}

// refreshServices relists the services alone and swaps them into the
// current snapshot when they changed. The snapshot keeps the TakenAt of
// its last full relist, which every kind's list followed: a caller that
// waits for the snapshot to show its own write waits for a full one. A
// failure is left to the full relist that the same event scheduled.
func (w *Watcher) refreshServices(ctx context.Context) {
	old := w.Current()
	if old.err != nil || old.takenAt.IsZero() {
		return
	}
	services, err := w.listServices(ctx)
	if err != nil {
		w.opts.Logger.DebugContext(ctx, "services not relisted", "err", err)
		return
	}
	next := old
	next.services, next.idx = services, &index{}
	fp := next.fingerprint()
	if fp == w.fp {
		return
	}
	w.publish(old, next, fp, true)
}

// refreshTasks relists the tasks and nodes (what changes without an event
// on this manager) and, when they moved, the services too, whose status
// counts their tasks; it swaps them into the current snapshot, keeping
// its TakenAt, as refreshServices does. It reports false when it could
// not, and a full relist must run instead.
func (w *Watcher) refreshTasks(ctx context.Context) bool {
	old := w.Current()
	if old.err != nil || old.takenAt.IsZero() {
		return false
	}
	start := time.Now()
	next := old
	var err error
	if next.tasks, err = w.reader.TaskList(ctx, swarm.TaskListOptions{}); err == nil {
		next.nodes, err = w.reader.NodeList(ctx, swarm.NodeListOptions{})
	}
	fp := next.fingerprint()
	if err == nil && (fp != w.fp || !next.servicesAgree()) {
		// The services' status counts tasks: it moved with them.
		if next.services, err = w.listServices(ctx); err == nil {
			fp = next.fingerprint()
		}
	}
	if err != nil {
		w.opts.Logger.DebugContext(ctx, "tasks not relisted", "err", err)
		return false
	}
	next.tasksAt, next.idx = start, &index{} // the index is built from the new lists
	if fp == w.fp {
		old.tasksAt = start
		w.current.Store(&old)
		return true
	}
	w.publish(old, next, fp, true)
	return true
}

// listServices lists the services with their task counts, compacted.
func (w *Watcher) listServices(ctx context.Context) ([]swarm.Service, error) {
	services, err := w.reader.ServiceList(ctx, swarm.ServiceListOptions{Status: true})
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	return compactServices(services), nil
}

// list reads the swarm, one call per kind, one after the other.
func (w *Watcher) list(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	var err error
	r := w.reader
	// The start, not the end: anything written before it is in the lists,
	// which is what a caller comparing with its own last write relies on.
	start := time.Now()
	if s.services, err = w.listServices(ctx); err != nil {
		return s, err
	}
	if s.tasks, err = r.TaskList(ctx, swarm.TaskListOptions{}); err != nil {
		return s, fmt.Errorf("list tasks: %w", err)
	}
	if !s.servicesAgree() {
		// A task moved between the two lists: the services' counts are
		// older than the tasks, and no event may come to mend them.
		if s.services, err = w.listServices(ctx); err != nil {
			return s, err
		}
	}
	if s.networks, err = r.NetworkList(ctx, network.ListOptions{}); err != nil {
		return s, fmt.Errorf("list networks: %w", err)
	}
	if s.configs, err = r.ConfigList(ctx, swarm.ConfigListOptions{}); err != nil {
		return s, fmt.Errorf("list configs: %w", err)
	}
	if ignore := w.opts.IgnoreConfig; ignore != nil {
		s.configs = slices.DeleteFunc(s.configs, func(c swarm.Config) bool { return ignore(c.Spec.Name) })
	}
	if s.secrets, err = r.SecretList(ctx, swarm.SecretListOptions{}); err != nil {
		return s, fmt.Errorf("list secrets: %w", err)
	}
	if s.nodes, err = r.NodeList(ctx, swarm.NodeListOptions{}); err != nil {
		return s, fmt.Errorf("list nodes: %w", err)
	}
	vols, err := r.VolumeList(ctx, volume.ListOptions{})
	if err != nil {
		return s, fmt.Errorf("list volumes: %w", err)
	}
	for _, v := range vols.Volumes {
		if v != nil {
			s.volumes = append(s.volumes, *v)
		}
	}
	s.takenAt, s.tasksAt = start, start
	s.idx = &index{}
	return s, nil
}

// fingerprint hashes what identifies each object's version, so a relist
// that found nothing new wakes nobody.
func (s Snapshot) fingerprint() uint64 {
	var f fingerprinter
	f.h = fnv.New64a()
	for _, x := range s.services {
		f.add("s", x.ID).num(x.Version.Index).add(statusOf(x))
	}
	for _, x := range s.tasks {
		f.add("t", x.ID).num(x.Version.Index).add(string(x.Status.State)).num(uint64(x.Status.Timestamp.UnixNano()))
	}
	for _, x := range s.networks {
		f.add("n", x.ID, x.Name)
	}
	for _, x := range s.configs {
		f.add("c", x.ID).num(x.Version.Index)
	}
	for _, x := range s.secrets {
		f.add("x", x.ID).num(x.Version.Index)
	}
	for _, x := range s.nodes {
		f.add("o", x.ID).num(x.Version.Index).add(string(x.Status.State))
	}
	for _, x := range s.volumes {
		f.add("v", x.Name, x.CreatedAt)
	}
	return f.h.Sum64()
}

// fingerprinter feeds strings and numbers to a hash, each ended by a
// separator, without formatting them first: a relist hashes every object
// of the swarm.
type fingerprinter struct {
	h   hash.Hash64
	buf [8]byte
}

func (f *fingerprinter) add(parts ...string) *fingerprinter {
	for _, p := range parts {
		_, _ = io.WriteString(f.h, p)
		f.buf[0] = 0
		_, _ = f.h.Write(f.buf[:1])
	}
	return f
}

func (f *fingerprinter) num(n uint64) *fingerprinter {
	binary.LittleEndian.PutUint64(f.buf[:], n)
	_, _ = f.h.Write(f.buf[:])
	return f
}

// statusOf is the part of a service that changes without its version
// index moving: its update state and task counts.
func statusOf(s swarm.Service) string {
	st := ""
	if s.UpdateStatus != nil {
		st = string(s.UpdateStatus.State) + s.UpdateStatus.Message
	}
	if s.ServiceStatus != nil {
		st += fmt.Sprintf("/%d/%d/%d", s.ServiceStatus.RunningTasks, s.ServiceStatus.DesiredTasks, s.ServiceStatus.CompletedTasks)
	}
	return st
}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// keepSettledTasks moves the current snapshot's TasksAt to now, without
// a list, when its tasks are settled (see Snapshot.tasksSettled): the
// events would have told of any change since. Health ages task failures
// by TasksAt. It reports whether it did.
func (w *Watcher) keepSettledTasks() bool {
	cur := w.Current()
	if cur.takenAt.IsZero() || !cur.tasksSettled() {
		return false
	}
	cur.tasksAt = time.Now()
	w.current.Store(&cur)
	return true
}

// tasksSettled says that no task of s can change without an event on
// the stream Watcher follows: the swarm is one node, the Engine the
// stream comes from, whose containers raise start, die, OOM and health
// events; and every task has arrived (tasksArrived). A task on its way can
// move without one: rejected before it had a container, or left pending
// for want of a node.
func (s Snapshot) tasksSettled() bool {
	return s.err == nil && len(s.nodes) == 1 && s.tasksArrived() && s.servicesAgree()
}

// servicesAgree says each service's status counts the tasks s lists for
// it, as Swarm counts them when the services are listed: the tasks
// running, and for a global service the tasks meant to run. The two
// lists are taken apart, so a task may move in between. Jobs are left
// out (their counts are of one run of the job).
func (s Snapshot) servicesAgree() bool {
	running, desired := map[string]uint64{}, map[string]uint64{}
	for _, t := range s.tasks {
		if t.Status.State == swarm.TaskStateRunning {
			running[t.ServiceID]++
		}
		if t.DesiredState == swarm.TaskStateRunning {
			desired[t.ServiceID]++
		}
	}
	for _, svc := range s.services {
		st, m := svc.ServiceStatus, svc.Spec.Mode
		if st == nil || m.ReplicatedJob != nil || m.GlobalJob != nil {
			continue
		}
		if st.RunningTasks != running[svc.ID] || m.Global != nil && st.DesiredTasks != desired[svc.ID] {
			return false
		}
	}
	return true
}

// tasksArrived says every task has arrived where it was going: running as
// desired on a node the managers hear from, or ended. A node that went
// down still shows its tasks running until the orchestrator, moments
// later and without an event here, replaces them elsewhere.
func (s Snapshot) tasksArrived() bool {
	var lost []string
	for _, n := range s.nodes {
		if n.Status.State == swarm.NodeStateDown || n.Status.State == swarm.NodeStateDisconnected {
			lost = append(lost, n.ID)
		}
	}
	for _, t := range s.tasks {
		if t.DesiredState == swarm.TaskStateRunning {
			if t.Status.State != swarm.TaskStateRunning || slices.Contains(lost, t.NodeID) {
				return false
			}
		} else if !TaskEnded(t.Status.State) {
			return false
		}
	}
	return true
}

// TaskEnded says a task in state st will not move again.
func TaskEnded(st swarm.TaskState) bool {
	switch st {
	case swarm.TaskStateComplete, swarm.TaskStateShutdown, swarm.TaskStateFailed,
		swarm.TaskStateRejected, swarm.TaskStateRemove, swarm.TaskStateOrphaned:
		return true
	}
	return false
}

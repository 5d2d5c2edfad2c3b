package reconcile

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
	"github.com/skep-cd/skep/syncpass"
)

// liveIndex is what the controller keeps across passes to follow the live
// swarms: each application's last renders (for health and the quiet key),
// its writes (what a snapshot must show before it is believed), and what
// its last live-drift wake saw. It is safe for concurrent use; its mutex
// is taken after Controller.mu, never before.
type liveIndex struct {
	mu       sync.Mutex
	rendered map[string]rendered // by destination and release: the last render, for health
	// byApp is keyed by application: its keys in rendered, so that a pass
	// reads its own releases without going through every one.
	byApp map[string][]string
	gen   uint64 // moves with every change to rendered
	// wrote is, by swarm and application, when the application's last
	// write to that swarm ended, and writing counts its writes in flight
	// there: a snapshot of one swarm need not show writes to another.
	// Neither forgets an application that left the set: its last writes
	// are what the prune of its release must see first.
	wrote   map[writer]time.Time
	writing map[writer]int
	// seenLive is, by application, the digest of its objects as its last
	// live-drift wake saw them; unwoken the applications whose objects
	// moved while a wake was held back.
	seenLive map[string]string
	unwoken  map[string]bool
}

// writer is one application writing to one swarm.
type writer struct{ swarm, app string }

// rendered is a release's last render, kept for health between passes,
// with the application it belongs to and where it runs.
type rendered struct {
	app     string
	swarm   string
	release stack.Release
}

// store keeps what health reads of rel, app's last render of one of its
// releases (syncpass.Kept). Renders are keyed by destination and release:
// two swarms may each run a release of one name.
func (l *liveIndex) store(app appset.Application, rel stack.Release) {
	k := syncpass.Kept(rel)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rendered == nil {
		l.rendered, l.byApp = map[string]rendered{}, map[string][]string{}
	}
	key := app.Destination.Swarm + "\x00" + rel.Name
	if old, ok := l.rendered[key]; ok && old.app != app.Name {
		l.byApp[old.app] = slices.DeleteFunc(l.byApp[old.app], func(k string) bool { return k == key })
	}
	if !slices.Contains(l.byApp[app.Name], key) {
		l.byApp[app.Name] = append(l.byApp[app.Name], key)
	}
	l.rendered[key] = rendered{app: app.Name, swarm: app.Destination.Swarm, release: k}
	l.gen++
}

// forget drops what is kept of an application that left the set, but its
// writes (see wrote).
func (l *liveIndex) forget(app string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, key := range l.byApp[app] {
		if l.rendered[key].app == app {
			delete(l.rendered, key)
		}
	}
	delete(l.byApp, app)
	delete(l.seenLive, app)
	delete(l.unwoken, app)
	l.gen++
}

// renders is what a pass of app reads of the renders: app's other
// releases on its swarm, and the generation of the renders.
func (l *liveIndex) renders(app appset.Application) syncpass.Renders {
	l.mu.Lock()
	defer l.mu.Unlock()
	return syncpass.Renders{Gen: l.gen, Releases: l.othersLocked(app)}
}

// othersLocked names app's releases on its swarm besides app.Release; l.mu
// is held.
func (l *liveIndex) othersLocked(app appset.Application) []string {
	var out []string
	for _, key := range l.byApp[app.Name] {
		if r := l.rendered[key]; r.swarm == app.Destination.Swarm && r.release.Name != app.Release {
			out = append(out, r.release.Name)
		}
	}
	return out
}

// releases returns what is kept of app's releases on its swarm, by name.
func (l *liveIndex) releases(app appset.Application) []stack.Release {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []stack.Release
	for _, key := range l.byApp[app.Name] {
		if r := l.rendered[key]; r.app == app.Name && r.swarm == app.Destination.Swarm {
			out = append(out, r.release)
		}
	}
	slices.SortFunc(out, func(a, b stack.Release) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// appsOn lists the applications with a render kept on swarmName.
func (l *liveIndex) appsOn(swarmName string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for app, keys := range l.byApp {
		if slices.ContainsFunc(keys, func(key string) bool { return l.rendered[key].swarm == swarmName }) {
			out = append(out, app)
		}
	}
	return out
}

// healthOf computes from snap the health of app's releases kept on
// swarmName: its one release's, with the service-level message, or the
// worst of several; ok is false when none is kept there.
func (l *liveIndex) healthOf(app, swarmName string, snap swarm.Snapshot) (h health.Result, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var many map[string]health.Result
	first := ""
	for _, key := range l.byApp[app] {
		r := l.rendered[key]
		if r.app != app || r.swarm != swarmName {
			continue
		}
		one := syncpass.Health(r.release, snap)
		switch {
		case !ok:
			h, ok, first = one, true, r.release.Name
		case many == nil:
			many = map[string]health.Result{first: h, r.release.Name: one}
		default:
			many[r.release.Name] = one
		}
	}
	if many != nil {
		h = health.Application(many)
	}
	return h, ok
}

// beginWrite records that a write of app to swarmName starts, and
// returns the func that records its end, at wall's time; call it once,
// when nothing more is written.
func (l *liveIndex) beginWrite(swarmName, app string, wall func() time.Time) (end func()) {
	w := writer{swarm: swarmName, app: app}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.writing == nil {
		l.writing, l.wrote = map[writer]int{}, map[writer]time.Time{}
	}
	l.writing[w]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.writing[w]--
		if l.writing[w] == 0 {
			delete(l.writing, w)
		}
		l.wrote[w] = wall()
	}
}

// seen reports whether a snapshot of swarmName taken at taken shows every
// write of app there: none in flight (unless ended, which leaves those
// out: a wait inside an apply is one of them), and the last one ended
// before taken. An application that has not written there since the
// controller started has nothing unseen.
func (l *liveIndex) seen(swarmName, app string, taken time.Time, ended bool) bool {
	w := writer{swarm: swarmName, app: app}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ended && l.writing[w] > 0 {
		return false
	}
	wrote, ok := l.wrote[w]
	return !ok || taken.After(wrote)
}

// writtenAfter reports whether an application of which (by name) wrote
// to swarmName after taken, or writes there still.
func (l *liveIndex) writtenAfter(swarmName string, taken time.Time, which func(app string) bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for w, n := range l.writing {
		if n > 0 && w.swarm == swarmName && which(w.app) {
			return true
		}
	}
	for w, at := range l.wrote {
		if w.swarm == swarmName && !taken.After(at) && which(w.app) {
			return true
		}
	}
	return false
}

// moved reports whether app's objects in snap are not those its last wake
// saw, and records that they now are. An application that is busy
// (applying, or failing) is not woken, nor one whose last write snap may
// not show (a pass would take its own write for drift, and wait): what it
// was not woken for stays unseen, so the next look (a later snapshot, or
// the end of its pass) wakes it. held limits it to an application whose
// wake was held back so.
func (l *liveIndex) moved(app appset.Application, snap swarm.Snapshot, held bool, busy func() bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if held && !l.unwoken[app.Name] {
		return false
	}
	state := syncpass.Digest(syncpass.LiveState(snap, append([]string{app.Release}, l.othersLocked(app)...)))
	if l.seenLive[app.Name] == state {
		return false
	}
	if l.seenLive == nil {
		l.seenLive, l.unwoken = map[string]string{}, map[string]bool{}
	}
	if busy() || snap.TakenAt().IsZero() || !snap.TakenAt().After(l.wrote[writer{swarm: app.Destination.Swarm, app: app.Name}]) {
		l.unwoken[app.Name] = true
		return false
	}
	delete(l.unwoken, app.Name)
	l.seenLive[app.Name] = state
	return true
}

// remember keeps rel, app's render of one of its releases, for health
// between passes, and refreshes app's health. A pass that ends after its
// application left the set keeps nothing: health would bring the
// application back into the status.
func (c *Controller) remember(app appset.Application, rel stack.Release) {
	c.mu.Lock()
	_, ok := c.apps[app.Name]
	if ok {
		c.live.store(app, rel)
	}
	c.mu.Unlock()
	if ok {
		c.refreshHealth(c.dest(app.Destination.Swarm), app.Name)
	}
}

// refreshHealth recomputes, from d's snapshot, the health of every
// application on d (of application only, when not ""). While d does not
// answer, its applications stay unknown. It is health's one writer.
func (c *Controller) refreshHealth(d *destination, only string) {
	if d.live == nil {
		return
	}
	snap := d.live.Current()
	if only != "" {
		setHealth(c.status, &c.live, d.name, only, snap)
		return
	}
	for _, app := range c.live.appsOn(d.name) {
		setHealth(c.status, &c.live, d.name, app, snap)
	}
}

// setHealth writes app's health on swarmName, from snap, in status.
func setHealth(status *Statuses, live *liveIndex, swarmName, app string, snap swarm.Snapshot) {
	h, ok := live.healthOf(app, swarmName, snap)
	if !ok {
		return
	}
	if snap.ReadFailed() && !errors.Is(snap.Err(), swarm.ErrNotListed) {
		h.Message = fmt.Sprintf("%s: %v", swarm.Describe(swarmName), snap.Err())
	}
	status.Update(app, func(s *AppStatus) {
		s.Health, s.HealthMessage, s.Running, s.Desired = h.State, h.Message, h.Running, h.Desired
	})
}

// wake queues a tick for every application on d with live drift detection
// whose own objects changed in d's snapshot (see liveIndex.moved), so an
// out-of-band change is seen in seconds while a change to another stack
// wakes nobody; and, when the swarm's nodes changed, every application on
// d that rebalances (a node back may have left its tasks skewed). With
// only, it looks at that one application, and only when its wake was held
// back: as its pass ends, a change that came while it applied is looked
// at now, even if the swarm raises nothing more.
func (c *Controller) wake(d *destination, only string) {
	if d.live == nil {
		return
	}
	snap := d.live.Current()
	c.mu.Lock()
	defer c.mu.Unlock()
	// A node back (or gone) may leave the tasks of the applications that
	// rebalance skewed: they look at once, not at their next tick.
	nodesMoved := false
	if only == "" && !snap.ReadFailed() {
		nodes := syncpass.NodesKey(snap)
		nodesMoved, d.nodes = d.nodes != "" && nodes != d.nodes, nodes
	}
	look := func(name string, w *worker) {
		app := c.apps[name]
		if app.Destination.Swarm == d.name && nodesMoved && syncpass.Rebalances(d.env, app) {
			w.enqueue(Request{live: true})
			return
		}
		if app.Destination.Swarm != d.name || app.DriftDetection != appset.DriftLive {
			return
		}
		busy := func() bool {
			phase, failed, _ := c.status.brief(name)
			return failed != "" || phase == PhaseApplying
		}
		if c.live.moved(app, snap, only != "", busy) {
			w.enqueue(Request{live: true})
		}
	}
	if only != "" {
		if w, ok := c.workers[only]; ok {
			look(only, w)
		}
		return
	}
	for name, w := range c.workers {
		look(name, w)
	}
}

package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/prune"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
	"github.com/skep-cd/skep/syncpass"
)

// Remote is one swarm the controller deploys to.
type Remote struct {
	Engine Engine
	// Live is the swarm's own snapshot, fed by its own events stream; nil
	// where the controller makes one pass (`skep deploy`).
	Live *swarm.Watcher
}

// destination is one swarm the controller keeps: its client, its live
// snapshot and what the controller knows of its reachability. One swarm's
// failure stays in its destination: nothing of another reads or waits on it.
type destination struct {
	name string
	// engine is client with its writes limited (see limitWrites): what
	// every reconcile uses.
	engine Engine
	client Engine         // as given; only probes use it directly
	live   *swarm.Watcher // nil without a live snapshot
	// owner is the controller label value stamped on what this
	// controller creates here: its id, plus the destination's name for a
	// named one, so two destinations never claim each other's objects even
	// when both names reach one swarm.
	owner string
	// env is what every sync pass here works with; built once, at New.
	env syncpass.Env
	// nodes are the swarm's nodes as the last wake saw them
	// (syncpass.NodesKey); guarded by Controller.mu, which wake holds.
	nodes string

	mu    sync.Mutex
	state DestinationState
}

// DestinationState is what the controller knows of one destination.
type DestinationState struct {
	Name string
	// Reachable is true once a list of the swarm succeeded and until one
	// fails; Observed once any list succeeded.
	Reachable bool
	Observed  bool
	// UnreachableSince is when the swarm stopped answering (zero while it
	// answers); Error says what failed, naming the destination.
	UnreachableSince time.Time
	Error            string
	// Identity is the manager as the last successful probe found it.
	Identity swarm.Identity
	// Applications counts the applications of the running set deployed here.
	Applications int
}

// ownerID is the controller label value for destination name.
func ownerID(id, name string) string {
	if name == swarm.Local {
		return id
	}
	return id + "@" + name
}

// newDestination wires destination name: its client with writes limited,
// and the Env its passes share, whose Fleet reaches back into c.
func (c *Controller) newDestination(name string, r Remote, opts Options) *destination {
	d := &destination{name: name, client: r.Engine, engine: limitWrites(r.Engine, opts.ParallelWrites, opts.Fence), live: r.Live,
		owner: ownerID(c.id, name)}
	d.state.Name = name
	appSetRepo := ""
	if g, ok := opts.AppSet.(GitAppSet); ok {
		appSetRepo = g.Repo
	}
	d.env = syncpass.Env{
		Swarm: name, Owner: d.owner, Engine: d.engine, Live: r.Live, Digests: apply.NewDigestCache(0, 0),
		Git: c.git, Images: opts.Images, Charts: opts.Charts, Keys: opts.Keys, Self: opts.Self, OwnStack: opts.OwnStack,
		AppSetRepo: appSetRepo, CheckAddress: opts.CheckAddress, Notifier: c.notifier, Now: c.now, Wall: c.wall, Log: c.log,
		Analysis: opts.Analysis,
		Fleet: syncpass.Fleet{
			Applying:   func(app string) { c.status.Update(app, func(s *AppStatus) { s.Phase = PhaseApplying }) },
			BeginWrite: func(app string) func() { return c.live.beginWrite(name, app, c.wall) },
			SeenWrites: func(app string, taken time.Time, ended bool) bool { return c.live.seen(name, app, taken, ended) },
			Remember:   c.remember,
			LeftUnseen: func(taken time.Time) bool {
				c.mu.Lock()
				defer c.mu.Unlock()
				return c.live.writtenAfter(name, taken, func(app string) bool { _, in := c.apps[app]; return !in })
			},
			RefreshHealth: func(app appset.Application) {
				c.refreshHealth(c.dest(app.Destination.Swarm), app.Name)
			},
			MovedFrom:    c.movedFrom,
			Gates:        c.gates,
			ReleaseGates: func(owner stack.Owner, taken time.Time) prune.Gates { return c.releaseGates(name, owner, taken) },
			AppNames:     c.appNames,
			PruneRelease: func(ctx context.Context, owner stack.Owner, snap swarm.Snapshot, why string) {
				c.pruneRelease(ctx, owner, d, snap, why)
			},
			NotePreview: c.previews.note,
			Newer: func(app string) <-chan struct{} {
				c.mu.Lock()
				w := c.workers[app]
				c.mu.Unlock()
				if w == nil {
					return nil
				}
				return w.newerRequest()
			},
			Fence: opts.Fence,
		},
		Term: opts.Term,
	}
	// The registry gate also reads platforms, for the placement check.
	d.env.Platforms, _ = opts.Images.(syncpass.ImagePlatforms)
	// One rebalance at a time per swarm: its passes share the channel.
	d.env.Rebalance, d.env.Rebalancing = opts.Rebalance, make(chan struct{}, 1)
	return d
}

// dest returns the destination called name. The app set's check refuses
// an unknown name before any worker sees it; should one slip through, the
// destination returned has no engine, and a reconcile of it stalls
// (unreachable) rather than write to some other swarm.
func (c *Controller) dest(name string) *destination {
	if d, ok := c.dests[name]; ok {
		return d
	}
	d := &destination{name: name, engine: nil, owner: ownerID(c.id, name)}
	d.env = c.dests[swarm.Local].env
	d.env.Swarm, d.env.Owner, d.env.Engine, d.env.Live, d.env.Digests = name, d.owner, nil, nil, nil
	return d
}

// ownerOf is the ownership of app's release by this controller on d.
func (d *destination) ownerOf(app appset.Application) stack.Owner {
	return stack.Owner{Controller: d.owner, Application: app.Name, Release: app.Release}
}

// checkSwarms refuses an app set naming a destination this controller has
// not been given.
func (c *Controller) checkSwarms(set *appset.Set) error {
	var names []string
	for n := range c.dests {
		if n != swarm.Local {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	known := `""`
	for _, n := range names {
		known += ", " + n
	}
	return set.CheckSwarms(func(n string) bool { _, ok := c.dests[n]; return ok }, known)
}

// ErrUnreachable wraps the error of an application whose swarm does not
// answer.
var ErrUnreachable = errors.New("swarm unreachable")

// unreachable returns a waiting error while app's destination does not
// answer, and nil otherwise (including before its first list, when the
// snapshot's own gate applies).
func (c *Controller) unreachable(app appset.Application) error {
	d := c.dest(app.Destination.Swarm)
	if d.engine == nil {
		return &outcome.StalledError{Err: fmt.Errorf("%s is not configured", swarm.Describe(d.name))}
	}
	if err := d.down(); err != nil && d.live != nil {
		return &outcome.WaitingError{Err: err, Retry: c.interval}
	}
	return nil
}

// down returns an error naming d while it is known not to answer, nil
// otherwise.
func (d *destination) down() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state.UnreachableSince.IsZero() {
		return nil
	}
	return fmt.Errorf("%w: %s since %s: %s", ErrUnreachable, swarm.Describe(d.name),
		d.state.UnreachableSince.UTC().Format(time.RFC3339), d.state.Error)
}

// observeDestination updates d's state from its snapshot and, on a change
// of reachability, raises one event and marks (or wakes) the destination's
// applications.
func (c *Controller) observeDestination(ctx context.Context, d *destination) {
	now := c.now()
	was, st := d.observe(d.live.Current().Err(), now)
	becameDown := was.UnreachableSince.IsZero() && !st.UnreachableSince.IsZero()
	cameBack := !was.UnreachableSince.IsZero() && st.UnreachableSince.IsZero()
	changed := becameDown || cameBack || st.Reachable && !was.Reachable
	if becameDown {
		c.log.Warn("swarm unreachable", "swarm", d.name, "err", st.Error)
		c.notifier.Dispatch(ctx, notify.Event{Type: notify.SwarmUnreachable, Swarm: d.name, At: now,
			Message: fmt.Sprintf("%s does not answer: %s; its applications are unknown and nothing is pruned there until it does", swarm.Describe(d.name), st.Error)})
	}
	if cameBack {
		c.log.Info("swarm reachable again", "swarm", d.name)
		c.notifier.Dispatch(ctx, notify.Event{Type: notify.SwarmReachable, Swarm: d.name, At: now,
			Message: fmt.Sprintf("%s answers again after %s", swarm.Describe(d.name), now.Sub(was.UnreachableSince).Round(time.Second))})
	}
	if st.Reachable {
		reprobe(ctx, c.log, d, changed)
	}
	if !changed {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, w := range c.workers {
		if c.apps[name].Destination.Swarm != d.name {
			continue
		}
		if becameDown {
			c.status.markUnknown(name, fmt.Errorf("%w: %s: %s", ErrUnreachable, swarm.Describe(d.name), st.Error))
		} else {
			w.enqueue(Request{})
		}
	}
}

// reprobe asks d's manager who it is again (engine version, node count,
// which manager), as the swarm answers again or first does (changed), or
// once its client failed over to another manager: the API's version is
// negotiated on the first request, and the status names the manager.
func reprobe(ctx context.Context, log *slog.Logger, d *destination, changed bool) {
	p, ok := d.client.(interface {
		Probe(context.Context) (swarm.Identity, error)
		Moved() bool
	})
	if !ok || !changed && !p.Moved() {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := p.Probe(pctx); err != nil {
		log.Warn("swarm probe", "swarm", d.name, "err", err)
	}
}

// observe takes in the error of d's latest read (nil: it answered) at
// now, and returns d's state before and after.
func (d *destination) observe(err error, now time.Time) (was, st DestinationState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	was = d.state
	switch {
	case err == nil:
		d.state.Reachable, d.state.Observed, d.state.Error = true, true, ""
		d.state.UnreachableSince = time.Time{}
	case errors.Is(err, swarm.ErrNotListed):
		// Not read yet: neither reachable nor known to be down.
	default:
		d.state.Reachable = false
		d.state.Error = err.Error()
		if d.state.UnreachableSince.IsZero() {
			d.state.UnreachableSince = now
		}
	}
	return was, d.state
}

// Destinations returns the state of every destination, the local swarm
// first, then by name.
func (c *Controller) Destinations() []DestinationState {
	counts := map[string]int{}
	for _, a := range c.Applications() {
		counts[a.Destination.Swarm]++
	}
	out := make([]DestinationState, 0, len(c.dests))
	for _, name := range destNames(c.dests) {
		d := c.dests[name]
		d.mu.Lock()
		st := d.state
		d.mu.Unlock()
		st.Name = name
		st.Identity = d.engine.Identity()
		st.Applications = counts[name]
		if d.live == nil {
			// Without a snapshot (`skep deploy`) reachability is not followed.
			st.Reachable = st.Identity.NodeID != ""
		}
		out = append(out, st)
	}
	return out
}

// destNames lists the destinations of dests, "" first, then by name.
func destNames(dests map[string]*destination) []string {
	return slices.Sorted(maps.Keys(dests)) // "" sorts first
}

// movedFrom says where else app's release was recorded by this controller:
// the destinations (other than app's own) whose snapshot holds a revision
// of it. A change of destination.swarm is a move: the plan says so, and the
// old release goes only with syncPolicy.prune (see pruneReleases).
func (c *Controller) movedFrom(app appset.Application) string {
	var from []string
	owner := stack.Owner{Application: app.Name, Release: app.Release}
	for _, name := range destNames(c.dests) {
		if name != app.Destination.Swarm && recordedOn(c.dests[name], owner) {
			from = append(from, swarm.Describe(name))
		}
	}
	if len(from) == 0 {
		return ""
	}
	fate := "left in place there (syncPolicy.prune is off)"
	if app.SyncPolicy.Prune {
		fate = "removed there once the move is synced (syncPolicy.prune)"
	}
	return fmt.Sprintf("moved from %s to %s: the release is installed here and %s", strings.Join(from, " and "), swarm.Describe(app.Destination.Swarm), fate)
}

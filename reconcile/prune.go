package reconcile

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/hook"
	"github.com/skep-cd/skep/prune"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
	"github.com/skep-cd/skep/syncpass"
)

// gates gathers the facts prune's safety gates check, for pruning release
// on behalf of app ("" when the application left the set).
func (c *Controller) gates(app, release string) prune.Gates {
	snap := c.watcher.Current()
	g := prune.Gates{AppSetLoadFailed: snap.Err != nil, AppSetStale: snap.Stale}
	if snap.Err != nil {
		g.LoadError = snap.Err.Error()
	}
	for _, a := range snap.Set.Applications() {
		g.Applications = append(g.Applications, a.Name)
		if a.Name != app && a.Release == release {
			g.DeclaredBy = append(g.DeclaredBy, a.Name)
		}
		// The application pruning for itself is mid-reconcile: its own
		// first reconcile is the one asking, not one to wait for (see
		// TestPruneGatesDoNotCountTheAskingApplication).
		if st, ok := c.status.Get(a.Name); a.Name != app && (!ok || st.LastReconcile.IsZero()) {
			g.NotReconciled = append(g.NotReconciled, a.Name)
		}
	}
	return g
}

// releaseGates are the gates for pruning owner's whole release, records
// and all, on a live snapshot of dest taken at taken: besides gates, that
// snapshot must show every write of owner's application to dest (a write
// to another swarm never shows in it: a moved release waited for good). Only that application
// writes what its records prove its own; a snapshot that missed one may
// show its revision and not its services (see
// TestPruneWaitsForASnapshotThatSawTheReleasesServices).
func (c *Controller) releaseGates(dest string, owner stack.Owner, taken time.Time) prune.Gates {
	g := c.gates(owner.Application, owner.Release)
	if !c.live.seen(dest, owner.Application, taken, false) {
		g.WritesUnseen = []string{owner.Application}
	}
	return g
}

// pruneReleases removes releases nobody declares any more: those of
// applications that left the app set (only with Options.PruneApplications)
// and those an application stopped declaring (its syncPolicy.prune). It
// proves each deletion with the owner's recorded revisions, and removes the
// revisions last, once nothing else of the release is left.
func (c *Controller) pruneReleases(ctx context.Context, d *destination) {
	if d.live == nil {
		return
	}
	// Nothing is pruned on a swarm that is not fully observed: a failed
	// list shows nothing of what still runs there.
	snap := d.live.Current()
	if snap.ReadFailed() {
		return
	}
	for _, owner := range syncpass.RecordedOwners(d.owner, snap) {
		v := c.pruneVerdictOf(d.name, snap.TakenAt(), owner)
		if v.held != nil {
			c.log.Warn("prune held", "app", owner.Application, "release", owner.Release, "swarm", d.name, "err", v.held)
		}
		if v.declared || v.kept != "" {
			continue
		}
		c.pruneRelease(ctx, owner, d, snap, v.why)
	}
}

// pruneVerdict is what pruneReleases does with one release on one swarm,
// and what Orphans says of it.
type pruneVerdict struct {
	// declared: an application declares it there; it is no orphan.
	declared bool
	// kept says why an orphan stays; "" when it goes at this check.
	kept string
	// held is the safety gates' answer when they are what keeps it.
	held error
	// why says, for a release that goes, what made it go ("" when it simply
	// left the app set or its application).
	why string
}

// pruneVerdictOf decides for owner's release on swarm dest, whose live
// snapshot the prune reads was taken at taken. It reads only the app set,
// the statuses and the live snapshots in memory.
func (c *Controller) pruneVerdictOf(dest string, taken time.Time, owner stack.Owner) pruneVerdict {
	snap := c.watcher.Current()
	set := snap.Set
	app, inSet := set.Lookup(owner.Application)
	here := inSet && app.Destination.Swarm == dest
	moved := inSet && !here
	switch {
	case here && app.Release == owner.Release,
		here && syncpass.PreviewName(app.Release).MatchString(owner.Release), // its application's worker keeps or removes it
		here && c.declaresRelease(app.Name, owner.Release),
		!inSet && declares(set, dest, owner.Release): // renamed: the new application re-stamps what it keeps
		return pruneVerdict{declared: true}
	case set == nil && snap.Err == nil:
		return pruneVerdict{kept: "app set not loaded yet; nothing pruned"}
	case snap.Err != nil:
		// A kept earlier set still declares its releases; only what it does
		// not declare is here, and none of it is pruned.
		return pruneVerdict{kept: fmt.Sprintf("app set not loaded: %v; nothing pruned", snap.Err)}
	case set.Len() == 0:
		return pruneVerdict{kept: "app set is empty; pruning held"}
	case !inSet && !c.pruneApps && c.goneFrom(owner.Application) == "":
		return pruneVerdict{kept: "application left the app set; kept: the controller runs without --prune"}
	case moved && !app.SyncPolicy.Prune:
		return pruneVerdict{kept: fmt.Sprintf("application moved to %s; kept: its syncPolicy.prune is off", swarm.Describe(app.Destination.Swarm))}
	case inSet && !app.SyncPolicy.Prune:
		return pruneVerdict{kept: "no longer declared by its application; kept: its syncPolicy.prune is off"}
	case moved && app.Release == owner.Release && !recordedOn(c.dests[app.Destination.Swarm], owner):
		// The sync that installs it at its new swarm must still find it
		// here, to say where it moved from (movedFrom).
		return pruneVerdict{kept: fmt.Sprintf("application moved to %s; kept until the move is synced there", swarm.Describe(app.Destination.Swarm))}
	}
	if err := prune.Allowed(c.releaseGates(dest, owner, taken)); err != nil {
		return pruneVerdict{kept: strings.ReplaceAll(err.Error(), "\n", "; "), held: err}
	}
	v := pruneVerdict{}
	if moved {
		v.why = fmt.Sprintf("moved to %s", swarm.Describe(app.Destination.Swarm))
	}
	if gen := c.goneFrom(owner.Application); !inSet && gen != "" {
		v.why = fmt.Sprintf("its directory left generator %s", gen)
	}
	return v
}

// recordedOn says whether d's snapshot holds a revision this controller
// recorded of owner's application and release; a nil d (no such
// destination) holds none.
func recordedOn(d *destination, owner stack.Owner) bool {
	if d == nil || d.live == nil {
		return false
	}
	for _, o := range syncpass.RecordedOwners(d.owner, d.live.Current()) {
		if o.Application == owner.Application && o.Release == owner.Release {
			return true
		}
	}
	return false
}

// pruneRelease deletes what owner's recorded revisions prove it created in
// a release nobody declares any more, then, once nothing of the release is
// left but its records, the records themselves.
func (c *Controller) pruneRelease(ctx context.Context, owner stack.Owner, d *destination, snap swarm.Snapshot, why string) {
	engine := d.engine
	revs, err := apply.Revisions(ctx, engine, owner)
	if err != nil || len(revs) == 0 {
		return
	}
	p := prune.Orphans(prune.Input{Owner: owner, Live: syncpass.LiveObjects(snap), Recorded: syncpass.Records(revs),
		Applications: c.appNames(), OwnStack: c.ownStack, PruneVolumes: false})
	c.status.Update(owner.Application, func(s *AppStatus) { c.setUnmanaged(s, owner.Release, syncpass.Unmanaged(p)) })
	// Hook jobs are no part of the revisions, yet their tasks hold the
	// release's networks: the finished ones go first, and the records that
	// prove the release ours stay while one still runs.
	running, err := hook.RemoveFinished(ctx, engine, owner, c.log)
	if err != nil || running > 0 {
		c.log.Warn("hook jobs of pruned release still there", "app", owner.Application, "release", owner.Release, "running", running, "err", err)
	}
	res := syncpass.Prune(ctx, d.env, owner.Application, revs[len(revs)-1].Commit, p, why)
	if err != nil || running > 0 {
		return
	}
	if res.Err() != nil {
		return
	}
	for _, it := range p.Items {
		switch {
		case it.Decision == prune.Delete, it.Decision == prune.Unmanaged, isRevision(it.Object), it.Object.Kind == prune.KindVolume:
		default:
			return // something of ours is still there: keep the proof until it is gone
		}
	}
	if err := apply.ForgetRelease(ctx, engine, owner); err != nil {
		c.log.Warn("revisions of pruned release not removed", "app", owner.Application, "release", owner.Release, "err", err)
		return
	}
	c.status.AddPruned(owner.Application)
	c.log.Warn("release pruned", "app", owner.Application, "release", owner.Release)
}

// declares reports whether an application of set deploys release on the
// swarm called dest.
func declares(set *appset.Set, dest, release string) bool {
	for _, a := range set.Applications() {
		if a.Release == release && a.Destination.Swarm == dest {
			return true
		}
	}
	return false
}

// isRevision reports whether o is one of Skep's records (a revision or a
// hold), which go last, with ForgetRelease.
func isRevision(o prune.Object) bool { return o.Labels[stack.LabelKind] != "" }

// appNames lists the running app set's application names: prune spares what
// a still-declared application owns.
func (c *Controller) appNames() []string {
	var names []string
	for _, a := range c.watcher.Current().Set.Applications() {
		names = append(names, a.Name)
	}
	return names
}

// goneFrom returns the generator of app when app is a generated
// application with prune on that left the set, or "".
func (c *Controller) goneFrom(app string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.goneGenerated[app]
}

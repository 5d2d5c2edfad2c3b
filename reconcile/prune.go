package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/hook"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/prune"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
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
// and all, on a live snapshot taken at taken: besides gates, that snapshot
// must show every write of owner's application. Only that application
// writes what its records prove its own; a snapshot that missed one may
// show its revision and not its services (see
// TestPruneWaitsForASnapshotThatSawTheReleasesServices).
func (c *Controller) releaseGates(owner stack.Owner, taken time.Time) prune.Gates {
	g := c.gates(owner.Application, owner.Release)
	if c.writeUnseen(owner.Application, taken) {
		g.WritesUnseen = []string{owner.Application}
	}
	return g
}

// restamp moves objects of release that a renamed application left behind
// to app, in place, before anything is applied.
func (c *Controller) restamp(ctx context.Context, app appset.Application, snap swarm.Snapshot) error {
	p := prune.Orphans(prune.Input{Owner: c.owner(app), Live: liveObjects(snap), Applications: c.appNames(),
		Declared: stack.Release{Name: app.Release}, OwnStack: c.ownStack})
	// Networks and volumes cannot be re-labelled; apply accepts them as the
	// release's own (see apply's network check), so only the rest moves.
	p.Items = slices.DeleteFunc(p.Items, func(it prune.Item) bool {
		return it.Object.Kind == prune.KindNetwork || it.Object.Kind == prune.KindVolume
	})
	if len(p.Select(prune.Restamp)) == 0 {
		return nil
	}
	res := prune.Relabel(ctx, c.engineOf(app), p)
	if err := res.Err(); err != nil {
		c.log.Warn("restamp incomplete", "app", app.Name, "release", app.Release, "err", err)
	}
	return nil
}

// pruneResources deletes what a still-declared release stopped declaring
// and this controller provably created (syncPolicy.pruneResources, or a
// sync that asked for prune).
func (c *Controller) pruneResources(ctx context.Context, app appset.Application, d desired, req Request) {
	enabled := app.SyncPolicy.PruneResources
	if req.Prune != nil {
		enabled = *req.Prune
	}
	if !enabled || c.liveOf(app) == nil {
		return
	}
	// Unlike a whole release's (releaseGates), this prune may read a
	// snapshot behind the application's own write: what it misses is
	// declared, and the records stay.
	if err := prune.Allowed(c.gates(app.Name, app.Release)); err != nil {
		c.log.Warn("prune held", "app", app.Name, "release", app.Release, "err", err)
		return
	}
	owner := c.owner(app)
	revs, err := apply.Revisions(ctx, c.revisionSource(app), owner)
	if err != nil {
		c.log.Warn("prune skipped: revisions unreadable", "app", app.Name, "err", err)
		return
	}
	p := prune.Orphans(prune.Input{
		Owner: owner, Declared: d.release, Live: liveObjects(c.liveOf(app).Current()), Recorded: records(revs),
		Applications: c.appNames(), OwnStack: c.ownStack, PruneVolumes: app.SyncPolicy.PruneVolumes,
	})
	c.reportUnmanaged(app.Name, p)
	c.execute(ctx, app.Name, app.Destination.Swarm, d.commit, p, "")
}

// reportUnmanaged records, and logs once per change, what sits in a
// release's namespace without this application's proof of ownership.
func (c *Controller) reportUnmanaged(app string, p prune.Plan) {
	var unmanaged []string
	for _, it := range p.Select(prune.Unmanaged) {
		unmanaged = append(unmanaged, fmt.Sprintf("%s %s (%s)", it.Object.Kind, it.Object.Name, it.Reason))
	}
	c.status.Update(app, func(s *AppStatus) {
		if !slices.Equal(s.Unmanaged, unmanaged) && len(unmanaged) > 0 {
			c.log.Warn("unmanaged objects in release namespace", "app", app, "release", p.Owner.Release, "objects", unmanaged)
		}
		s.Unmanaged = unmanaged
	})
}

// execute deletes what p proves orphaned and raises resources-pruned or
// prune-failed. A failed deletion is retried on the next tick.
func (c *Controller) execute(ctx context.Context, app, swarmName, commit string, p prune.Plan, why string) prune.Result {
	if len(p.Deletions()) == 0 {
		return prune.Result{}
	}
	defer c.beginWrite(app)()
	if swarmName == "" && c.self.ServiceID != "" {
		p = p.Protect(prune.KindService, c.self.ServiceID, "the controller's own service is never pruned")
	}
	res := prune.Execute(ctx, c.dest(swarmName).engine, p)
	if len(res.Gone) > 0 {
		// Only what this prune deleted is told: a second prune on a snapshot
		// that still shows the first one's deletions finds them gone.
		c.log.Debug("prune found objects gone already", "app", app, "objects", describeObjects(res.Gone))
	}
	ev := notify.Event{Application: app, Revision: commit, Swarm: swarmName, Actor: notify.ActorFrom(ctx), At: c.now()}
	if len(res.Deleted) > 0 {
		ev.Type, ev.Message = notify.ResourcesPruned, "deleted "+describeObjects(res.Deleted)
		if why != "" {
			ev.Message = why + ": " + ev.Message
		}
		c.notifier.Dispatch(ctx, ev)
	}
	if err := res.Err(); err != nil {
		ev.Type, ev.Message = notify.PruneFailed, err.Error()
		c.notifier.Dispatch(ctx, ev)
	}
	return res
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
	for _, owner := range c.recordedOwners(d, snap) {
		v := c.pruneVerdictOf(d.name, snap.TakenAt(), owner)
		if v.held != nil {
			c.log.Warn("prune held", "app", owner.Application, "release", owner.Release, "swarm", d.name, "err", v.held)
		}
		if v.declared || v.kept != "" {
			continue
		}
		c.pruneRelease(ctx, owner, d.name, snap, v.why)
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
		here && previewName(app.Release).MatchString(owner.Release), // its application's worker keeps or removes it
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
	case !inSet && !c.pruneApps && c.generatorGone(owner.Application) == "":
		return pruneVerdict{kept: "application left the app set; kept: the controller runs without --prune"}
	case moved && !app.SyncPolicy.Prune:
		return pruneVerdict{kept: fmt.Sprintf("application moved to %s; kept: its syncPolicy.prune is off", swarm.Describe(app.Destination.Swarm))}
	case inSet && !app.SyncPolicy.Prune:
		return pruneVerdict{kept: "no longer declared by its application; kept: its syncPolicy.prune is off"}
	case moved && app.Release == owner.Release && !c.recordedOn(app.Destination.Swarm, owner):
		// The sync that installs it at its new swarm must still find it
		// here, to say where it moved from (movedFrom).
		return pruneVerdict{kept: fmt.Sprintf("application moved to %s; kept until the move is synced there", swarm.Describe(app.Destination.Swarm))}
	}
	if err := prune.Allowed(c.releaseGates(owner, taken)); err != nil {
		return pruneVerdict{kept: strings.ReplaceAll(err.Error(), "\n", "; "), held: err}
	}
	v := pruneVerdict{}
	if moved {
		v.why = fmt.Sprintf("moved to %s", swarm.Describe(app.Destination.Swarm))
	}
	if gen := c.generatorGone(owner.Application); !inSet && gen != "" {
		v.why = fmt.Sprintf("its directory left generator %s", gen)
	}
	return v
}

// recordedOn says whether swarmName's snapshot holds a revision this
// controller recorded of owner's application and release.
func (c *Controller) recordedOn(swarmName string, owner stack.Owner) bool {
	d := c.dests[swarmName]
	if d == nil || d.live == nil {
		return false
	}
	for _, o := range c.recordedOwners(d, d.live.Current()) {
		if o.Application == owner.Application && o.Release == owner.Release {
			return true
		}
	}
	return false
}

// recordedOwners lists the (application, release) pairs this controller has
// recorded revisions for on d.
func (c *Controller) recordedOwners(d *destination, snap swarm.Snapshot) []stack.Owner {
	seen := map[stack.Owner]bool{}
	var out []stack.Owner
	for _, cfg := range snap.Configs() {
		l := cfg.Spec.Labels
		if l[stack.LabelKind] == "" || l[stack.LabelController] != d.owner {
			continue
		}
		o := stack.Owner{Controller: d.owner, Application: l[stack.LabelApplication], Release: l[stack.LabelRelease]}
		if o.Application != "" && o.Release != "" && !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	return out
}

// pruneRelease deletes what owner's recorded revisions prove it created in
// a release nobody declares any more, then, once nothing of the release is
// left but its records, the records themselves.
func (c *Controller) pruneRelease(ctx context.Context, owner stack.Owner, swarmName string, snap swarm.Snapshot, why string) {
	engine := c.dest(swarmName).engine
	revs, err := apply.Revisions(ctx, engine, owner)
	if err != nil || len(revs) == 0 {
		return
	}
	p := prune.Orphans(prune.Input{Owner: owner, Live: liveObjects(snap), Recorded: records(revs),
		Applications: c.appNames(), OwnStack: c.ownStack, PruneVolumes: false})
	c.reportUnmanaged(owner.Application, p)
	// Hook jobs are no part of the revisions, yet their tasks hold the
	// release's networks: the finished ones go first, and the records that
	// prove the release ours stay while one still runs.
	running, err := hook.RemoveFinished(ctx, engine, owner, c.log)
	if err != nil || running > 0 {
		c.log.Warn("hook jobs of pruned release still there", "app", owner.Application, "release", owner.Release, "running", running, "err", err)
	}
	res := c.execute(ctx, owner.Application, swarmName, revs[len(revs)-1].Commit, p, why)
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

// records turns recorded revisions into what prune proves ownership with.
func records(revs []apply.Revision) []prune.Record {
	out := make([]prune.Record, 0, len(revs))
	for _, r := range revs {
		out = append(out, prune.Record{Application: r.Application, Release: r.Release})
	}
	return out
}

// liveObjects lists the snapshot's objects for prune.
func liveObjects(snap swarm.Snapshot) []prune.Object {
	return prune.LiveObjects(snap.Services(), snap.Networks(), snap.Configs(), snap.Secrets(), snap.Volumes())
}

// describeObjects names what a prune touched: "service web_api, config web_x".
func describeObjects(objs []prune.Object) string {
	parts := make([]string, 0, len(objs))
	for _, o := range objs {
		parts = append(parts, string(o.Kind)+" "+o.Name)
	}
	return strings.Join(parts, ", ")
}

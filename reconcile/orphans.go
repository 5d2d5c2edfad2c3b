package reconcile

import (
	"cmp"
	"slices"
	"time"

	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// Orphan is a release of this controller that is deployed in a swarm while
// no application of the loaded app set declares it there, and why it is
// still there.
type Orphan struct {
	Application string
	Release     string
	// Swarm is the destination holding it; "" is the local swarm.
	Swarm string
	// Reason says why it was not pruned: the app set is not loaded or is
	// empty, the controller runs without --prune, the application's
	// syncPolicy.prune is off, or a safety gate holds pruning.
	Reason string
}

// Orphans lists, sorted by application, release and swarm, the releases of
// this controller that the live swarms hold and no loaded application
// declares there. It reads each destination's live snapshot and the app set
// in memory and makes no Docker call; a swarm without a readable snapshot
// adds none. An app set that failed to load, or is empty, leaves every
// release in place: each is listed with that reason (see
// TestOrphansSayWhyNothingWasPruned).
func (c *Controller) Orphans() []Orphan {
	var out []Orphan
	for _, name := range destNames(c.dests) {
		d := c.dests[name]
		if d.live == nil {
			continue
		}
		snap := d.live.Current()
		if snap.ReadFailed() {
			continue
		}
		out = append(out, c.orphansOf(name, snap.TakenAt(), liveOwners(d.owner, snap))...)
	}
	sortOrphans(out)
	return out
}

// liveOwners lists the (application, release) pairs whose revisions or
// services in snap carry the controller label owner. Services count too: a
// release whose revisions were removed by hand is still deployed.
func liveOwners(owner string, snap swarm.Snapshot) []stack.Owner {
	var labels []map[string]string
	for _, cfg := range snap.Configs() {
		if cfg.Spec.Labels[stack.LabelKind] != "" {
			labels = append(labels, cfg.Spec.Labels)
		}
	}
	for _, s := range snap.Services() {
		labels = append(labels, s.Spec.Labels)
	}
	var out []stack.Owner
	for _, l := range labels {
		o := stack.Owner{Controller: owner, Application: l[stack.LabelApplication], Release: l[stack.LabelRelease]}
		if l[stack.LabelController] == owner && o.Application != "" && o.Release != "" && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// orphansOf keeps the owners on destination dest that no loaded
// application declares there, with the reason each stays, sorted. It asks
// pruneVerdictOf, as pruneReleases does, so what it lists is what that
// leaves alone; taken is when dest's live snapshot was taken.
func (c *Controller) orphansOf(dest string, taken time.Time, owners []stack.Owner) []Orphan {
	var out []Orphan
	for _, owner := range owners {
		v := c.pruneVerdictOf(dest, taken, owner)
		if v.declared {
			continue
		}
		reason := v.kept
		if reason == "" {
			reason = "to be pruned at the next check"
		}
		out = append(out, Orphan{Application: owner.Application, Release: owner.Release, Swarm: dest, Reason: reason})
	}
	sortOrphans(out)
	return out
}

// sortOrphans orders list by application, release and swarm.
func sortOrphans(list []Orphan) {
	slices.SortFunc(list, func(a, b Orphan) int {
		return cmp.Or(cmp.Compare(a.Application, b.Application), cmp.Compare(a.Release, b.Release), cmp.Compare(a.Swarm, b.Swarm))
	})
}

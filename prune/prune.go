// Package prune deletes what git stopped declaring and this controller
// provably created, and nothing else.
//
// Deciding is pure: Orphans takes the live objects of one release's
// namespace, what the release declares now and what its recorded revisions
// say Skep created, and returns a Plan; Allowed checks the safety gates.
// Only Execute and Relabel write: Execute deletes what a Plan marks Delete,
// Relabel re-labels in place what it marks Restamp (a renamed application).
//
// An object is deleted only with the full proof (see Orphans): its labels
// name this controller, this application and this release, a recorded
// revision of this owner lists it, git no longer declares it, it is not
// Skep's own bookkeeping (revision and hold configs), not in the
// controller's own stack, and, for a volume, volume pruning is on. Everything else in the
// namespace is Unmanaged (reported, never touched) or kept.
// TestOrphansNeverDeleteWithoutFullProof checks random mixes of objects.
//
// It must never delete on a guess: a missing label, a revision that could
// not be read or an app set that did not load all mean "keep". Which of
// the three prune scopes (application left, release dropped, resource
// dropped) applies is the caller's policy; this package proves and deletes.
package prune

import (
	"cmp"
	"slices"
	"strings"

	"github.com/skep-cd/skep/stack"
)

// Kind is the type of a swarm object. The zero value is invalid.
type Kind string

// Kinds, in the order Execute deletes them: services first, so the
// networks, configs, secrets and volumes they used are free afterwards.
const (
	KindService Kind = "service"
	KindNetwork Kind = "network"
	KindConfig  Kind = "config"
	KindSecret  Kind = "secret"
	KindVolume  Kind = "volume"
)

// kindOrder ranks kinds for sortItems: delete order, see the Kinds.
var kindOrder = map[Kind]int{KindService: 1, KindNetwork: 2, KindConfig: 3, KindSecret: 4, KindVolume: 5}

// Object is one live swarm object as prune sees it. ID is what Execute
// deletes by (a volume's ID is its name); Labels are the object's own
// labels (a service's spec labels, not its containers').
type Object struct {
	Kind   Kind              `json:"kind"`
	ID     string            `json:"id"`
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

// Decision is what prune does with one object. The zero value is invalid.
type Decision string

const (
	// Delete: the full ownership proof holds and git no longer declares it.
	Delete Decision = "delete"
	// Keep: Skep's, and still wanted (declared, revision history, a volume
	// without volume pruning, the controller's own stack).
	Keep Decision = "keep"
	// Unmanaged: in the namespace but not provably Skep's: reported, never
	// touched.
	Unmanaged Decision = "unmanaged"
	// Restamp: created by this controller for an application that left the
	// app set, for the release the owner's application now declares (a
	// renamed application). The object is to be re-labelled, not deleted.
	Restamp Decision = "restamp"
)

// Item is the decision about one object, with why in words.
type Item struct {
	Object   Object   `json:"object"`
	Decision Decision `json:"decision"`
	Reason   string   `json:"reason"`
}

// Plan is the decision about every object of one release's namespace, by
// kind (in delete order) then name. Owner is who asked; Execute deletes
// only objects whose labels name it.
type Plan struct {
	Owner stack.Owner `json:"owner"`
	Items []Item      `json:"items"`
}

// Select returns the items with decision d, in plan order, as a new slice.
func (p Plan) Select(d Decision) []Item {
	var out []Item
	for _, it := range p.Items {
		if it.Decision == d {
			out = append(out, it)
		}
	}
	return out
}

// Protect returns a copy of p that keeps the object of kind and id,
// whatever p decided, with why as the reason: what must never be deleted
// (the controller's own service) stays even in a plan that proves it
// orphaned.
func (p Plan) Protect(kind Kind, id, why string) Plan {
	out := Plan{Owner: p.Owner, Items: slices.Clone(p.Items)}
	for i, it := range out.Items {
		if it.Object.Kind == kind && it.Object.ID == id && it.Decision == Delete {
			out.Items[i].Decision, out.Items[i].Reason = Keep, why
		}
	}
	return out
}

// Deletions returns the objects the plan deletes, in delete order.
func (p Plan) Deletions() []Object {
	var out []Object
	for _, it := range p.Select(Delete) {
		out = append(out, it.Object)
	}
	return out
}

func sortItems(items []Item) {
	slices.SortFunc(items, func(a, b Item) int {
		return cmp.Or(
			cmp.Compare(kindOrder[a.Object.Kind], kindOrder[b.Object.Kind]),
			strings.Compare(a.Object.Name, b.Object.Name),
			strings.Compare(a.Object.ID, b.Object.ID))
	})
}

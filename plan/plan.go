// Package plan compares the Swarm specs git asks for with the ones last
// recorded for a release, and says what would change and why. It also
// compares them with the services running live (Drift), to find changes
// made outside Skep.
//
// It is pure: it takes stack.Release values and returns plain values. It does
// no Docker, git, disk or network I/O, holds no state, and is safe to call
// concurrently. It never decides to delete anything: an object that is no
// longer declared is reported as Delete, and whether it is removed is the
// prune step's decision.
//
// Invariants callers rely on:
//   - Secret payloads never appear in a plan: any byte payload (SecretSpec.Data,
//     ConfigSpec.Data, seccomp profiles) is rendered as a sha256 digest.
//   - Order is deterministic: networks, configs, secrets, then services, each
//     by name; fields in spec order, map and list entries by key.
//   - Representations that Swarm treats alike do not differ: nil and empty
//     maps and lists, env and label order, ids resolved at apply time (see
//     TestCompareIgnoresNormalisedDifferences).
//
// Compare, Fields and Drift share one set of paths and renderings, so a
// recorded-revision diff and a live-drift finding about the same field read
// the same. Drift looks only at DriftFields: a field outside that list is
// one whose Engine default cannot be told from a person's change.
package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/skep-cd/skep/stack"
)

// Action is what a release needs as a whole. The zero value is invalid: it
// means the plan was not computed.
type Action string

const (
	// Install: nothing is recorded for the release, every object is created.
	Install Action = "install"
	// Upgrade: a recorded revision exists and at least one object differs.
	Upgrade Action = "upgrade"
	// Unchanged: the desired specs equal the recorded ones; apply writes nothing.
	Unchanged Action = "unchanged"
)

// Valid reports whether a is one of the named actions.
func (a Action) Valid() bool {
	return a == Install || a == Upgrade || a == Unchanged
}

// Op is what happens to one object. The zero value is invalid.
type Op string

const (
	// Create: declared now, not recorded.
	Create Op = "create"
	// Update: declared and recorded, with differing specs.
	Update Op = "update"
	// Delete: recorded, no longer declared. Only reported here; the prune
	// step decides whether the object is removed.
	Delete Op = "delete"
)

// Kind is the type of a Swarm object in a release. The zero value is invalid.
type Kind string

// Kinds, in the order a plan lists them (and apply creates them).
const (
	KindNetwork Kind = "network"
	KindConfig  Kind = "config"
	KindSecret  Kind = "secret"
	KindService Kind = "service"
)

// kindOrder is the order of kinds in a Summary.
var kindOrder = []Kind{KindNetwork, KindConfig, KindSecret, KindService}

// Options tunes how values are rendered. The zero value shows everything
// except secret payloads, which are never shown.
type Options struct {
	// MaskEnv renders environment values as "***" (keys stay visible), for
	// diffs against live specs whose values do not come from git.
	MaskEnv bool
}

// Release is the plan of one release: its action, why, and each object that
// changes. Objects that are equal are not listed. Changes is never nil for a
// plan made by Compare, so its JSON form is always a list.
type Release struct {
	Name   string `json:"name"`
	Action Action `json:"action"`
	// Reason says in words why: "never deployed", "image and env changed".
	Reason  string   `json:"reason"`
	Changes []Change `json:"changes"`
}

// Change is one object that is created, updated or deleted. Fields is set
// only for Update.
type Change struct {
	Kind   Kind        `json:"kind"`
	Name   string      `json:"name"`
	Op     Op          `json:"op"`
	Reason string      `json:"reason"`
	Fields []FieldDiff `json:"fields,omitempty"`
}

// FieldDiff is one leaf of a spec that differs. Path reads like Go and the
// Engine API's JSON names: TaskTemplate.ContainerSpec.Image, Labels["a"],
// TaskTemplate.ContainerSpec.Env["FOO"], EndpointSpec.Ports["80/tcp"].
// Old and New are rendered values (strings quoted, durations as "10s", byte
// payloads as digests); a side that is absent is "" with Added or Removed set.
type FieldDiff struct {
	Path    string `json:"path"`
	Old     string `json:"old"`
	New     string `json:"new"`
	Added   bool   `json:"added,omitempty"`
	Removed bool   `json:"removed,omitempty"`
}

// Reasons for object-level changes.
const (
	reasonCreate = "new in git"
	reasonDelete = "no longer declared"
)

// Compare plans desired against recorded, the release's last recorded
// revision. A nil recorded means the release was never deployed: the plan
// is Install with every object created. Compare does not modify or retain
// its inputs.
func Compare(desired stack.Release, recorded *stack.Release, opts Options) Release {
	var old stack.Release
	if recorded != nil {
		old = *recorded
	}
	r := Release{Name: desired.Name, Changes: []Change{}}
	r.Changes = append(r.Changes, compareKind(KindNetwork, old.Networks, desired.Networks, opts)...)
	r.Changes = append(r.Changes, compareKind(KindConfig, old.Configs, desired.Configs, opts)...)
	r.Changes = append(r.Changes, compareKind(KindSecret, old.Secrets, desired.Secrets, opts)...)
	r.Changes = append(r.Changes, compareKind(KindService, old.Services, desired.Services, opts)...)
	switch {
	case recorded == nil:
		r.Action, r.Reason = Install, "never deployed"
	case len(r.Changes) == 0:
		r.Action, r.Reason = Unchanged, "matches the recorded revision"
	default:
		r.Action, r.Reason = Upgrade, releaseReason(r.Changes)
	}
	return r
}

// compareKind plans the objects of one kind: recorded only is a Delete,
// desired only a Create, both with differing fields an Update. Changes come
// sorted by name.
func compareKind[S Spec](kind Kind, recorded, desired map[string]S, opts Options) []Change {
	names := slices.Sorted(maps.Keys(desired))
	for name := range recorded {
		if _, ok := desired[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var changes []Change
	for _, name := range names {
		d, declared := desired[name]
		o, known := recorded[name]
		switch {
		case !known:
			changes = append(changes, Change{Kind: kind, Name: name, Op: Create, Reason: reasonCreate})
		case !declared:
			changes = append(changes, Change{Kind: kind, Name: name, Op: Delete, Reason: reasonDelete})
		default:
			if fields := Fields(o, d, opts); len(fields) > 0 {
				changes = append(changes, Change{
					Kind: kind, Name: name, Op: Update, Fields: fields,
					Reason: changedReason(areas(kind, fields)),
				})
			}
		}
	}
	return changes
}

// Changed reports whether applying r would write anything.
func (r Release) Changed() bool {
	return len(r.Changes) > 0
}

// pending words each op as work still to do: a summary is read before
// anything is written (a drift report, a sync about to start).
var pending = map[Op]string{Create: "to create", Update: "to update", Delete: "to delete"}

// Summary is a one-line account of what applying r would change, such as
// "upgrade web: 1 service to update (image), 1 config to create". It never
// reads as done: it is shown before the write (see
// TestSummarySaysWhatWouldChange).
func (r Release) Summary() string {
	var parts []string
	for _, op := range []Op{Update, Create, Delete} {
		for _, kind := range kindOrder {
			n := 0
			var touched []string
			for _, c := range r.Changes {
				if c.Op == op && c.Kind == kind {
					n++
					touched = appendNew(touched, areas(kind, c.Fields)...)
				}
			}
			if n == 0 {
				continue
			}
			noun := string(kind)
			if n > 1 {
				noun += "s"
			}
			part := fmt.Sprintf("%d %s %s", n, noun, pending[op])
			if len(touched) > 0 {
				part += " (" + listAreas(touched) + ")"
			}
			parts = append(parts, part)
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%s %s", r.Action, r.Name)
	}
	return fmt.Sprintf("%s %s: %s", r.Action, r.Name, strings.Join(parts, ", "))
}

// releaseReason names what changed across a release: the areas of updated
// services, then those of other objects qualified by kind ("secret data"),
// or else how many objects come and go.
func releaseReason(changes []Change) string {
	var touched, others []string
	created, deleted := 0, 0
	for _, c := range changes {
		switch c.Op {
		case Update:
			if c.Kind == KindService {
				touched = appendNew(touched, areas(c.Kind, c.Fields)...)
				continue
			}
			for _, a := range areas(c.Kind, c.Fields) {
				others = appendNew(others, string(c.Kind)+" "+a)
			}
		case Create:
			created++
		case Delete:
			deleted++
		}
	}
	if touched = append(touched, others...); len(touched) > 0 {
		return changedReason(touched)
	}
	var parts []string
	if created > 0 {
		parts = append(parts, countObjects(created)+" created")
	}
	if deleted > 0 {
		parts = append(parts, countObjects(deleted)+" no longer declared")
	}
	return strings.Join(parts, ", ")
}

// countObjects is "1 object" or "n objects".
func countObjects(n int) string {
	if n == 1 {
		return "1 object"
	}
	return fmt.Sprintf("%d objects", n)
}

// appendNew appends the items not in list yet, keeping first-seen order.
func appendNew(list []string, items ...string) []string {
	for _, item := range items {
		if !slices.Contains(list, item) {
			list = append(list, item)
		}
	}
	return list
}

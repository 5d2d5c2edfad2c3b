package wire

// ReleasePlan is what a sync of one release would change: the API's form of
// the controller's plan. Action is install, upgrade, none or delete.
type ReleasePlan struct {
	Name    string       `json:"name"`
	Action  string       `json:"action"`
	Reason  string       `json:"reason"`
	Changes []PlanChange `json:"changes"`
	// Unplaceable says, one line per service, what no node of the swarm
	// satisfies (constraints, platforms, reservations,
	// max_replicas_per_node): a sync is refused before any write unless
	// the application allows it. Absent when every service can be placed.
	Unplaceable []string `json:"unplaceable,omitempty"`
}

// PlanChange is one object a sync would create, update or delete. Fields is
// set only for updates; secrets appear as digests, never as values.
type PlanChange struct {
	Kind   string      `json:"kind"`
	Name   string      `json:"name"`
	Op     string      `json:"op"`
	Reason string      `json:"reason"`
	Fields []FieldDiff `json:"fields,omitempty"`
}

// FieldDiff is one leaf of a spec that differs, by its Engine API path
// (TaskTemplate.ContainerSpec.Image). A side that is absent is "" with
// Added or Removed set.
type FieldDiff struct {
	Path    string `json:"path"`
	Old     string `json:"old"`
	New     string `json:"new"`
	Added   bool   `json:"added,omitempty"`
	Removed bool   `json:"removed,omitempty"`
}

package wire

import "time"

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

// PlanRequest is the body of POST /api/v1/applications/{name}/plan.
type PlanRequest struct {
	// Revision is a branch, tag, commit or pull request ref
	// (refs/pull/7/head) of the application's repository.
	Revision string `json:"revision"`
}

// Proposal is the plan of one application at a revision nobody deployed
// yet, as merging it would deploy it, against what the swarm runs: the
// body of POST /api/v1/applications/{name}/plan, and each application's
// plan of a pull request.
type Proposal struct {
	Application string `json:"application"`
	// Revision is the commit planned; "" when the revision did not resolve.
	Revision string `json:"revision"`
	// Sealed says SOPS-encrypted values were not decrypted (a fork's pull
	// request): each shows as changed when its ciphertext changed.
	Sealed bool `json:"sealed,omitempty"`
	// Changes counts the objects that would be created, updated or
	// deleted, over every release.
	Changes int `json:"changes"`
	// Error is the first release's error, "file:line: …" where the input
	// says where; "" when every release planned.
	Error    string            `json:"error,omitempty"`
	Releases []ProposedRelease `json:"releases"`
}

// ProposedRelease is one release of a Proposal: its plan, or Error when it
// does not resolve, render, validate or place.
type ProposedRelease struct {
	ReleasePlan
	Error string `json:"error,omitempty"`
}

// PullRequest is one open pull request as the controller planned it.
type PullRequest struct {
	// Provider is the webhook provider it came from; Repository the base
	// repository as that forge names it; Number its number there.
	Provider   string `json:"provider"`
	Repository string `json:"repository"`
	Number     int64  `json:"number"`
	Title      string `json:"title,omitempty"`
	URL        string `json:"url,omitempty"`
	// Base is the branch it merges into, Branch the one it comes from.
	Base   string `json:"base"`
	Branch string `json:"branch,omitempty"`
	// Head is the commit at its head, as its last event named it.
	Head string `json:"head"`
	Fork bool   `json:"fork,omitempty"`
	// State is queued (its head waits to be planned) or planned.
	State string `json:"state"`
	// PlannedAt is when Plan was made; absent while queued.
	PlannedAt *time.Time `json:"plannedAt,omitempty"`
	// Plan is the application's plan at the head last planned.
	Plan *Proposal `json:"plan,omitempty"`
}

// The states of a PullRequest.
const (
	PullQueued  = "queued"
	PullPlanned = "planned"
)

// PullRequestList is the body of GET /api/v1/applications/{name}/pulls:
// the open pull requests that change the application, newest first.
type PullRequestList struct {
	Application  string        `json:"application"`
	PullRequests []PullRequest `json:"pullRequests"`
}

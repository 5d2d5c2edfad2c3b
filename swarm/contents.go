package swarm

import (
	"slices"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/volume"
)

// Contents is what a Snapshot holds, for NewSnapshot: a swarm as a
// fixture, without a Watcher. The zero value is an empty swarm read at
// the zero instant.
type Contents struct {
	Services []swarm.Service
	Tasks    []swarm.Task
	Networks []network.Summary
	Configs  []swarm.Config
	Secrets  []swarm.Secret
	Nodes    []swarm.Node
	Volumes  []volume.Volume
	// TakenAt is when the read began; TasksAt when the tasks were listed
	// (zero: TakenAt). Err is the read's error, nil for one that succeeded.
	TakenAt time.Time
	TasksAt time.Time
	Err     error
	// Version numbers the snapshot (see Snapshot.Version).
	Version uint64
}

// NewSnapshot returns the Snapshot holding c, as a Watcher would have
// taken it: what the steps that read one (health, drift, the quiet key)
// are tested with. The slices are copied.
func NewSnapshot(c Contents) Snapshot {
	return Snapshot{
		services: slices.Clone(c.Services),
		tasks:    slices.Clone(c.Tasks),
		networks: slices.Clone(c.Networks),
		configs:  slices.Clone(c.Configs),
		secrets:  slices.Clone(c.Secrets),
		nodes:    slices.Clone(c.Nodes),
		volumes:  slices.Clone(c.Volumes),
		takenAt:  c.TakenAt,
		tasksAt:  cmpTime(c.TasksAt, c.TakenAt),
		err:      c.Err,
		version:  c.Version,
		idx:      &index{},
	}
}

// cmpTime is t, or or when t is zero.
func cmpTime(t, or time.Time) time.Time {
	if t.IsZero() {
		return or
	}
	return t
}

package syncpass

import (
	"context"
	"fmt"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// compare plans rel, owner's desired release, against its last recorded
// revision (the "git moved" half of drift), which it returns with the
// revision configs it skipped because they do not decode. The records are
// read through v when it can stand in for the Engine.
func compare(ctx context.Context, env Env, v view, owner stack.Owner, rel stack.Release) (plan.Release, apply.Latest, error) {
	latest, err := apply.ReadLatest(ctx, revisionSource(env, v), owner)
	if err != nil {
		return plan.Release{}, apply.Latest{}, &outcome.TransientError{Err: fmt.Errorf("read recorded revision of %s: %w", owner.Release, err)}
	}
	var before *stack.Release
	if latest.Revision != nil {
		before = &latest.Revision.Release
	}
	return plan.Compare(apply.RedactSecrets(rel), before, plan.Options{}), latest, nil
}

// snapshotConfigs serves apply's revision reads from the live snapshot, so
// that a no-op tick makes no Engine call of its own. apply checks the
// labels of every config itself, so the filters can be ignored here.
type snapshotConfigs struct{ snap swarm.Snapshot }

func (s snapshotConfigs) ConfigList(context.Context, dswarm.ConfigListOptions) ([]dswarm.Config, error) {
	return s.snap.Configs(), nil
}

// revisionSource is where recorded revisions are read: v's snapshot when
// it is readable and has seen the application's last write (a write it
// has not seen would read as a stale revision), the Engine otherwise.
func revisionSource(env Env, v view) apply.ConfigLister {
	if !v.readable() {
		return env.Engine
	}
	return snapshotConfigs{snap: v.snap}
}

package apply

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/stack"
)

// ForceUpdate restarts every task of the service called name under its
// own update_config, as `docker service update --force` does: the spec is
// kept and only its ForceUpdate counter moves, so Swarm's scheduler places
// each replacement task afresh (on the emptiest eligible node). It writes
// only a service owner's labels name (controller and release), read anew
// from the Engine so that a concurrent write is not undone; anything else
// is refused, stalled.
func ForceUpdate(ctx context.Context, eng ServiceWriter, owner stack.Owner, name string) error {
	cur, _, err := eng.ServiceInspectWithRaw(ctx, name, swarm.ServiceInspectOptions{})
	if err != nil {
		return engineError(fmt.Sprintf("inspect service %s", name), err)
	}
	if !ownsRelease(owner, cur.Spec.Labels) {
		return stalled("service %s: not of release %s of controller %s; nothing is restarted", name, owner.Release, owner.Controller)
	}
	spec := cur.Spec
	spec.TaskTemplate.ForceUpdate++
	if _, err := eng.ServiceUpdate(ctx, cur.ID, cur.Version, spec, swarm.ServiceUpdateOptions{}); err != nil {
		return engineError(fmt.Sprintf("restart the tasks of service %s", name), err)
	}
	return nil
}

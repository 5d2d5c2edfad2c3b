package apply

import (
	"context"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/stack"
)

// deleteRotated deletes this owner's configs and secrets that the release
// no longer declares and no service uses: the old content-hashed versions
// left behind when a config or secret changed. A service's previous spec
// counts as a use, so Swarm can still roll back to it; the version before
// that goes on the next change. Revision configs and objects without this
// owner's labels are never touched. Failures are logged, not returned: the
// next apply tries again.
func (a *applier) deleteRotated(ctx context.Context) {
	services, err := a.eng.ServiceList(ctx, swarm.ServiceListOptions{})
	if err != nil {
		a.log.WarnContext(ctx, "rotated configs and secrets kept: services not listed", "err", err)
		return
	}
	used := make(map[string]bool)
	for _, s := range services {
		for _, spec := range []*swarm.ServiceSpec{&s.Spec, s.PreviousSpec} {
			if spec == nil || spec.TaskTemplate.ContainerSpec == nil {
				continue
			}
			for _, r := range spec.TaskTemplate.ContainerSpec.Configs {
				if r != nil {
					used[r.ConfigID] = true
				}
			}
			for _, r := range spec.TaskTemplate.ContainerSpec.Secrets {
				if r != nil {
					used[r.SecretID] = true
				}
			}
		}
	}
	owner := a.opts.Owner
	configs, err := a.eng.ConfigList(ctx, swarm.ConfigListOptions{Filters: ownerFilters(owner)})
	if err != nil {
		a.log.WarnContext(ctx, "rotated configs kept: configs not listed", "err", err)
	}
	// A kind label marks bookkeeping (revisions, holds), which is never
	// rotated.
	for _, c := range configs {
		_, wanted := a.rel.Configs[c.Spec.Name]
		if wanted || used[c.ID] || !owner.Owns(c.Spec.Labels) || c.Spec.Labels[stack.LabelKind] != "" {
			continue
		}
		a.remove(ctx, KindConfig, c.ID, c.Spec.Name, a.eng.ConfigRemove)
	}
	secrets, err := a.eng.SecretList(ctx, swarm.SecretListOptions{Filters: ownerFilters(owner)})
	if err != nil {
		a.log.WarnContext(ctx, "rotated secrets kept: secrets not listed", "err", err)
	}
	for _, s := range secrets {
		_, wanted := a.rel.Secrets[s.Spec.Name]
		if wanted || used[s.ID] || !owner.Owns(s.Spec.Labels) || s.Spec.Labels[stack.LabelKind] != "" {
			continue
		}
		a.remove(ctx, KindSecret, s.ID, s.Spec.Name, a.eng.SecretRemove)
	}
}

// remove deletes one rotated config or secret with the given Engine call
// and records it, or logs why it stayed.
func (a *applier) remove(ctx context.Context, kind Kind, id, name string, remove func(context.Context, string) error) {
	err := remove(ctx, id)
	switch {
	case err == nil:
		a.record(ctx, Change{Kind: kind, Name: name, ID: id, Action: Deleted})
	case cerrdefs.IsInvalidArgument(err) || cerrdefs.IsNotFound(err):
		// In use by a service created meanwhile, or gone already.
		a.log.DebugContext(ctx, "rotated object kept", "kind", kind, "name", name, "err", err)
	default:
		a.log.WarnContext(ctx, "rotated object not deleted", "kind", kind, "name", name, "err", err)
	}
}

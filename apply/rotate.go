package apply

import (
	"context"
	"slices"

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
//
// The services read for uses are this owner's, and only when there is
// something to delete: every service of the swarm, listed on each apply,
// was 25 MB an apply at 10,000 services. Another owner's service using
// one of these configs keeps it all the same: Swarm refuses to remove a
// config or secret a service's spec names.
func (a *applier) deleteRotated(ctx context.Context) {
	owner := a.opts.Owner
	// A kind label marks bookkeeping (revisions, holds), which is never
	// rotated.
	rotated := func(labels map[string]string, wanted bool) bool {
		return !wanted && owner.Owns(labels) && labels[stack.LabelKind] == ""
	}
	configs, err := a.eng.ConfigList(ctx, swarm.ConfigListOptions{Filters: ownerFilters(owner)})
	if err != nil {
		a.log.WarnContext(ctx, "rotated configs kept: configs not listed", "err", err)
	}
	configs = slices.DeleteFunc(configs, func(c swarm.Config) bool {
		_, wanted := a.rel.Configs[c.Spec.Name]
		return !rotated(c.Spec.Labels, wanted)
	})
	secrets, err := a.eng.SecretList(ctx, swarm.SecretListOptions{Filters: ownerFilters(owner)})
	if err != nil {
		a.log.WarnContext(ctx, "rotated secrets kept: secrets not listed", "err", err)
	}
	secrets = slices.DeleteFunc(secrets, func(s swarm.Secret) bool {
		_, wanted := a.rel.Secrets[s.Spec.Name]
		return !rotated(s.Spec.Labels, wanted)
	})
	if len(configs) == 0 && len(secrets) == 0 {
		return
	}
	services, err := a.eng.ServiceList(ctx, swarm.ServiceListOptions{Filters: ownerFilters(owner)})
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
	for _, c := range configs {
		if !used[c.ID] {
			a.remove(ctx, KindConfig, c.ID, c.Spec.Name, a.eng.ConfigRemove)
		}
	}
	for _, s := range secrets {
		if !used[s.ID] {
			a.remove(ctx, KindSecret, s.ID, s.Spec.Name, a.eng.SecretRemove)
		}
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

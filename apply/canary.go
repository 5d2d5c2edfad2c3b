package apply

import (
	"context"
	"fmt"
	"reflect"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/stack"
)

// Edit changes owner's live service name in place: edit gets a copy of
// its spec as the Engine holds it and changes what it must (a canary's
// replicas or its state label, a stable service's replicas), and the
// result is written with the service's version index, read again and
// edited again on a version conflict. Nothing is written when edit
// changed nothing. It refuses a service without owner's labels, and
// reports whether it wrote. The spec hash label stays as it was, so the
// next Apply that brings the release's own spec writes it.
func Edit(ctx context.Context, eng ServiceWriter, owner stack.Owner, name string, edit func(*swarm.ServiceSpec)) (bool, error) {
	for attempt := 1; ; attempt++ {
		cur, _, err := eng.ServiceInspectWithRaw(ctx, name, swarm.ServiceInspectOptions{})
		if err != nil {
			return false, engineError(fmt.Sprintf("inspect service %q", name), err)
		}
		if !owner.Owns(cur.Spec.Labels) {
			return false, foreign(owner, foreignObject(KindService, name, cur.Spec.Labels))
		}
		spec, err := copySpec(cur.Spec)
		if err != nil {
			return false, stalled("service %q: %w", name, err)
		}
		edit(&spec)
		if reflect.DeepEqual(spec, cur.Spec) {
			return false, nil
		}
		_, err = eng.ServiceUpdate(ctx, cur.ID, cur.Version, spec, swarm.ServiceUpdateOptions{})
		if err == nil {
			return true, nil
		}
		if !isOutOfSequence(err) || attempt == maxUpdateAttempts {
			return false, engineError(fmt.Sprintf("update service %q (attempt %d)", name, attempt), err)
		}
	}
}

// ServiceRemover lists and removes services.
type ServiceRemover interface {
	ServiceLister
	ServiceRemove(ctx context.Context, serviceID string) error
}

// RemoveCanaries removes owner's canary services (stack.KindCanary) of
// its release, and only those its labels prove owner's; one gone already
// is no error. It returns the names it removed.
func RemoveCanaries(ctx context.Context, eng ServiceRemover, owner stack.Owner) ([]string, error) {
	list, err := eng.ServiceList(ctx, swarm.ServiceListOptions{Filters: filters.NewArgs(
		filters.Arg("label", stack.LabelKind+"="+stack.KindCanary),
		filters.Arg("label", stack.LabelRelease+"="+owner.Release))})
	if err != nil {
		return nil, engineError(fmt.Sprintf("list canaries of release %q", owner.Release), err)
	}
	var removed []string
	for _, s := range list {
		if !owner.Owns(s.Spec.Labels) || s.Spec.Labels[stack.LabelKind] != stack.KindCanary {
			continue
		}
		if err := eng.ServiceRemove(ctx, s.ID); err != nil && !cerrdefs.IsNotFound(err) {
			return removed, engineError(fmt.Sprintf("remove canary %q", s.Spec.Name), err)
		}
		removed = append(removed, s.Spec.Name)
	}
	return removed, nil
}

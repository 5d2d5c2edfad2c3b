package apply

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/stack"
)

// CheckOwnership returns a *ForeignError when the namespace of
// owner.Release holds services that are not labelled with exactly this
// owner: services labelled com.docker.stack.namespace=<release> and
// services named "<release>_*" both count. It returns nil for an empty
// namespace. It makes two list calls and writes nothing.
func CheckOwnership(ctx context.Context, eng ServiceLister, owner stack.Owner) error {
	live, err := releaseServices(ctx, eng, owner.Release)
	if err != nil {
		return err
	}
	return foreignServices(owner, live)
}

// releaseServices lists the services of a namespace, by its label and by
// docker stack's name prefix, keyed by name. The name filter of the Engine
// matches prefixes, so the prefix is checked again here. The two lists go
// out together, as applier.run's first reads do.
func releaseServices(ctx context.Context, eng ServiceLister, release string) (map[string]swarm.Service, error) {
	byFilter := []filters.Args{
		filters.NewArgs(filters.Arg("label", stack.LabelNamespace+"="+release)),
		filters.NewArgs(filters.Arg("name", release+"_")),
	}
	lists := make([][]swarm.Service, len(byFilter))
	errs := make([]error, len(byFilter))
	var wg sync.WaitGroup
	for i, f := range byFilter {
		wg.Go(func() { lists[i], errs[i] = eng.ServiceList(ctx, swarm.ServiceListOptions{Filters: f}) })
	}
	wg.Wait()
	if err := cmp.Or(errs...); err != nil {
		return nil, engineError(fmt.Sprintf("list services of release %q", release), err)
	}
	out := make(map[string]swarm.Service)
	for _, services := range lists {
		for _, s := range services {
			if s.Spec.Labels[stack.LabelNamespace] == release || strings.HasPrefix(s.Spec.Name, release+"_") {
				out[s.Spec.Name] = s
			}
		}
	}
	return out, nil
}

// foreignServices returns a *ForeignError naming every service in live that
// owner does not own, or nil.
func foreignServices(owner stack.Owner, live map[string]swarm.Service) error {
	var foreignObjs []ForeignObject
	for _, s := range live {
		if !owner.Owns(s.Spec.Labels) {
			foreignObjs = append(foreignObjs, foreignObject(KindService, s.Spec.Name, s.Spec.Labels))
		}
	}
	if len(foreignObjs) == 0 {
		return nil
	}
	slices.SortFunc(foreignObjs, byKindName)
	return foreign(owner, foreignObjs...)
}

// foreignObject describes an object in the way by the skep labels it
// carries, so the error says whose it is.
func foreignObject(kind Kind, name string, labels map[string]string) ForeignObject {
	return ForeignObject{
		Kind:        kind,
		Name:        name,
		Controller:  labels[stack.LabelController],
		Application: labels[stack.LabelApplication],
	}
}

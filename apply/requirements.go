package apply

import (
	"context"
	"fmt"
	"maps"
	"slices"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"

	"github.com/skep-cd/skep/stack"
)

// RequiredNetwork is a network a chart's requirements.yaml asks to have
// created when it is missing (autoCreate), as CreateRequired creates it.
type RequiredNetwork struct {
	Name string
	// Driver is the network's driver; "" is overlay.
	Driver     string
	Attachable bool
}

// NetworkMaker is what CreateRequired needs of the Engine.
type NetworkMaker interface {
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
}

// CreateRequired creates each network of nets that the swarm does not
// have, swarm-scoped, with its driver and attachability, and returns a
// Created change for each. A network of that name that exists is left as
// it is, whoever made it; one another writer creates at the same moment
// counts as existing. A created network carries owner's controller,
// application and release labels with LabelKind KindRequirement, and not
// LabelNamespace: it belongs to no release, so neither prune nor `docker
// stack rm` of its creator removes it while other releases use it (see
// TestRequiredNetworkIsCreatedOnceAndOutlivesItsCreator). It blocks on
// the Engine and stops at the first error.
func CreateRequired(ctx context.Context, eng NetworkMaker, owner stack.Owner, nets []RequiredNetwork) ([]Change, error) {
	if len(nets) == 0 {
		return nil, nil
	}
	names := make([]string, len(nets))
	for i, n := range nets {
		names[i] = n.Name
	}
	list, err := eng.NetworkList(ctx, network.ListOptions{Filters: anyOf("name", names)})
	if err != nil {
		return nil, engineError("list required networks", err)
	}
	exists := map[string]bool{}
	for _, n := range list {
		exists[n.Name] = true // the filter matches loosely; exact names only
	}
	var changes []Change
	for _, n := range nets {
		if exists[n.Name] {
			continue
		}
		driver := n.Driver
		if driver == "" {
			driver = defaultNetworkDriver
		}
		labels := maps.Clone(owner.Labels())
		delete(labels, stack.LabelNamespace)
		labels[stack.LabelKind] = stack.KindRequirement
		resp, err := eng.NetworkCreate(ctx, n.Name, network.CreateOptions{Driver: driver, Scope: "swarm", Attachable: n.Attachable, Labels: labels})
		if err != nil {
			// Another release's apply may have created it first: swarmkit
			// answers that with "name conflicts with an existing object", an
			// Unknown error rather than a Conflict, so ask again by name.
			if cerrdefs.IsConflict(err) || existsNamed(ctx, eng, n.Name) {
				continue
			}
			return changes, engineError(fmt.Sprintf("create required network %q", n.Name), err)
		}
		exists[n.Name] = true
		changes = append(changes, Change{Kind: KindNetwork, Name: n.Name, ID: resp.ID, Action: Created,
			Note: "created for requirements.yaml (autoCreate); shared, never pruned"})
	}
	return changes, nil
}

// existsNamed reports whether a network called exactly name exists; false
// when the Engine cannot tell.
func existsNamed(ctx context.Context, eng NetworkMaker, name string) bool {
	list, err := eng.NetworkList(ctx, network.ListOptions{Filters: anyOf("name", []string{name})})
	return err == nil && slices.ContainsFunc(list, func(n network.Summary) bool { return n.Name == name })
}

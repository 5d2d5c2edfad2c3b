package apply

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/stack"
)

// defaultNetworkDriver is what docker stack deploy creates when a network
// names no driver.
const defaultNetworkDriver = "overlay"

// applyNetworks creates the release's missing networks, among those
// listNetworks read (every network the services attach to, by name, for
// resolving their ids). Networks are immutable: an existing one whose
// options differ from the release is reported in its Change's Note, not
// changed.
func (a *applier) applyNetworks(ctx context.Context) error {
	for _, name := range sortedKeys(a.rel.Networks) {
		want := a.rel.Networks[name]
		if live, ok := a.networks[name]; ok {
			// Network labels cannot change, so a network keeps the
			// application name it was created under; after a rename it is
			// still this controller's network of this release.
			if !a.opts.Owner.Owns(live.Labels) && !ownsRelease(a.opts.Owner, live.Labels) && !a.selfUses(live.ID) {
				return foreign(a.opts.Owner, foreignObject(KindNetwork, name, live.Labels))
			}
			c := Change{Kind: KindNetwork, Name: name, ID: live.ID, Action: Unchanged}
			if diffs := networkDiffs(want, live); len(diffs) > 0 {
				c.Note = "networks are immutable and this one differs from the release (" + strings.Join(diffs, "; ") +
					"); remove it to recreate it"
			}
			a.record(ctx, c)
			continue
		}
		opts := want
		if opts.Driver == "" {
			opts.Driver = defaultNetworkDriver
		}
		opts.Labels = withLabels(want.Labels, a.opts.Owner.Labels())
		opts.Options = maps.Clone(want.Options)
		resp, err := a.eng.NetworkCreate(ctx, name, opts)
		if err != nil {
			return engineError(fmt.Sprintf("create network %q", name), err)
		}
		// Recorded as NetworkList would show it, so resolveReferences
		// finds the new id without listing again.
		a.networks[name] = network.Summary{ID: resp.ID, Name: name, Scope: "swarm", Driver: opts.Driver, Labels: opts.Labels}
		a.record(ctx, Change{Kind: KindNetwork, Name: name, ID: resp.ID, Action: Created})
	}
	return nil
}

// listNetworks reads the networks the release declares or its services
// attach to, by name, into a.networks; a target that names no network is
// looked up as an id (a release read back from a revision may carry ids).
// Only those: at a thousand releases, each apply listing every network of
// the swarm held 1,000 of them per apply in flight, most of the
// controller's heap while a first deploy ran.
func (a *applier) listNetworks(ctx context.Context) error {
	a.networks = make(map[string]network.Summary)
	targets := a.networkTargets()
	if len(targets) == 0 {
		return nil
	}
	if err := a.addNetworks(ctx, "name", targets, func(n network.Summary) string { return n.Name }); err != nil {
		return err
	}
	// The release's own networks that are missing are to be created, not
	// ids: a first apply asks for them once.
	var ids []string
	for _, t := range targets {
		_, found := a.networks[t]
		if _, declared := a.rel.Networks[t]; !found && !declared {
			ids = append(ids, t)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return a.addNetworks(ctx, "id", ids, func(n network.Summary) string { return n.ID })
}

// addNetworks lists the networks whose field (name or id) is one of
// values and keeps, by name, those whose key is exactly one: the Engine
// matches these filters loosely.
func (a *applier) addNetworks(ctx context.Context, field string, values []string, key func(network.Summary) string) error {
	list, err := a.eng.NetworkList(ctx, network.ListOptions{Filters: anyOf(field, values)})
	if err != nil {
		return engineError("list networks", err)
	}
	for _, n := range list {
		if !slices.Contains(values, key(n)) {
			continue
		}
		// Names are not unique across scopes; services attach to swarm ones.
		if prev, ok := a.networks[n.Name]; !ok || prev.Scope != "swarm" {
			a.networks[n.Name] = n
		}
	}
	return nil
}

// networkTargets returns, sorted, the networks the release declares and
// the targets its services attach to.
func (a *applier) networkTargets() []string {
	set := make(map[string]bool)
	for name := range a.rel.Networks {
		set[name] = true
	}
	for _, spec := range a.rel.Services {
		for _, attachments := range networkAttachments(&spec) {
			for _, at := range attachments {
				if at.Target != "" {
					set[at.Target] = true
				}
			}
		}
	}
	return sortedKeys(set)
}

// networkAttachments returns spec's network attachments, the task
// template's and the service's own; their elements are spec's, so a
// caller may set them.
func networkAttachments(spec *swarm.ServiceSpec) [][]swarm.NetworkAttachmentConfig {
	//lint:ignore SA1019 the deprecated field still reaches API 1.41 Engines
	return [][]swarm.NetworkAttachmentConfig{spec.TaskTemplate.Networks, spec.Networks}
}

// networkDiffs lists, as "field: live → wanted", what the release asks of
// a network that the live one does not have. Options, labels and IPAM
// entries the daemon added on its own are not differences.
func networkDiffs(want network.CreateOptions, live network.Summary) []string {
	var out []string
	diff := func(field string, live, want any) {
		out = append(out, fmt.Sprintf("%s: %v → %v", field, live, want))
	}
	driver := want.Driver
	if driver == "" {
		driver = defaultNetworkDriver
	}
	if live.Driver != driver {
		diff("driver", live.Driver, driver)
	}
	if live.Internal != want.Internal {
		diff("internal", live.Internal, want.Internal)
	}
	if live.Attachable != want.Attachable {
		diff("attachable", live.Attachable, want.Attachable)
	}
	for _, k := range sortedKeys(want.Options) {
		if live.Options[k] != want.Options[k] {
			diff("options."+k, live.Options[k], want.Options[k])
		}
	}
	for _, k := range sortedKeys(want.Labels) {
		if live.Labels[k] != want.Labels[k] {
			diff("labels."+k, live.Labels[k], want.Labels[k])
		}
	}
	if want.IPAM != nil {
		if want.IPAM.Driver != "" && live.IPAM.Driver != want.IPAM.Driver {
			diff("ipam.driver", live.IPAM.Driver, want.IPAM.Driver)
		}
		var liveSubnets, wantSubnets []string
		for _, c := range live.IPAM.Config {
			liveSubnets = append(liveSubnets, c.Subnet)
		}
		for _, c := range want.IPAM.Config {
			wantSubnets = append(wantSubnets, c.Subnet)
		}
		slices.Sort(liveSubnets)
		slices.Sort(wantSubnets)
		if len(wantSubnets) > 0 && !slices.Equal(liveSubnets, wantSubnets) {
			diff("ipam.subnets", liveSubnets, wantSubnets)
		}
	}
	return out
}

// referencedNames returns the config and secret names the release declares
// or its services refer to, sorted.
func (a *applier) referencedNames() (configs, secrets []string) {
	cset := make(map[string]bool)
	sset := make(map[string]bool)
	for name := range a.rel.Configs {
		cset[name] = true
	}
	for name := range a.rel.Secrets {
		sset[name] = true
	}
	for _, spec := range a.rel.Services {
		cs := spec.TaskTemplate.ContainerSpec
		for _, r := range cs.Configs {
			if r != nil && r.ConfigName != "" {
				cset[r.ConfigName] = true
			}
		}
		for _, r := range cs.Secrets {
			if r != nil && r.SecretName != "" {
				sset[r.SecretName] = true
			}
		}
	}
	return sortedKeys(cset), sortedKeys(sset)
}

// nameFilters selects objects by any of names. The Engine matches name
// filters loosely (prefixes), so callers check names exactly.
func nameFilters(names []string) filters.Args { return anyOf("name", names) }

// anyOf selects objects whose field matches any of values.
func anyOf(field string, values []string) filters.Args {
	f := filters.NewArgs()
	for _, v := range values {
		f.Add(field, v)
	}
	return f
}

// applyConfigs creates the release's missing configs and reads the ones
// its services refer to. A config's data cannot change in Swarm, so an
// owned config whose data differs from the release is an error: the
// renderer names configs by content, and a clash means it did not.
func (a *applier) applyConfigs(ctx context.Context) error {
	names, _ := a.referencedNames()
	a.configs = make(map[string]swarm.Config)
	if len(names) > 0 {
		list, err := a.eng.ConfigList(ctx, swarm.ConfigListOptions{Filters: nameFilters(names)})
		if err != nil {
			return engineError("list configs", err)
		}
		// Keyed by exact name: the prefix matches of the filter that are
		// not referenced are never looked up.
		for _, c := range list {
			a.configs[c.Spec.Name] = c
		}
	}
	for _, name := range sortedKeys(a.rel.Configs) {
		want := a.rel.Configs[name]
		if want.Name != "" && want.Name != name {
			return stalled("config key %q names a spec called %q", name, want.Name)
		}
		if live, ok := a.configs[name]; ok {
			if !a.opts.Owner.Owns(live.Spec.Labels) {
				return foreign(a.opts.Owner, foreignObject(KindConfig, name, live.Spec.Labels))
			}
			if !bytes.Equal(live.Spec.Data, want.Data) {
				return stalled("config %q exists with other data; swarm configs are immutable, so changed data needs a new name", name)
			}
			a.record(ctx, Change{Kind: KindConfig, Name: name, ID: live.ID, Action: Unchanged})
			continue
		}
		spec := want
		spec.Name = name
		spec.Labels = withLabels(want.Labels, a.opts.Owner.Labels())
		resp, err := a.eng.ConfigCreate(ctx, spec)
		if err != nil {
			return engineError(fmt.Sprintf("create config %q", name), err)
		}
		a.configs[name] = swarm.Config{ID: resp.ID, Spec: spec}
		a.record(ctx, Change{Kind: KindConfig, Name: name, ID: resp.ID, Action: Created})
	}
	return nil
}

// applySecrets is applyConfigs for secrets, except that the Engine never
// returns a secret's data, so an existing owned secret is taken as is; the
// renderer's content-hashed names make a same-named secret the same secret.
func (a *applier) applySecrets(ctx context.Context) error {
	_, names := a.referencedNames()
	a.secrets = make(map[string]swarm.Secret)
	if len(names) > 0 {
		list, err := a.eng.SecretList(ctx, swarm.SecretListOptions{Filters: nameFilters(names)})
		if err != nil {
			return engineError("list secrets", err)
		}
		for _, s := range list {
			a.secrets[s.Spec.Name] = s
		}
	}
	for _, name := range sortedKeys(a.rel.Secrets) {
		want := a.rel.Secrets[name]
		if want.Name != "" && want.Name != name {
			return stalled("secret key %q names a spec called %q", name, want.Name)
		}
		if live, ok := a.secrets[name]; ok {
			if !a.opts.Owner.Owns(live.Spec.Labels) {
				return foreign(a.opts.Owner, foreignObject(KindSecret, name, live.Spec.Labels))
			}
			a.record(ctx, Change{Kind: KindSecret, Name: name, ID: live.ID, Action: Unchanged})
			continue
		}
		spec := want
		spec.Name = name
		spec.Labels = withLabels(want.Labels, a.opts.Owner.Labels())
		resp, err := a.eng.SecretCreate(ctx, spec)
		if err != nil {
			// The spec holds the secret's value; the Engine's error does not.
			return engineError(fmt.Sprintf("create secret %q", name), err)
		}
		// Kept without Data, as the Engine lists secrets: the value must
		// not linger in the applier beyond the create call.
		a.secrets[name] = swarm.Secret{ID: resp.ID, Spec: swarm.SecretSpec{Annotations: spec.Annotations}}
		a.record(ctx, Change{Kind: KindSecret, Name: name, ID: resp.ID, Action: Created})
	}
	return nil
}

// ownsRelease reports whether labels name this controller and this release,
// whatever the application: what an object created before a rename carries.
func ownsRelease(o stack.Owner, labels map[string]string) bool {
	return o.Controller != "" && labels[stack.LabelController] == o.Controller && labels[stack.LabelRelease] == o.Release
}

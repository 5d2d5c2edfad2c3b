package apply

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/docker/docker/api/types/swarm"
	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/stack"
)

// maxUpdateAttempts bounds the retries of a service update that lost a
// race with another writer ("update out of sequence").
const maxUpdateAttempts = 5

// applyServices creates or updates each desired service, in name order,
// and skips the ones whose live spec already is the desired one.
func (a *applier) applyServices(ctx context.Context, live map[string]swarm.Service) error {
	a.images = make(map[string]string, len(a.rel.Services))
	for _, name := range sortedKeys(a.rel.Services) {
		if a.self != nil && name == a.self.Spec.Name {
			if err := a.deferSelf(ctx); err != nil {
				return err
			}
			continue
		}
		var cur *swarm.Service
		if s, ok := live[name]; ok {
			if !a.owns(s) {
				return foreign(a.opts.Owner, foreignObject(KindService, name, s.Spec.Labels))
			}
			cur = &s
		}
		spec, err := a.desiredService(ctx, name, cur)
		if err != nil {
			return err
		}
		a.images[name] = spec.TaskTemplate.ContainerSpec.Image
		if cur == nil {
			resp, err := a.eng.ServiceCreate(ctx, spec, swarm.ServiceCreateOptions{})
			if err != nil {
				return engineError(fmt.Sprintf("create service %q", name), err)
			}
			a.warnings(ctx, name, resp.Warnings)
			a.record(ctx, Change{Kind: KindService, Name: name, ID: resp.ID, Action: Created})
			continue
		}
		c, err := a.updateService(ctx, *cur, spec)
		if err != nil {
			return err
		}
		a.record(ctx, c)
	}
	return nil
}

// desiredService returns a deep copy of the release's spec for name, as it
// is to be written: ownership labels, normalized and resolved image, secret,
// config and network references resolved to ids, and the spec hash label.
func (a *applier) desiredService(ctx context.Context, name string, cur *swarm.Service) (swarm.ServiceSpec, error) {
	spec, err := copySpec(a.rel.Services[name])
	if err != nil {
		return spec, stalled("service %q: %w", name, err)
	}
	spec.Name = name
	cs := spec.TaskTemplate.ContainerSpec
	written := cs.Image
	spec.Labels = withLabels(spec.Labels, a.opts.Owner.Labels())
	// A hash label carried in (say, by a release read back from a
	// revision) must not feed the hash it is replaced by below.
	delete(spec.Labels, stack.LabelSpecHash)
	// As docker stack deploy does: record the image as written in git,
	// before normalizing and pinning it to a digest.
	if _, ok := spec.Labels[stack.LabelStackImage]; !ok {
		spec.Labels[stack.LabelStackImage] = written
	}
	// Not part of the desired state; updateService carries the live one.
	spec.TaskTemplate.ForceUpdate = 0
	cs.Image = normalizeImage(written)
	if err := a.resolveReferences(name, &spec); err != nil {
		return spec, err
	}
	a.resolveImage(ctx, &spec, cur)
	spec.Labels[stack.LabelSpecHash] = specHash(spec)
	return spec, nil
}

// resolveReferences replaces the names the release carries in secret,
// config and network references by the ids of the live objects.
func (a *applier) resolveReferences(service string, spec *swarm.ServiceSpec) error {
	cs := spec.TaskTemplate.ContainerSpec
	for _, r := range cs.Secrets {
		if r == nil {
			continue
		}
		s, ok := a.secrets[r.SecretName]
		if !ok {
			return stalled("service %q uses secret %q, which is neither in the release nor in the swarm", service, r.SecretName)
		}
		r.SecretID = s.ID
	}
	for _, r := range cs.Configs {
		if r == nil {
			continue
		}
		c, ok := a.configs[r.ConfigName]
		if !ok {
			return stalled("service %q uses config %q, which is neither in the release nor in the swarm", service, r.ConfigName)
		}
		r.ConfigID = c.ID
	}
	// A credential spec names its config the way docker/cli's converter
	// leaves it offline; the Engine wants the id.
	if p := cs.Privileges; p != nil && p.CredentialSpec != nil && p.CredentialSpec.Config != "" {
		if c, ok := a.configs[p.CredentialSpec.Config]; ok {
			p.CredentialSpec.Config = c.ID
		}
	}
	// The Engine stores attachments by network id whatever it was sent, so
	// sending ids keeps the desired spec comparable with the live one.
	ids := make(map[string]bool, len(a.networks))
	for _, n := range a.networks {
		ids[n.ID] = true
	}
	for _, attachments := range networkAttachments(spec) {
		for i := range attachments {
			target := attachments[i].Target
			if n, ok := a.networks[target]; ok {
				attachments[i].Target = n.ID
			} else if !ids[target] {
				return stalled("service %q attaches to network %q, which is neither in the release nor in the swarm", service, target)
			}
		}
	}
	return nil
}

// updateService writes spec over cur unless cur already runs it. On a
// version conflict it reads the service again and retries, a bounded
// number of times.
func (a *applier) updateService(ctx context.Context, cur swarm.Service, spec swarm.ServiceSpec) (Change, error) {
	name := spec.Name
	for attempt := 1; ; attempt++ {
		if unchanged(cur.Spec, spec) && !a.opts.Force {
			return Change{Kind: KindService, Name: name, ID: cur.ID, Action: Unchanged}, nil
		}
		// Same hash yet not unchanged: Skep wrote this spec and somebody
		// edited the service since; say so, as the write undoes their edit.
		if cur.Spec.Labels[stack.LabelSpecHash] == spec.Labels[stack.LabelSpecHash] {
			a.log.WarnContext(ctx, "service changed outside skep; restoring it", "service", name, "diff", a.rel.Mask(specDiff(cur.Spec, spec)))
		}
		// As docker stack deploy does: keep the live ForceUpdate counter, so
		// a `docker service update --force` is not undone into a restart.
		spec.TaskTemplate.ForceUpdate = cur.Spec.TaskTemplate.ForceUpdate
		if a.opts.Force {
			// A forced apply restarts every task even of an unchanged spec:
			// the counter is how Swarm tells "redeploy" from "no change".
			spec.TaskTemplate.ForceUpdate++
		}
		resp, err := a.eng.ServiceUpdate(ctx, cur.ID, cur.Version, spec, swarm.ServiceUpdateOptions{})
		if err == nil {
			a.warnings(ctx, name, resp.Warnings)
			return Change{Kind: KindService, Name: name, ID: cur.ID, Action: Updated}, nil
		}
		if !isOutOfSequence(err) || attempt == maxUpdateAttempts {
			return Change{}, engineError(fmt.Sprintf("update service %q (attempt %d)", name, attempt), err)
		}
		a.log.Debug("service version moved; reading it again", "service", name, "attempt", attempt)
		fresh, _, err := a.eng.ServiceInspectWithRaw(ctx, cur.ID, swarm.ServiceInspectOptions{})
		if err != nil {
			return Change{}, engineError(fmt.Sprintf("inspect service %q", name), err)
		}
		if !a.owns(fresh) {
			return Change{}, foreign(a.opts.Owner, foreignObject(KindService, name, fresh.Spec.Labels))
		}
		cur = fresh
	}
}

// warnings logs what the Engine said about an accepted service write,
// such as an image it could not verify; the write itself succeeded.
func (a *applier) warnings(ctx context.Context, service string, warnings []string) {
	for _, w := range warnings {
		a.log.WarnContext(ctx, "engine warning", "service", service, "warning", w)
	}
}

// unchanged reports whether live already is desired: it carries desired's
// spec hash, so Skep wrote this spec last, and, normalized the same way,
// it still equals desired, so nobody changed it since (a `docker service
// scale` or `update --image` keeps the hash label but not the spec).
// See TestApplyTwiceWritesNothing and TestApplyRestoresOutOfBandChange.
func unchanged(live, desired swarm.ServiceSpec) bool {
	if live.Labels[stack.LabelSpecHash] != desired.Labels[stack.LabelSpecHash] {
		return false
	}
	l, err := canonical(live)
	if err != nil {
		return false
	}
	d, err := canonical(desired)
	if err != nil {
		return false
	}
	return reflect.DeepEqual(l, d)
}

// specDiff describes how live differs from desired in canonical form, for
// the log; the format is go-cmp's and not stable.
func specDiff(live, desired swarm.ServiceSpec) string {
	l, err := canonical(live)
	if err != nil {
		return err.Error()
	}
	d, err := canonical(desired)
	if err != nil {
		return err.Error()
	}
	return cmp.Diff(l, d)
}

// specHash is a stable hash of everything desired says, without the hash
// label itself and the ForceUpdate counter: the same desired spec hashes
// the same in any process, and any change to it changes the hash.
func specHash(spec swarm.ServiceSpec) string {
	// A new map: spec is a copy, but its Labels map is the caller's.
	spec.Labels = withLabels(spec.Labels, nil)
	delete(spec.Labels, stack.LabelSpecHash)
	spec.TaskTemplate.ForceUpdate = 0
	// encoding/json writes struct fields in order and map keys sorted, so
	// the bytes are stable. A spec it cannot encode cannot be sent either.
	b, err := json.Marshal(spec)
	if err != nil {
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// canonical returns spec as a JSON tree in the form the Engine stores it:
// daemon defaults filled in, the ForceUpdate counter dropped, and every
// zero value (empty string, false, 0, empty list or object) removed, since
// the Engine hands back nil, empty and absent interchangeably.
func canonical(spec swarm.ServiceSpec) (any, error) {
	spec, err := copySpec(spec)
	if err != nil {
		return nil, err
	}
	stack.EngineDefaults(&spec)
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	return prune(tree), nil
}

// prune removes zero values from a decoded JSON tree, bottom up. List
// elements stay in place (their position carries meaning); an element that
// prunes to nothing becomes null.
func prune(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if p := prune(e); p == nil {
				delete(x, k)
			} else {
				x[k] = p
			}
		}
		if len(x) == 0 {
			return nil
		}
	case []any:
		if len(x) == 0 {
			return nil
		}
		for i, e := range x {
			x[i] = prune(e)
		}
	case string:
		if x == "" {
			return nil
		}
	case bool:
		if !x {
			return nil
		}
	case json.Number:
		if f, err := x.Float64(); err == nil && f == 0 {
			return nil
		}
	}
	return v
}

// copySpec returns a deep copy of spec. A JSON round trip copies every
// pointer, slice and map of the Engine's types, which carry JSON tags for
// every field the Engine accepts.
func copySpec(spec swarm.ServiceSpec) (swarm.ServiceSpec, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return swarm.ServiceSpec{}, fmt.Errorf("copy service spec: %w", err)
	}
	var out swarm.ServiceSpec
	if err := json.Unmarshal(b, &out); err != nil {
		return swarm.ServiceSpec{}, fmt.Errorf("copy service spec: %w", err)
	}
	return out, nil
}

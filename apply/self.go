package apply

import (
	"context"
	"maps"

	"github.com/docker/docker/api/types/swarm"
)

// SelfService names the service the controller runs as, in the release of
// the app set's self application. Apply treats it apart from the others:
//   - it is written last, after the revision that records it, and only
//     when the caller calls Result.Self.Write (after the rest of the sync,
//     since the write replaces the process making it);
//   - an apply of an earlier wave leaves it alone;
//   - it, and the networks it is attached to, are taken over even without
//     this owner's labels: the first controller is deployed by hand.
//
// ID must be the id of the live service Name; anything else is refused,
// so no other service is ever taken over.
type SelfService struct {
	ID   string
	Name string
}

// SelfWrite is the pending write of the controller's own service. From and
// To are the images it runs and will run (as written to the swarm).
type SelfWrite struct {
	Name     string
	From, To string

	a    *applier
	cur  swarm.Service
	spec swarm.ServiceSpec
}

// Write updates the controller's own service to the spec the revision
// recorded, retrying a version conflict as any update. Call it once, last:
// Swarm then stops this controller and starts the new one.
func (w *SelfWrite) Write(ctx context.Context) (Change, error) {
	c, err := w.a.updateService(ctx, w.cur, w.spec)
	if err != nil {
		return Change{}, err
	}
	w.a.log.InfoContext(ctx, "apply object", "kind", c.Kind, "name", c.Name, "action", c.Action, "self", true)
	return c, nil
}

// findSelf checks Options.Self against live and keeps the live service.
func (a *applier) findSelf(live map[string]swarm.Service) error {
	self := a.opts.Self
	if self.Name == "" && self.ID == "" {
		return nil
	}
	s, ok := live[self.Name]
	switch {
	case self.Name == "" || self.ID == "":
		return stalled("apply release %q: the controller's own service needs both a name and an id, got %q and %q", a.rel.Name, self.Name, self.ID)
	case !ok:
		return stalled("apply release %q: the controller's own service %q is not in the release's namespace", a.rel.Name, self.Name)
	case s.ID != self.ID:
		return stalled("apply release %q: service %q is %s, not the controller's own service %s", a.rel.Name, self.Name, s.ID, self.ID)
	}
	// An earlier wave may not hold it yet; the whole release must.
	if _, declared := a.rel.Services[self.Name]; !declared && !a.opts.Wave {
		return stalled("apply release %q: the release does not declare the controller's own service %q; the self application must keep it", a.rel.Name, self.Name)
	}
	a.self = &s
	return nil
}

// owns reports whether s is this owner's to write: its labels say so, or
// it is the controller's own service.
func (a *applier) owns(s swarm.Service) bool {
	return a.opts.Owner.Owns(s.Spec.Labels) || (a.self != nil && s.ID == a.self.ID)
}

// selfUses reports whether the controller's own service is attached to the
// network with id networkID.
func (a *applier) selfUses(networkID string) bool {
	if a.self == nil {
		return false
	}
	//lint:ignore SA1019 the deprecated field still reaches API 1.41 Engines
	for _, attachments := range [][]swarm.NetworkAttachmentConfig{a.self.Spec.TaskTemplate.Networks, a.self.Spec.Networks} {
		for _, n := range attachments {
			if n.Target == networkID {
				return true
			}
		}
	}
	return false
}

// deferSelf computes the controller's own service's desired spec, so that
// the revision records it, and keeps its write for Result.Self when it
// differs from the live one. An earlier wave's apply does neither.
func (a *applier) deferSelf(ctx context.Context) error {
	if a.opts.Wave {
		return nil
	}
	cur := *a.self
	spec, err := a.desiredService(ctx, cur.Spec.Name, &cur)
	if err != nil {
		return err
	}
	a.images[cur.Spec.Name] = spec.TaskTemplate.ContainerSpec.Image
	if unchanged(cur.Spec, spec) && !a.opts.Force {
		a.record(ctx, Change{Kind: KindService, Name: cur.Spec.Name, ID: cur.ID, Action: Unchanged})
		return nil
	}
	a.result.Self = &SelfWrite{Name: cur.Spec.Name, From: cur.Spec.TaskTemplate.ContainerSpec.Image,
		To: spec.TaskTemplate.ContainerSpec.Image, a: a, cur: cur, spec: spec}
	return nil
}

// withoutSelf returns live without the controller's own service.
func withoutSelf(live map[string]swarm.Service, self *swarm.Service) map[string]swarm.Service {
	if self == nil {
		return live
	}
	out := maps.Clone(live)
	delete(out, self.Spec.Name)
	return out
}

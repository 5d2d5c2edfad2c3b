package prune

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/stack"
)

// ErrImmutableLabels says the Engine cannot change an object's labels in
// place (networks and volumes): re-stamping it would mean deleting and
// recreating it, which Relabel never does.
var ErrImmutableLabels = errors.New("the engine cannot change this object's labels in place")

// Relabeler is the part of the Docker Engine API Relabel uses; *client.Client
// (and so *swarm.Client) satisfies it. Relabel calls it sequentially.
type Relabeler interface {
	ServiceInspectWithRaw(ctx context.Context, serviceID string, options swarm.ServiceInspectOptions) (swarm.Service, []byte, error)
	ServiceUpdate(ctx context.Context, serviceID string, version swarm.Version, service swarm.ServiceSpec, options swarm.ServiceUpdateOptions) (swarm.ServiceUpdateResponse, error)
	ConfigInspectWithRaw(ctx context.Context, id string) (swarm.Config, []byte, error)
	ConfigUpdate(ctx context.Context, id string, version swarm.Version, config swarm.ConfigSpec) error
	SecretInspectWithRaw(ctx context.Context, id string) (swarm.Secret, []byte, error)
	SecretUpdate(ctx context.Context, id string, version swarm.Version, secret swarm.SecretSpec) error
}

// RelabelResult reports what Relabel did, in plan order.
type RelabelResult struct {
	Relabelled []Object
	Failed     []Failure
}

// Err returns the failures joined, or nil when there were none.
func (r RelabelResult) Err() error {
	errs := make([]error, 0, len(r.Failed))
	for _, f := range r.Failed {
		errs = append(errs, fmt.Errorf("re-stamp %s %q: %w", f.Object.Kind, f.Object.Name, f.Err))
	}
	return errors.Join(errs...)
}

// Relabel moves the objects p marks Restamp to p.Owner's application by
// rewriting their application label in place: services through a service
// update (labels are not part of the task template, so no task restarts),
// configs and secrets through a label-only update. Networks and volumes
// cannot be re-labelled and are reported with ErrImmutableLabels. Each
// object is read again first and skipped (reported) unless its labels
// still name this controller and release under another application.
// Nothing is ever deleted or created. Run it before applying the renamed
// application's release, whose apply refuses objects labelled for another
// application.
func Relabel(ctx context.Context, eng Relabeler, p Plan) RelabelResult {
	var r RelabelResult
	for _, it := range p.Select(Restamp) {
		obj := it.Object
		err := ctx.Err()
		if err == nil {
			err = restampOne(ctx, eng, p.Owner, obj)
		}
		if err != nil {
			r.Failed = append(r.Failed, Failure{Object: obj, Err: err})
			continue
		}
		r.Relabelled = append(r.Relabelled, obj)
	}
	return r
}

// restampOne re-reads obj and writes it back with owner's application.
// It writes with the version it read, so a concurrent change makes the
// Engine refuse the update instead of being overwritten.
func restampOne(ctx context.Context, eng Relabeler, owner stack.Owner, obj Object) error {
	switch obj.Kind {
	case KindService:
		svc, _, err := eng.ServiceInspectWithRaw(ctx, obj.ID, swarm.ServiceInspectOptions{})
		if err != nil {
			return err
		}
		labels, err := restamped(owner, svc.Spec.Labels)
		if err != nil {
			return err
		}
		svc.Spec.Labels = labels
		_, err = eng.ServiceUpdate(ctx, svc.ID, svc.Version, svc.Spec, swarm.ServiceUpdateOptions{})
		return err
	case KindConfig:
		c, _, err := eng.ConfigInspectWithRaw(ctx, obj.ID)
		if err != nil {
			return err
		}
		if c.Spec.Labels, err = restamped(owner, c.Spec.Labels); err != nil {
			return err
		}
		return eng.ConfigUpdate(ctx, c.ID, c.Version, c.Spec)
	case KindSecret:
		s, _, err := eng.SecretInspectWithRaw(ctx, obj.ID)
		if err != nil {
			return err
		}
		if s.Spec.Labels, err = restamped(owner, s.Spec.Labels); err != nil {
			return err
		}
		return eng.SecretUpdate(ctx, s.ID, s.Version, s.Spec)
	case KindNetwork, KindVolume:
		return ErrImmutableLabels
	}
	return fmt.Errorf("unknown kind %q", obj.Kind)
}

// restamped returns a copy of labels naming owner's application, or an
// error when labels no longer name owner's controller and release under
// another application.
func restamped(owner stack.Owner, labels map[string]string) (map[string]string, error) {
	app := labels[stack.LabelApplication]
	if owner.Controller == "" || labels[stack.LabelController] != owner.Controller ||
		labels[stack.LabelRelease] != owner.Release || app == "" || app == owner.Application {
		return nil, fmt.Errorf("its labels changed since the plan (controller %q, application %q, release %q)",
			labels[stack.LabelController], app, labels[stack.LabelRelease])
	}
	out := maps.Clone(labels)
	out[stack.LabelApplication] = owner.Application
	return out, nil
}

package prune

import (
	"context"
	"errors"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
)

// Deleter is the part of the Docker Engine API Execute uses; *client.Client
// (and so *swarm.Client) satisfies it. Execute calls it sequentially.
type Deleter interface {
	ServiceRemove(ctx context.Context, serviceID string) error
	NetworkRemove(ctx context.Context, networkID string) error
	ConfigRemove(ctx context.Context, id string) error
	SecretRemove(ctx context.Context, id string) error
	VolumeRemove(ctx context.Context, volumeID string, force bool) error
}

// Result reports what Execute did, each list in delete order: the objects
// it deleted, those found gone already, and those it could not delete.
type Result struct {
	Deleted []Object
	// Gone were removed before Execute came to them (by an earlier prune
	// whose deletions the live snapshot did not show yet, or by hand):
	// nothing of the plan is left there, yet Execute deleted nothing.
	Gone   []Object
	Failed []Failure
}

// Failure is one object Execute did not delete. InUse says the Engine
// refused because a service or container still uses it (typically tasks
// of a just-deleted service still draining): retry on a later tick.
type Failure struct {
	Object Object
	Err    error
	InUse  bool
}

// Err returns the failures joined, or nil when there were none.
func (r Result) Err() error {
	errs := make([]error, 0, len(r.Failed))
	for _, f := range r.Failed {
		errs = append(errs, fmt.Errorf("delete %s %q: %w", f.Object.Kind, f.Object.Name, f.Err))
	}
	return errors.Join(errs...)
}

// Execute deletes the objects p marks Delete: services first, then
// networks, configs, secrets and volumes. It neither waits nor retries: a
// deletion that fails is reported in the Result and the rest go on, so one
// object in use never holds the others. An object already gone is no
// failure; it is reported in Gone. An item whose labels do not name
// p.Owner is refused, whatever the plan says. When ctx ends, the remaining
// objects are reported failed.
// Execute never returns an error of its own; check Result.Failed.
func Execute(ctx context.Context, eng Deleter, p Plan) Result {
	var r Result
	items := append([]Item(nil), p.Select(Delete)...)
	sortItems(items)
	for _, it := range items {
		obj := it.Object
		if err := ctx.Err(); err != nil {
			r.Failed = append(r.Failed, Failure{Object: obj, Err: err})
			continue
		}
		if err := checkProof(p, obj); err != nil {
			r.Failed = append(r.Failed, Failure{Object: obj, Err: err})
			continue
		}
		err := remove(ctx, eng, obj)
		switch {
		case err == nil:
			r.Deleted = append(r.Deleted, obj)
		case cerrdefs.IsNotFound(err):
			r.Gone = append(r.Gone, obj)
		default:
			r.Failed = append(r.Failed, Failure{Object: obj, Err: err, InUse: inUse(err)})
		}
	}
	return r
}

func remove(ctx context.Context, eng Deleter, obj Object) error {
	switch obj.Kind {
	case KindService:
		return eng.ServiceRemove(ctx, obj.ID)
	case KindNetwork:
		return eng.NetworkRemove(ctx, obj.ID)
	case KindConfig:
		return eng.ConfigRemove(ctx, obj.ID)
	case KindSecret:
		return eng.SecretRemove(ctx, obj.ID)
	case KindVolume:
		// Never force: a volume a container still uses stays.
		return eng.VolumeRemove(ctx, obj.ID, false)
	}
	return fmt.Errorf("unknown kind %q", obj.Kind)
}

// inUse reports whether err is the Engine refusing to delete an object that
// something still uses. Swarm answers that for configs and secrets with
// InvalidArgument, for networks with a precondition or forbidden error, and
// for volumes with Conflict; the message is the fallback.
func inUse(err error) bool {
	return cerrdefs.IsConflict(err) || cerrdefs.IsInvalidArgument(err) || cerrdefs.IsFailedPrecondition(err) ||
		cerrdefs.IsPermissionDenied(err) || strings.Contains(err.Error(), "in use")
}

package demo

import (
	"context"
	"errors"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/stack"
)

// removeOwned deletes every service, network, config and secret whose
// ownership label names the demo's controller, retrying while tasks drain.
func (d *run) removeOwned(ctx context.Context) error {
	// The label filter is the whole safety of cleanup: the daemon returns
	// only objects the demo's controller stamped.
	owned := filters.NewArgs(filters.Arg("label", stack.LabelController+"="+ControllerID))
	services, err := d.eng.ServiceList(ctx, swarm.ServiceListOptions{Filters: owned})
	if err != nil {
		return err
	}
	// Services go first: networks, configs and secrets in use by a
	// service's tasks cannot be removed.
	for _, s := range services {
		if err := d.eng.ServiceRemove(ctx, s.ID); err != nil && !cerrdefs.IsNotFound(err) {
			return err
		}
	}
	// Swarm removes a service's tasks asynchronously; until their
	// containers are gone, the objects they use are still "in use".
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := d.removeUnused(ctx, owned)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		if serr := sleep(ctx, time.Second); serr != nil {
			return errors.Join(err, serr)
		}
	}
}

// removeUnused removes the owned networks, configs and secrets; those still
// in use by draining tasks fail and are retried by the caller.
// It keeps going past a failure, so one stuck object does not keep the
// others from being removed; the errors are joined.
func (d *run) removeUnused(ctx context.Context, owned filters.Args) error {
	var errs []error
	// errors.Join drops nils, so every result can be appended.
	nets, err := d.eng.NetworkList(ctx, network.ListOptions{Filters: owned})
	errs = append(errs, err)
	for _, n := range nets {
		errs = append(errs, ignoreNotFound(d.eng.NetworkRemove(ctx, n.ID)))
	}
	configs, err := d.eng.ConfigList(ctx, swarm.ConfigListOptions{Filters: owned})
	errs = append(errs, err)
	for _, c := range configs {
		errs = append(errs, ignoreNotFound(d.eng.ConfigRemove(ctx, c.ID)))
	}
	secrets, err := d.eng.SecretList(ctx, swarm.SecretListOptions{Filters: owned})
	errs = append(errs, err)
	for _, s := range secrets {
		errs = append(errs, ignoreNotFound(d.eng.SecretRemove(ctx, s.ID)))
	}
	return errors.Join(errs...)
}

// removeImages deletes the demo images, retrying while containers stop.
func (d *run) removeImages(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		var errs []error
		list, err := d.eng.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelDemo+"=true"))})
		errs = append(errs, err)
		for _, img := range list {
			for _, tag := range img.RepoTags {
				// PruneChildren also removes the image's untagged parents, so the
				// build leaves no dangling layers behind.
				_, err := d.eng.ImageRemove(ctx, tag, image.RemoveOptions{PruneChildren: true})
				errs = append(errs, ignoreNotFound(err))
			}
		}
		err = errors.Join(errs...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		if serr := sleep(ctx, 2*time.Second); serr != nil {
			return errors.Join(err, serr)
		}
	}
}

// ignoreNotFound treats "already gone" as success: something else (a
// concurrent cleanup, the user) may have removed it first.
func ignoreNotFound(err error) error {
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return err
}

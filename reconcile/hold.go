package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/stack"
)

// kindHold marks the config that keeps an application's hold in the swarm,
// so that a rollback survives a controller restart.
const kindHold = "hold"

// holdName is the name of the config holding release's hold, within
// Swarm's 64-character limit.
func holdName(release string) string {
	name := "skep-hold-" + release
	if len(name) <= 64 {
		return name
	}
	sum := sha256.Sum256([]byte(release))
	return name[:64-13] + "-" + hex.EncodeToString(sum[:])[:12]
}

// saveHold records h for app in the swarm (Revision "" removes it). Configs
// cannot change, so the old one is removed and a new one created.
func (c *Controller) saveHold(ctx context.Context, app appset.Application, h api.Hold) error {
	owner := c.owner(app)
	old, err := c.holdConfigs(ctx, owner)
	if err != nil {
		return err
	}
	for _, cfg := range old {
		if err := c.engine.ConfigRemove(ctx, cfg.ID); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove hold of %s: %w", app.Name, err)
		}
	}
	if h.Revision == "" {
		return nil
	}
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	labels := owner.Labels()
	labels[apply.LabelKind] = kindHold
	spec := dswarm.ConfigSpec{Annotations: dswarm.Annotations{Name: holdName(app.Release), Labels: labels}, Data: data}
	if _, err := c.engine.ConfigCreate(ctx, spec); err != nil {
		return fmt.Errorf("record hold of %s: %w", app.Name, err)
	}
	return nil
}

// loadHold reads app's hold from the swarm; the zero Hold when none.
func (c *Controller) loadHold(ctx context.Context, app appset.Application) (api.Hold, error) {
	found, err := c.holdConfigs(ctx, c.owner(app))
	if err != nil || len(found) == 0 {
		return api.Hold{}, err
	}
	var h api.Hold
	if err := json.Unmarshal(found[0].Spec.Data, &h); err != nil {
		return api.Hold{}, fmt.Errorf("read hold of %s: %w", app.Name, err)
	}
	return h, nil
}

// holdConfigs lists the hold configs owner's labels prove are its own.
func (c *Controller) holdConfigs(ctx context.Context, owner stack.Owner) ([]dswarm.Config, error) {
	list, err := c.engine.ConfigList(ctx, dswarm.ConfigListOptions{Filters: filters.NewArgs(
		filters.Arg("label", apply.LabelKind+"="+kindHold),
		filters.Arg("label", stack.LabelRelease+"="+owner.Release))})
	if err != nil {
		return nil, fmt.Errorf("list holds of %s: %w", owner.Release, err)
	}
	var out []dswarm.Config
	for _, cfg := range list {
		if owner.Owns(cfg.Spec.Labels) && cfg.Spec.Labels[apply.LabelKind] == kindHold {
			out = append(out, cfg)
		}
	}
	return out, nil
}

// restoreHold loads app's recorded hold into its status once per worker,
// before its first reconcile.
func (c *Controller) restoreHold(ctx context.Context, app appset.Application, st *appState) {
	if st.holdLoaded {
		return
	}
	h, err := c.loadHold(ctx, app)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			c.log.Warn("hold not read", "app", app.Name, "err", err)
		}
		return
	}
	st.holdLoaded = true
	if h.Revision == "" {
		return
	}
	c.status.Update(app.Name, func(s *AppStatus) {
		if s.Held.Revision == "" {
			s.Held = h
		}
	})
	c.log.Info("hold restored", "app", app.Name, "revision", h.Revision, "actor", h.Actor)
}

package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/stack"
)

// Hold keeps an application at one commit: a rollback, or a sync to a named
// revision, put it there. Ticks deploy Revision instead of the branch head
// until a sync without a revision, or an unhold, releases it. A release
// rollback holds the other way round: Failed names the commit automated
// syncs must not apply again. The zero value is no hold.
type Hold struct {
	// Revision is the git commit the application is held at; "" when it
	// is held off a failed commit only.
	Revision string `json:"revision"`
	// Actor is who asked for the hold; "" for the controller itself.
	Actor string    `json:"actor,omitempty"`
	Since time.Time `json:"since"`
	// Failed is the rollout a release rollback undid; nil when none.
	Failed *FailedRollout `json:"failed,omitempty"`
}

// FailedRollout is a commit whose rollout failed and was rolled back:
// automated syncs leave it alone until git moves (Key changes), someone
// syncs, or a rollback replaces the hold.
type FailedRollout struct {
	// Commit is the failed commit; Key it with the artifact versions it
	// was rendered with, what a new commit or version changes.
	Commit string `json:"commit"`
	Key    string `json:"key"`
	// Restored is the commit of the revision written back, and Revision
	// the number of the revision that records it.
	Restored string `json:"restored"`
	Revision int    `json:"revision"`
	// Cause is why the rollout failed, in one line.
	Cause string    `json:"cause"`
	Since time.Time `json:"since"`
}

// IsZero reports whether h holds nothing.
func (h Hold) IsZero() bool { return h.Revision == "" && h.Failed == nil }

// holdName is the name of the config holding release's hold, within
// Swarm's 64-character limit: a name too long is cut and a hash of the
// release added, so two long release names do not share a hold. Holds are
// found by their labels, never by this name.
func holdName(release string) string {
	name := "skep-hold-" + release
	if len(name) <= maxConfigName {
		return name
	}
	sum := sha256.Sum256([]byte(release))
	return name[:maxConfigName-13] + "-" + hex.EncodeToString(sum[:])[:12]
}

// SaveHold records h for owner in the swarm, beside its revisions, so that
// it survives a controller restart; the zero Hold removes it. Configs
// cannot change, so the old one is removed and a new one created: a failure
// between the two leaves no hold, never two. Like Apply, it must not run
// concurrently for one release.
func SaveHold(ctx context.Context, eng ConfigStore, owner stack.Owner, h Hold) error {
	old, err := holdConfigs(ctx, eng, owner)
	if err != nil {
		return err
	}
	for _, cfg := range old {
		if err := eng.ConfigRemove(ctx, cfg.ID); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove hold of %s: %w", owner.Application, err)
		}
	}
	if h.IsZero() {
		return nil
	}
	data, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode hold of %s: %w", owner.Application, err)
	}
	labels := owner.Labels()
	// The kind label makes it bookkeeping, which prune and deleteRotated
	// never delete as a release's resource.
	labels[stack.LabelKind] = stack.KindHold
	spec := swarm.ConfigSpec{Annotations: swarm.Annotations{Name: holdName(owner.Release), Labels: labels}, Data: data}
	if _, err := eng.ConfigCreate(ctx, spec); err != nil {
		return fmt.Errorf("record hold of %s: %w", owner.Application, err)
	}
	return nil
}

// LoadHold reads owner's hold from the swarm; the zero Hold when none is
// recorded. It makes one list call and writes nothing. Should two hold
// configs exist (two SaveHolds raced), the first listed is taken.
func LoadHold(ctx context.Context, eng ConfigLister, owner stack.Owner) (Hold, error) {
	found, err := holdConfigs(ctx, eng, owner)
	if err != nil || len(found) == 0 {
		return Hold{}, err
	}
	var h Hold
	if err := json.Unmarshal(found[0].Spec.Data, &h); err != nil {
		return Hold{}, fmt.Errorf("read hold of %s: %w", owner.Application, err)
	}
	return h, nil
}

// holdConfigs lists the hold configs that owner's labels prove are its own.
// The filter selects by kind and release only; Owns then drops a hold
// another controller or application keeps for a release of the same name.
func holdConfigs(ctx context.Context, eng ConfigLister, owner stack.Owner) ([]swarm.Config, error) {
	list, err := eng.ConfigList(ctx, swarm.ConfigListOptions{Filters: filters.NewArgs(
		filters.Arg("label", stack.LabelKind+"="+stack.KindHold),
		filters.Arg("label", stack.LabelRelease+"="+owner.Release))})
	if err != nil {
		return nil, fmt.Errorf("list holds of %s: %w", owner.Release, err)
	}
	var out []swarm.Config
	for _, cfg := range list {
		if owner.Owns(cfg.Spec.Labels) && cfg.Spec.Labels[stack.LabelKind] == stack.KindHold {
			out = append(out, cfg)
		}
	}
	return out, nil
}

// ForgetRelease removes every record owner keeps in the swarm, its
// revisions and its hold, once prune removed everything else of the
// release. Nothing else is touched; an object already gone is no error.
func ForgetRelease(ctx context.Context, eng ConfigStore, owner stack.Owner) error {
	revs, err := revisionConfigs(ctx, eng, owner)
	if err != nil {
		return err
	}
	holds, err := holdConfigs(ctx, eng, owner)
	if err != nil {
		return err
	}
	var errs []error
	for _, cfg := range append(revs, holds...) {
		if err := eng.ConfigRemove(ctx, cfg.ID); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove %s: %w", cfg.Spec.Name, err))
		}
	}
	return errors.Join(errs...)
}

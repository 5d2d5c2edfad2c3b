package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/hook"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/stack"
)

// runHooks runs the hooks of d's release at phase, in the order of their
// names, one at a time. The first that fails stops the rest; the error
// names it and carries its log tail (hook.FailedError), and is stalled: a
// failed hook is not run again for the same commit and versions until
// someone asks for a sync (see hookFailure). Anything else is transient.
func (c *Controller) runHooks(ctx context.Context, app appset.Application, d desired, phase stack.HookPhase) error {
	for _, h := range d.release.Hooks {
		if h.Phase != phase {
			continue
		}
		res, err := hook.Run(ctx, c.engineOf(app), h, hook.Options{
			Owner:  c.owner(app),
			Commit: d.commit,
			Keep:   app.SyncPolicy.KeepHookJobs,
			Logger: c.log.With("app", app.Name, "release", app.Release),
		})
		if err != nil {
			err = fmt.Errorf("sync %s at %s: %w", app.Release, gitsource.ShortCommit(d.commit), err)
			var failed *hook.FailedError
			if errors.As(err, &failed) {
				return &outcome.StalledError{Err: err}
			}
			return &outcome.TransientError{Err: err}
		}
		c.log.Info("hook completed", "app", app.Name, "service", h.Service, "job", res.Job, "phase", phase)
	}
	return nil
}

// preSync runs d's pre-sync hooks. A hook joins the release's networks and
// uses its configs and secrets, so those are written first, without any
// service and without a revision (an earlier wave's apply).
func (c *Controller) preSync(ctx context.Context, app appset.Application, d desired, opts apply.Options) error {
	if !slices.ContainsFunc(d.release.Hooks, func(h stack.Hook) bool { return h.Phase == stack.PreSync }) {
		return nil
	}
	opts.Wave = true
	if _, err := apply.Apply(ctx, c.engineOf(app), d.release.UpTo(-1), opts); err != nil {
		err = fmt.Errorf("apply %s at %s before its pre-sync hooks: %w", app.Release, gitsource.ShortCommit(d.commit), err)
		if outcome.Of(err) != outcome.Stalled {
			err = &outcome.TransientError{Err: err}
		}
		return err
	}
	return c.runHooks(ctx, app, d, stack.PreSync)
}

// hookFailure is a pre-sync hook that failed, remembered so that the same
// render does not run it again on every tick.
type hookFailure struct {
	key string // desired.key() of the failed sync
	err error
}

// preSyncFailed reports whether err is a pre-sync hook's failure.
func preSyncFailed(err error) bool {
	var failed *hook.FailedError
	return errors.As(err, &failed) && failed.Phase == stack.PreSync
}

// stackHooks is what render read of the hooks, as stack.Convert takes it.
func stackHooks(in map[string]render.Hook) map[string]stack.Hook {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]stack.Hook, len(in))
	for name, h := range in {
		out[name] = stack.Hook{Phase: stack.HookPhase(h.Phase), Timeout: h.Timeout}
	}
	return out
}

package syncpass

import (
	"context"
	"errors"
	"fmt"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/hook"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
)

// runHooks runs the hooks of d's release at phase, in the order of their
// names, one at a time. The first that fails stops the rest; the error
// names it and carries its log tail (hook.FailedError), and is stalled: a
// failed hook is not run again for the same commit and versions until
// someone asks for a sync (see Memo.hookFailed). Anything else is transient.
func runHooks(ctx context.Context, env Env, app appset.Application, d desired, phase stack.HookPhase) error {
	for _, h := range d.release.Hooks {
		if h.Phase != phase {
			continue
		}
		res, err := hook.Run(ctx, env.Engine, h, hook.Options{
			Owner:  env.owner(app),
			Commit: d.commit,
			Keep:   app.SyncPolicy.KeepHookJobs,
			Logger: env.Log.With("app", app.Name, "release", app.Release),
		})
		if err != nil {
			err = fmt.Errorf("sync %s at %s: %w", app.Release, gitsource.ShortCommit(d.commit), err)
			var failed *hook.FailedError
			if errors.As(err, &failed) {
				return &outcome.StalledError{Err: err}
			}
			return &outcome.TransientError{Err: err}
		}
		env.Log.Info("hook completed", "app", app.Name, "service", h.Service, "job", res.Job, "phase", phase)
	}
	return nil
}

// preSyncFailed reports whether err is a pre-sync hook's failure.
func preSyncFailed(err error) bool {
	var failed *hook.FailedError
	return errors.As(err, &failed) && failed.Phase == stack.PreSync
}

package syncpass

import (
	"context"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/notify"
)

// emit raises one event about app, stamped with its destination, the
// calendar clock and the actor ctx carries.
func emit(ctx context.Context, env Env, app appset.Application, t notify.EventType, commit, msg string) {
	env.Notifier.Dispatch(ctx, notify.Event{
		Application: app.Name,
		Type:        t,
		Revision:    commit,
		Message:     msg,
		At:          env.Now(),
		Swarm:       app.Destination.Swarm,
		Actor:       notify.ActorFrom(ctx),
	})
}

// syncFailed raises sync-failed for a sync that started, unless ctx ended:
// a sync cut short because the controller is stopping (or the application
// left the set) did not fail, and a forge must not mark its commit failed
// for it. It raises nothing; the store closes the sync as interrupted at
// the next start, and the next controller finishes the write (see
// TestFaultHangingNotifierAndSIGTERMMidApply).
func syncFailed(ctx context.Context, env Env, app appset.Application, commit, msg string) {
	if ctx.Err() != nil {
		env.Log.Info("sync abandoned", "app", app.Name, "revision", commit, "why", context.Cause(ctx), "err", msg)
		return
	}
	emit(ctx, env, app, notify.SyncFailed, commit, msg)
}

package syncpass

import (
	"context"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/notify"
)

// emit raises one event about app, stamped with its destination, the
// calendar clock and the actor ctx carries.
func emit(ctx context.Context, env Env, app appset.Application, t notify.EventType, commit, msg string) {
	emitCause(ctx, env, app, t, commit, msg, Cause{}, "")
}

// emitCause is emit for a failure whose cause is c, line being the cause
// in one line (c.String(), or what stands for it).
func emitCause(ctx context.Context, env Env, app appset.Application, t notify.EventType, commit, msg string, c Cause, line string) {
	env.Notifier.Dispatch(ctx, notify.Event{
		Application: app.Name,
		Type:        t,
		Revision:    commit,
		Message:     msg,
		At:          env.Now(),
		Swarm:       app.Destination.Swarm,
		Actor:       notify.ActorFrom(ctx),
		Cause:       line,
		Shared:      c.Shared,
	})
}

// syncFailed raises sync-failed for a sync that started and failed with
// err (its cause, when it carries one, in the event's), unless ctx ended:
// a sync cut short because the controller is stopping (or the application
// left the set) did not fail, and a forge must not mark its commit failed
// for it. It raises nothing; the store closes the sync as interrupted at
// the next start, and the next controller finishes the write (see
// TestFaultHangingNotifierAndSIGTERMMidApply).
func syncFailed(ctx context.Context, env Env, app appset.Application, commit string, err error) {
	if ctx.Err() != nil {
		env.Log.Info("sync abandoned", "app", app.Name, "revision", commit, "why", context.Cause(ctx), "err", err)
		return
	}
	c := causeOf(err)
	emitCause(ctx, env, app, notify.SyncFailed, commit, err.Error(), c, c.String())
}

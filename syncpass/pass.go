package syncpass

import (
	"context"

	"github.com/skep-cd/skep/notify"
)

// Run is one sync of in.App's release: resolve → (quiet?) → render →
// compare → observe → gate → (correct) → write → settle. It blocks until
// the sync is done or ctx ends, and never waits on another application.
// The error in the Outcome is classed (package outcome); a panic becomes
// a failed Outcome, with the stack in the log.
func Run(ctx context.Context, env Env, in Input) (out Outcome) {
	ctx = notify.WithActor(ctx, in.Ask.Actor)
	out.Memo = in.Memo.forGen(in.AppGen)
	defer out.recoverPanic(env, in)
	d, err := resolve(ctx, env, in.App, in.first(env), in.Ask.Revision, in.Memo.known(in.App, in.Ask))
	key := ""
	if err == nil {
		out.Memo.noteResolved(in, d)
		key = quietKey(env, in, d, &out.Memo.quietInputs)
		if out.replay(env, in, d, key) {
			return out
		}
		d, err = renderAt(ctx, env, in.App, in.first(env), d)
	}
	out.rendered(ctx, env, in, d, key, err)
	if err != nil {
		return out
	}
	p, latest, err := compare(ctx, env, in.first(env), env.owner(in.App), d.release)
	out.compared(env, in, d, p, latest)
	if err != nil {
		return out.failed(err)
	}
	if latest.Revision == nil {
		out.Result.Moved = env.movedFrom(in.App)
	}
	env.remember(in.App, d.release)
	v := out.judge(ctx, env, in, d, observe(in.App, in.first(env), d, env.owner(in.App), p.Changed()))
	if v.correct {
		if err := correct(ctx, env, in, d, *v.found.Findings); err != nil {
			return out.failed(err)
		}
		out.corrected(in, d)
	}
	switch v.then {
	case hold:
		return out.failed(v.err)
	case write:
		return out.write(ctx, env, in, d)
	case steer:
		return out.canary(ctx, env, in, d)
	}
	if v.settle {
		out.settled(ctx, env, in, d)
		out.rememberQuiet(key, d)
	}
	return out
}

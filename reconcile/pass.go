package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/swarm"
	"github.com/skep-cd/skep/syncpass"
)

// firstListWait bounds how long a pass waits for its swarm's first list.
const firstListWait = 10 * time.Second

// Result is what one reconcile of one application found and did.
type Result = syncpass.Result

// Cause is the root cause of a failed rollout (see syncpass.Cause).
type Cause = syncpass.Cause

// Canary is a release's canary as the status shows it (see
// syncpass.CanaryStatus); CanaryAction what someone asks of it.
type (
	Canary       = syncpass.CanaryStatus
	CanaryAction = syncpass.CanaryAction
)

// What someone may ask of a running canary.
const (
	CanaryPromote = syncpass.CanaryPromote
	CanaryAbort   = syncpass.CanaryAbort
)

// reconcile runs one sync pass of app's release (syncpass.Run) for req,
// memo being what the release's last pass left (it is replaced by what
// this one leaves) and gen the generation of the app set app was read
// from, and records what the pass found. The returned error is classed.
func (c *Controller) reconcile(ctx context.Context, app appset.Application, req Request, memo *syncpass.Memo, gen uint64) (Result, error) {
	start := c.wall()
	c.status.Update(app.Name, func(s *AppStatus) { s.Phase = PhaseReconciling })
	var out syncpass.Outcome
	// Nothing is rendered, compared or written for a swarm that does not
	// answer; its applications are unknown until it does.
	if err := c.unreachable(app); err != nil {
		c.status.markUnknown(app.Name, err)
		out.Err = err
	} else {
		out = syncpass.Run(ctx, c.dest(app.Destination.Swarm).env, c.input(ctx, app, req, *memo, gen))
		*memo = out.Memo
	}
	c.record(app, out)
	c.observe(app, req, out, c.wall().Sub(start))
	return out.Result, out.Err
}

// input is the question a pass of app for req starts from, and the world
// as the loop sees it now: one calendar reading, one live snapshot, the
// dependencies not ready, the renders of app's other releases. A pass
// of a running controller that starts before its swarm's first list
// waits for it, a while at most (firstListWait), so that its write is
// checked for placement against the nodes.
func (c *Controller) input(ctx context.Context, app appset.Application, req Request, memo syncpass.Memo, gen uint64) syncpass.Input {
	in := syncpass.Input{App: app, Ask: req.ask(), Now: c.now(), Memo: memo, AppGen: gen,
		NotReady: c.status.notReady(app.DependsOn), Renders: c.live.renders(app)}
	_, _, in.Previews = c.status.brief(app.Name)
	in.Held = c.status.held(app.Name)
	if live := c.dest(app.Destination.Swarm).live; live != nil {
		in.Live = live.Current()
		if errors.Is(in.Live.Err(), swarm.ErrNotListed) && c.running.Load() {
			wctx, cancel := context.WithTimeout(ctx, firstListWait)
			in.Live = live.Read(wctx)
			cancel()
		}
		in.SeenWrites = !in.Live.TakenAt().IsZero() && c.live.seen(app.Destination.Swarm, app.Name, in.Live.TakenAt(), false)
	}
	return in
}

package reconcile

import (
	"context"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/sops"
	"github.com/skep-cd/skep/syncpass"
)

// Proposal is a commit planned as merging it would deploy it, and
// Proposed one release's plan of it (see syncpass).
type (
	Proposal = syncpass.Proposal
	Proposed = syncpass.Proposed
)

// Propose plans app at p.Commit against what its swarm runs, release by
// release (one for an application without a release file), as merging
// the proposal would deploy it: app is the definition the merge would
// leave, from the running app set or from a pull request's head. Nothing
// is written, no hook runs, no event is raised and no status changes; a
// sealed proposal is rendered without the controller's decryption keys.
// A destination this controller has not got, or that does not answer, is
// the error of the one entry returned. It is safe to call beside the
// workers.
func (c *Controller) Propose(ctx context.Context, app appset.Application, p syncpass.Proposal) []syncpass.Proposed {
	if err := c.unreachable(app); err != nil {
		return []syncpass.Proposed{{Release: app.Release, Err: err}}
	}
	env := c.dest(app.Destination.Swarm).env
	if p.Sealed {
		env.Keys = sops.Sealed()
	}
	if !multiRelease(app) {
		return []syncpass.Proposed{syncpass.Propose(ctx, env, app, p)}
	}
	specs, commit, err := syncpass.ReadReleases(ctx, env, app, p.Commit)
	if err != nil {
		return []syncpass.Proposed{{Release: app.Release, Result: syncpass.Result{Commit: commit}, Err: err}}
	}
	out := make([]syncpass.Proposed, 0, len(specs))
	for _, spec := range specs {
		out = append(out, syncpass.Propose(ctx, env, derived(app, spec, false), p))
	}
	return out
}

package syncpass

import (
	"context"
	"fmt"
	"maps"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/plan"
)

// correct redeploys the drifted services of d's release from the recorded
// state, without writing a revision, and leaves rolled-back services
// alone. A rollout under way (as the pass's first look shows it) holds the
// correction back.
func correct(ctx context.Context, env Env, in Input, d desired, findings []plan.Finding) error {
	app := in.App
	rel := d.release
	rel.Services = maps.Clone(rel.Services)
	for _, f := range findings {
		if f.Kind == plan.RolledBack {
			delete(rel.Services, f.Service)
		}
	}
	if env.Live != nil {
		if why := Rollout(rel, in.Live); why != "" {
			return rolloutWait(rel.Name, why)
		}
	}
	defer env.beginWrite(app.Name)()
	res, err := apply.Apply(ctx, env.Engine, rel, apply.Options{
		Digests:      env.Digests,
		Owner:        env.owner(app),
		ResolveImage: apply.ResolveImage(app.SyncPolicy.ResolveImage),
		Commit:       d.commit,
		Actor:        notify.ActorFrom(ctx),
		Correction:   true,
		Logger:       env.Log.With("app", app.Name),
		Self:         selfIn(env, app, rel),
	})
	if err == nil && res.Self != nil {
		_, err = writeSelf(ctx, env, app, d.commit, res.Self)
	}
	if err != nil {
		return transientUnlessStalled(fmt.Errorf("correct drift of %s: %w", rel.Name, err))
	}
	emit(ctx, env, app, notify.DriftConverged, d.commit, fmt.Sprintf("redeployed release %s: %s", rel.Name, describeFindings(findings)))
	return nil
}

// transientUnlessStalled classes a failed write: apply classes what it
// knows (a spec the Engine refuses, someone else's objects in the way:
// stalled); anything else may pass on a later attempt.
func transientUnlessStalled(err error) error {
	if outcome.Of(err) != outcome.Stalled {
		return &outcome.TransientError{Err: err}
	}
	return err
}

package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
)

// applyWaves writes rel wave by wave (compose x-skep-wave, see
// stack.Release.Waves): each earlier wave is applied with the waves
// before it, then waited for until it converged and is healthy, and only
// then does the next start (a wave already in place is not waited for
// as if written); the whole release goes last and records the revision.
// A wave that fails stops the later ones, which stay as they are, and the
// error names it. Without waves this is one apply.
func (c *Controller) applyWaves(ctx context.Context, app appset.Application, rel stack.Release, opts apply.Options) (apply.Result, error) {
	waves := rel.Waves()
	written := map[string]apply.Change{} // services an earlier wave created or updated
	for _, w := range waves[:len(waves)-1] {
		part := rel.UpTo(w)
		opts.Wave = true
		res, err := apply.Apply(ctx, c.engineOf(app), part, opts)
		for _, ch := range res.Changes {
			if ch.Kind == apply.KindService && ch.Action != apply.Unchanged {
				written[ch.Name] = ch
			}
		}
		if err != nil {
			return merged(res, written), waveError(w, err)
		}
		c.log.Info("wave applied", "app", app.Name, "release", rel.Name, "wave", w)
		// A wave already in place wrote nothing and raises no event: its
		// wait looks at the swarm as it is, not for a write.
		var wrote time.Time
		if res.Changed() {
			wrote = time.Now()
		}
		if err := c.waitHealthy(ctx, app, part, wrote); err != nil {
			return merged(res, written), waveError(w, err)
		}
	}
	opts.Wave = false
	res, err := apply.Apply(ctx, c.engineOf(app), rel, opts)
	if err != nil && len(waves) > 1 {
		err = waveError(waves[len(waves)-1], err)
	}
	return merged(res, written), err
}

// merged is the last apply's result with the services an earlier wave
// wrote shown as that wave wrote them, not as the unchanged they were by
// the time the release was applied whole.
func merged(res apply.Result, written map[string]apply.Change) apply.Result {
	seen := map[string]bool{}
	for i, ch := range res.Changes {
		if w, ok := written[ch.Name]; ok && ch.Kind == apply.KindService {
			res.Changes[i], seen[ch.Name] = w, true
		}
	}
	for name, ch := range written {
		if !seen[name] {
			res.Changes = append(res.Changes, ch)
		}
	}
	return res
}

// waveError names the wave that failed, keeping err's outcome class: apply
// classes what it knows as stalled and the rest may pass later.
func waveError(wave int, err error) error {
	err = fmt.Errorf("wave %d: %w", wave, err)
	if outcome.Of(err) != outcome.Stalled {
		return &outcome.TransientError{Err: err}
	}
	return err
}

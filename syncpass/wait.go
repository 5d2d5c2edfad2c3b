package syncpass

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
)

// waitHealthy waits, up to the application's timeout, until every service
// of rel is healthy and converged (see Converged) in a snapshot taken
// after written, when the write ended; a zero written (nothing was
// written) takes any snapshot that shows the application's earlier writes.
// When a second passes with no change, it asks the Engine itself (see
// nextWaitStep): no event may be coming. A rollback by Swarm fails at once
// with the daemon's reason, and so does a task the scheduler can place on
// no node (unschedulable). Without a live snapshot there is nothing to
// wait on.
func waitHealthy(ctx context.Context, env Env, app appset.Application, rel stack.Release, written time.Time) error {
	live := env.Live
	if live == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, app.SyncPolicy.Timeout)
	defer cancel()
	changes := live.Subscribe(ctx)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		snap := live.Current()
		if why := rolledBack(rel, snap); why != "" {
			return &outcome.StalledError{Err: fmt.Errorf("release %s: %s", rel.Name, why)}
		}
		if why := unschedulable(app, rel, snap); why != "" && (written.IsZero() || snap.TakenAt().After(written)) {
			return &outcome.TransientError{Err: fmt.Errorf("release %s: %s", rel.Name, why)}
		}
		last := Health(rel, snap)
		pending := cmp.Or(Rollout(rel, snap), Converged(rel, snap))
		step := nextWaitStep(written, snap.TakenAt(), env.seenWrites(app.Name, snap.TakenAt(), true), last.State == health.Healthy && pending == "")
		if step == waitDone {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				why := fmt.Sprintf("%s (%s, %d/%d running)", last.State, last.Message, last.Running, last.Desired)
				if last.State == health.Healthy && pending != "" {
					why = pending
				}
				return &outcome.TransientError{Err: fmt.Errorf("release %s not healthy within %s: %s", rel.Name, app.SyncPolicy.Timeout, why)}
			}
			return ctx.Err()
		case <-changes:
		case <-tick.C:
			// A second without a change: an event may never come, for
			// the relist that shows the write (it started before the
			// write ended) nor for a task a health check moved from
			// starting to running.
			if step == waitRelist {
				live.Relist()
			} else {
				live.RelistTasks()
			}
		}
	}
}

// waitStep is what a wait for health does after one look at the swarm.
type waitStep int

const (
	waitDone        waitStep = iota // healthy and converged, as seen after the write
	waitRelist                      // the snapshot may predate the write: a full relist shows it
	waitRelistTasks                 // the write is seen, not yet healthy: the tasks may have moved unseen
)

// nextWaitStep decides a wait's next step from one snapshot, taken at
// taken, that found the release ready (healthy and converged) or not. A
// write that ended at written is seen by a snapshot taken after it; with
// nothing written (zero written) there is no write to wait for, and a
// snapshot that saw the application's earlier writes (seenEarlier) shows
// the services as they are (see TestNextWaitStep).
func nextWaitStep(written, taken time.Time, seenEarlier, ready bool) waitStep {
	seen := seenEarlier
	if !written.IsZero() {
		seen = taken.After(written)
	}
	switch {
	case !seen:
		return waitRelist
	case ready:
		return waitDone
	default:
		return waitRelistTasks
	}
}

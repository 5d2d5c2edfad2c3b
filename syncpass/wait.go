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
	"github.com/skep-cd/skep/swarm"
)

// waitFor is one wait for health: the release written, and when the
// write ended (zero: nothing was written, see nextWaitStep). superseded,
// when set, says whether git now asks for something other than what is
// being written: a failing rollout gives way to it as soon as the loop
// queues a request (Fleet.Newer), rather than after the timeout.
type waitFor struct {
	app        appset.Application
	rel        stack.Release
	written    time.Time
	superseded func(ctx context.Context) bool
}

// waitHealthy waits, up to the application's timeout, until every service
// of wf.rel is healthy and converged (see Converged) in a snapshot taken
// after the write; when a second passes with no change, it asks the
// Engine itself (see nextWaitStep): no event may be coming. A rollback by
// Swarm fails at once with the daemon's reason, and tasks failing in a
// loop since the write (crashLoop) or a task the scheduler can place on
// no node (unschedulable) fail it without waiting out the timeout. A
// failure carries its cause (*rolloutError). Without a live snapshot
// there is nothing to wait on.
func waitHealthy(ctx context.Context, env Env, wf waitFor) error {
	live := env.Live
	if live == nil {
		return nil
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, wf.app.SyncPolicy.Timeout)
	defer cancel()
	changes := live.Subscribe(ctx)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var newer <-chan struct{}
	if wf.superseded != nil {
		newer = env.newer(wf.app.Name)
	}
	asked := false // a request is queued: preempt once the rollout fails
	for {
		snap := live.Current()
		seenEarlier := env.seenWrites(wf.app.Name, snap.TakenAt(), true)
		// Only a snapshot that shows the write can say it failed: an
		// older one still shows the last rollout's state.
		if nextWaitStep(wf.written, snap.TakenAt(), seenEarlier, false) != waitRelist {
			if err := wf.failing(parent, env, snap); err != nil {
				return err
			}
		}
		last := Health(wf.rel, snap)
		pending := cmp.Or(Rollout(wf.rel, snap), Converged(wf.rel, snap))
		step := nextWaitStep(wf.written, snap.TakenAt(), seenEarlier, last.State == health.Healthy && pending == "")
		if step == waitDone {
			return nil
		}
		if _, failing := findFailure(wf.rel, snap, wf.written); asked && failing {
			if wf.superseded(ctx) {
				return wf.preempted(parent, env, snap)
			}
			// The request stays queued, so Newer would answer at once:
			// git is asked again on the next tick, not in a loop.
			asked = false
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) && parent.Err() == nil {
				return wf.failed(parent, env, snap, &outcome.TransientError{Err: wf.notHealthy(last, pending)})
			}
			return ctx.Err()
		case <-newer:
			asked, newer = true, nil
		case <-changes:
		case <-tick.C:
			if newer == nil && !asked && wf.superseded != nil {
				newer = env.newer(wf.app.Name)
			}
			relistFor(live, step)
		}
	}
}

// relistFor asks live for what step waits on after a second without a
// change: an event may never come, for the relist that shows the write
// (it started before the write ended) nor for a task a health check moved
// from starting to running.
func relistFor(live *swarm.Watcher, step waitStep) {
	if step == waitRelist {
		live.Relist()
	} else {
		live.RelistTasks()
	}
}

// failing is the error of a wait that need not go on, as snap shows the
// write: Swarm rolled a service back since the write (since ever, when
// nothing was written), tasks fail in a loop (crashLoop), the scheduler
// can place a task on no node (unschedulable), or the update waits on a
// task a lost node took (strandedRollout); nil otherwise.
func (wf waitFor) failing(ctx context.Context, env Env, snap swarm.Snapshot) error {
	if c, ok := findFailure(wf.rel, snap, wf.written); ok && c.Kind == CauseRolledBack {
		return wf.failed(ctx, env, snap, &outcome.StalledError{Err: fmt.Errorf("release %s: swarm rolled back service %s: %s", wf.rel.Name, c.Service, c.Message)})
	}
	if loop := crashLoop(wf.rel, snap, wf.written); loop != "" {
		return wf.failed(ctx, env, snap, &outcome.TransientError{Err: fmt.Errorf("release %s failing: %s", wf.rel.Name, loop)})
	}
	if why := unschedulable(wf.app, wf.rel, snap); why != "" {
		return wf.failed(ctx, env, snap, &outcome.TransientError{Err: fmt.Errorf("release %s: %s", wf.rel.Name, why)})
	}
	if why := strandedRollout(wf.rel, snap); why != "" {
		return wf.failed(ctx, env, snap, &outcome.TransientError{Err: fmt.Errorf("release %s: service %s", wf.rel.Name, why)})
	}
	return nil
}

// notHealthy is the error of a wait past its timeout: the release's
// health, or the rollout still pending when every service is healthy.
func (wf waitFor) notHealthy(last health.Result, pending string) error {
	why := fmt.Sprintf("%s (%s, %d/%d running)", last.State, last.Message, last.Running, last.Desired)
	if last.State == health.Healthy && pending != "" {
		why = pending
	}
	return fmt.Errorf("release %s not healthy within %s: %s", wf.rel.Name, wf.app.SyncPolicy.Timeout, why)
}

// failed is err with the cause snap shows of the failure, looked up
// (logs, OOM, the registry) with a bound of its own, ctx's deadline
// having passed; err alone when snap shows no failing task.
func (wf waitFor) failed(ctx context.Context, env Env, snap swarm.Snapshot, err error) error {
	c, ok := findFailure(wf.rel, snap, wf.written)
	if !ok {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*causeLogTimeout)
	defer cancel()
	return &rolloutError{cause: explain(ctx, env, wf.rel, c), err: err}
}

// preempted ends a failing rollout's wait for the newer commit queued:
// the pass ends at once (waiting, so the worker runs the queued request
// next) with the failure's cause, and nothing is rolled back.
func (wf waitFor) preempted(ctx context.Context, env Env, snap swarm.Snapshot) error {
	err := wf.failed(ctx, env, snap, &outcome.WaitingError{
		Err: fmt.Errorf("release %s: a newer commit preempts the failing rollout", wf.rel.Name), Retry: time.Second})
	var r *rolloutError
	if errors.As(err, &r) {
		r.preempted = true
		return r
	}
	return &rolloutError{err: err, preempted: true}
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

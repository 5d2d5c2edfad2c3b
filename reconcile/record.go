package reconcile

import (
	"context"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
)

// Observation is what one reconcile of one application took and found,
// handed to the Observer when it ends.
type Observation struct {
	Application string
	// Swarm is the application's destination; "" is the local swarm.
	Swarm    string
	Outcome  outcome.Class
	Duration time.Duration
	// Requested is true for a requested sync, false for a tick.
	Requested bool
	// Quiet is true for a tick whose inputs were those of the last tick
	// that found nothing to do: it rendered and compared nothing.
	Quiet bool
	// Sync is true when an apply ran; SyncFailed when it failed.
	Sync          bool
	SyncFailed    bool
	ApplyDuration time.Duration
	// GitDuration is what resolving and fetching took; GitFailed is set
	// when either failed.
	GitDuration time.Duration
	GitFailed   bool
}

// Observer is told about each reconcile when it ends. It must return
// quickly and be safe for concurrent use; the API's metrics implement it.
type Observer interface {
	ObserveReconcile(Observation)
}

// record stores what one reconcile found in the status table.
func (c *Controller) record(app appset.Application, out Result, err error) {
	now := c.now()
	c.status.Update(app.Name, func(s *AppStatus) {
		s.Automated = app.SyncPolicy.Automated
		s.LastReconcile = now
		s.Phase = PhaseIdle
		if out.Commit != "" {
			s.Revision = out.Commit
		}
		if out.Recorded != nil {
			s.DeployedRevision = out.Recorded.Commit
		}
		if out.Artifacts != nil || app.Artifacts == nil {
			s.Artifacts = out.Artifacts
		}
		if out.Plan.Action.Valid() {
			s.Warnings = out.Warnings
			s.Plan = []string{out.Plan.Summary()}
			if out.moved != "" {
				s.Plan = append(s.Plan, out.moved)
			}
			s.Sync, s.Drift = Synced, ""
			switch {
			case out.Plan.Changed():
				s.Sync, s.Drift = OutOfSync, DriftGit
			case out.liveDrift:
				s.Sync, s.Drift = OutOfSync, DriftLive
			case waitingArtifacts(out.Artifacts) != "":
				s.Sync, s.Drift = OutOfSync, DriftArtifact
			}
		}
		if out.Applied {
			s.Sync, s.Drift, s.DeployedRevision = Synced, "", out.Commit
		}
		if out.synced.Trigger != "" {
			s.LastSync = out.synced
			s.LastSync.At = now
		}
		s.LastError, s.LastErrorClass = "", ""
		if err != nil {
			s.LastError, s.LastErrorClass = err.Error(), outcome.Of(err)
			if !out.Plan.Action.Valid() {
				s.Sync = Unknown
			}
		}
	})
}

// emit raises one event about app, stamped with its destination and the
// actor ctx carries.
func (c *Controller) emit(ctx context.Context, app appset.Application, t notify.EventType, commit, msg string) {
	c.notifier.Dispatch(ctx, notify.Event{
		Application: app.Name,
		Type:        t,
		Revision:    commit,
		Message:     msg,
		At:          c.now(),
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
func (c *Controller) syncFailed(ctx context.Context, app appset.Application, commit, msg string) {
	if ctx.Err() != nil {
		c.log.Info("sync abandoned", "app", app.Name, "revision", commit, "why", context.Cause(ctx), "err", msg)
		return
	}
	c.emit(ctx, app, notify.SyncFailed, commit, msg)
}

// observe tells the observer what one reconcile took.
func (c *Controller) observe(app appset.Application, req Request, out Result, d desired, took time.Duration, err error, quiet bool) {
	if c.observer == nil {
		return
	}
	c.observer.ObserveReconcile(Observation{
		Application:   app.Name,
		Swarm:         app.Destination.Swarm,
		Outcome:       outcome.Of(err),
		Duration:      took,
		Sync:          out.Applied || out.applyTook > 0,
		SyncFailed:    out.applyTook > 0 && !out.Applied,
		ApplyDuration: out.applyTook,
		GitDuration:   d.gitTook,
		GitFailed:     d.gitFailed,
		Requested:     req.Sync,
		Quiet:         quiet,
	})
}

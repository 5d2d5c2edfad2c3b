package reconcile

import (
	"slices"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/syncpass"
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

// record stores what one pass found in the status table, in one update:
// the pass's only writer of the status, but for the phase and health.
func (c *Controller) record(app appset.Application, out syncpass.Outcome) {
	now := c.now()
	c.status.Update(app.Name, func(s *AppStatus) {
		s.Automated = app.SyncPolicy.Automated
		s.LastReconcile = now
		s.Phase = PhaseIdle
		recordResult(s, app, out.Result, out.Err)
		if out.Result.Synced.Trigger != "" {
			s.LastSync = LastSync{At: now, Revision: out.Result.Synced.Revision, Actor: out.Result.Synced.Actor, Trigger: out.Result.Synced.Trigger}
		}
		c.recordFound(s, app.Release, out.Found)
	})
}

// recordResult sets what a pass's result says of the sync state.
func recordResult(s *AppStatus, app appset.Application, out Result, err error) {
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
		if out.Moved != "" {
			s.Plan = append(s.Plan, out.Moved)
		}
		s.Sync, s.Drift = syncState(out)
	}
	if out.Applied {
		s.Sync, s.Drift, s.DeployedRevision = Synced, "", out.Commit
	}
	s.LastError, s.LastErrorClass = "", ""
	if err != nil {
		s.LastError, s.LastErrorClass = err.Error(), outcome.Of(err)
		if !out.Plan.Action.Valid() {
			s.Sync = Unknown
		}
	}
}

// syncState says whether a pass that compared found its release in sync,
// and why not.
func syncState(out Result) (SyncState, DriftReason) {
	switch {
	case out.Plan.Changed():
		return OutOfSync, DriftGit
	case out.LiveDrift:
		return OutOfSync, DriftLive
	case syncpass.Waiting(out.Artifacts):
		return OutOfSync, DriftArtifact
	}
	return Synced, ""
}

// recordFound sets each field the pass of release looked at; s.Name is
// the application. The status lock is held: what it logs is a line, once
// per change.
func (c *Controller) recordFound(s *AppStatus, release string, f syncpass.Found) {
	if f.Window != nil {
		s.Window = windowHold(*f.Window)
	}
	if f.Findings != nil {
		s.Findings = *f.Findings
	}
	if f.WaitingFor != nil {
		if names := *f.WaitingFor; len(names) > 0 && !slices.Equal(s.WaitingFor, names) {
			c.log.Info("waiting for dependencies", "app", s.Name, "dependencies", names)
		}
		s.WaitingFor = *f.WaitingFor
	}
	if f.Unmanaged != nil {
		c.setUnmanaged(s, release, *f.Unmanaged)
	}
	if f.Previews != nil {
		s.Previews, s.PreviewProblems = f.Previews.Statuses, f.Previews.Problems
	}
	if f.Cause != nil {
		s.Cause = *f.Cause
	}
	if f.Held != nil {
		s.Held = *f.Held
	}
}

// setUnmanaged records what sits in an application's release namespace
// without its proof of ownership, logging it once per change.
func (c *Controller) setUnmanaged(s *AppStatus, release string, unmanaged []string) {
	if !slices.Equal(s.Unmanaged, unmanaged) && len(unmanaged) > 0 {
		c.log.Warn("unmanaged objects in release namespace", "app", s.Name, "release", release, "objects", unmanaged)
	}
	s.Unmanaged = unmanaged
}

// observe tells the observer what one pass took.
func (c *Controller) observe(app appset.Application, req Request, out syncpass.Outcome, took time.Duration) {
	if c.observer == nil {
		return
	}
	r := out.Result
	c.observer.ObserveReconcile(Observation{
		Application:   app.Name,
		Swarm:         app.Destination.Swarm,
		Outcome:       outcome.Of(out.Err),
		Duration:      took,
		Sync:          r.Applied || r.ApplyTook > 0,
		SyncFailed:    r.ApplyTook > 0 && !r.Applied,
		ApplyDuration: r.ApplyTook,
		GitDuration:   out.GitTook,
		GitFailed:     out.GitFailed,
		Requested:     req.Sync,
		Quiet:         out.Quiet,
	})
}

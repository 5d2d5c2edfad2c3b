package reconcile

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/outcome"
)

// runRequest runs one worker request: it applies or clears a hold, keeps
// the requested sync's record, and reconciles.
//
// A sync to a named revision holds the application there (recorded in the
// swarm by apply, so a restart keeps it); a sync without one releases the
// hold; a tick deploys the held revision, if any.
func (c *Controller) runRequest(ctx context.Context, app appset.Application, gen uint64, req Request, st *workerState) error {
	now := c.now().UTC()
	c.restoreHold(ctx, app, st)
	var hold *apply.Hold // set when this request changes the hold
	c.status.Update(app.Name, func(s *AppStatus) {
		switch {
		case req.Sync && req.Revision != "":
			s.Held = apply.Hold{Revision: req.Revision, Actor: req.Actor, Since: now}
			hold = &s.Held
		case req.Sync:
			if !s.Held.IsZero() {
				hold = &apply.Hold{}
			}
			s.Held = apply.Hold{}
		default:
			req.Revision = s.Held.Revision
		}
		if req.Sync {
			if s.PendingSync <= req.ID {
				s.PendingSync = 0
			}
			s.LastRequestedSync = SyncRecord{ID: req.ID, Revision: req.Revision, Actor: req.Actor,
				Outcome: SyncRunning, StartedAt: now}
		}
	})
	// The hold is written before the reconcile, so a controller killed
	// mid-sync restarts held where the request meant it to be.
	if d := c.dest(app.Destination.Swarm); hold != nil {
		if err := apply.SaveHold(ctx, d.engine, d.ownerOf(app), *hold); err != nil {
			c.log.Warn("hold not recorded in the swarm; it lasts until the controller restarts", "app", app.Name, "err", err)
		}
	}
	var out Result
	var err error
	if multiRelease(app) {
		out, err = c.reconcileReleases(ctx, app, req, st)
	} else {
		out, err = c.reconcile(ctx, app, req, &st.memo, gen)
	}
	if req.Sync {
		c.finishSync(app.Name, req, out, err)
	}
	return err
}

// finishSync records how the requested sync req ended in its status.
func (c *Controller) finishSync(app string, req Request, out Result, err error) {
	done := c.now().UTC()
	c.status.Update(app, func(s *AppStatus) {
		// A later sync replaced the record while this one ran: its result
		// belongs to the request the record now names, not to this one.
		if s.LastRequestedSync.ID != req.ID {
			return
		}
		r := &s.LastRequestedSync
		r.FinishedAt, r.Revision, r.Outcome = done, cmp.Or(out.Commit, r.Revision), SyncSucceeded
		if out.Plan.Action.Valid() {
			r.Summary = out.Plan.Summary()
		}
		if outcome.Of(err) == outcome.Waiting {
			// Still queued: the worker runs it again once the rollout ends.
			r.FinishedAt, r.Outcome, s.PendingSync = time.Time{}, SyncRunning, req.ID
			return
		}
		if err != nil {
			r.Outcome, r.Error = SyncFailed, err.Error()
		}
		if s.PendingSync <= req.ID {
			s.PendingSync = 0
		}
	})
}

// restoreHold loads app's recorded hold into its status once per worker,
// before its first reconcile.
func (c *Controller) restoreHold(ctx context.Context, app appset.Application, st *workerState) {
	if st.holdLoaded {
		return
	}
	// Read from the Engine, not the snapshot: the snapshot may not have
	// run yet when the first worker starts.
	d := c.dest(app.Destination.Swarm)
	h, err := apply.LoadHold(ctx, d.engine, d.ownerOf(app))
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			c.log.Warn("hold not read", "app", app.Name, "err", err)
		}
		return
	}
	st.holdLoaded = true
	if h.IsZero() {
		return
	}
	// A sync requested before the swarm was read may have set or cleared
	// a hold already; the newer decision wins over the recorded one.
	c.status.Update(app.Name, func(s *AppStatus) {
		if s.Held.IsZero() {
			s.Held = h
		}
	})
	c.log.Info("hold restored", "app", app.Name, "revision", h.Revision, "actor", h.Actor, "failed", h.Failed != nil)
}

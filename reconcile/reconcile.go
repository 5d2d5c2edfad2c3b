package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/stack"
)

// Outcome is what one reconcile of one application found and did.
type Outcome struct {
	Commit   string
	Plan     plan.Release
	Applied  bool
	Result   apply.Result
	Recorded *apply.Revision

	applyTook time.Duration // zero when nothing was applied
	liveDrift bool          // the swarm moved and is not corrected (yet)
}

// desired is an application rendered at one commit, with what the git
// part of rendering took (for metrics).
type desired struct {
	commit    string
	release   stack.Release
	gitTook   time.Duration
	gitFailed bool
}

// owner is the ownership of app's release by this controller.
func (c *Controller) owner(app appset.Application) stack.Owner {
	return stack.Owner{Controller: c.id, Application: app.Name, Release: app.Release}
}

// render resolves app's revision, fetches that commit and renders it into
// the release's desired specs. Errors are classed.
func (c *Controller) render(ctx context.Context, app appset.Application, commit string) (desired, error) {
	start := time.Now()
	if commit == "" {
		var err error
		commit, err = c.git.Resolve(ctx, app.Source.Repo, app.Source.Revision)
		if err != nil {
			return desired{gitTook: time.Since(start), gitFailed: true},
				classifyGit(fmt.Errorf("resolve %s at %q: %w", gitsource.RedactURL(app.Source.Repo), app.Source.Revision, err))
		}
	}
	tree, err := c.git.Checkout(ctx, app.Source.Repo, commit)
	if err != nil {
		return desired{commit: commit, gitTook: time.Since(start), gitFailed: true},
			classifyGit(fmt.Errorf("fetch %s at %s: %w", gitsource.RedactURL(app.Source.Repo), short(commit), err))
	}
	defer tree.Release()
	gitTook := time.Since(start)
	doc, err := render.Compose(ctx, render.Input{
		Root:      tree.Dir(),
		Path:      app.Source.Path,
		Files:     app.Source.Files,
		EnvFiles:  app.Source.EnvFiles,
		Variables: app.Source.Variables,
	})
	if err != nil {
		return desired{commit: commit, gitTook: gitTook}, &StalledError{Err: fmt.Errorf("render at %s: %w", short(commit), err)}
	}
	rel, err := stack.Convert(doc.Config, stack.Options{
		Owner: c.owner(app),
		Allow: stack.Allow{
			HostPaths: app.Allow.HostPaths,
			Networks:  app.Allow.Networks,
			Configs:   app.Allow.Configs,
			Secrets:   app.Allow.Secrets,
			Volumes:   app.Allow.Volumes,
		},
		Files: doc.Files,
	})
	if err != nil {
		return desired{commit: commit, gitTook: gitTook}, &StalledError{Err: fmt.Errorf("convert at %s: %w", short(commit), err)}
	}
	return desired{commit: commit, release: rel, gitTook: gitTook}, nil
}

// compare plans the desired release against its last recorded revision.
func (c *Controller) compare(ctx context.Context, app appset.Application, d desired) (plan.Release, *apply.Revision, error) {
	recorded, err := apply.LatestRevision(ctx, c.revisionSource(app.Name), c.owner(app))
	if err != nil {
		return plan.Release{}, nil, &TransientError{Err: fmt.Errorf("read recorded revision of %s: %w", app.Release, err)}
	}
	var before *stack.Release
	if recorded != nil {
		before = &recorded.Release
	}
	return plan.Compare(apply.RedactSecrets(d.release), before, plan.Options{}), recorded, nil
}

// Plan renders app at its current revision and compares it with what was
// last recorded, writing nothing. It is safe to call beside the workers.
func (c *Controller) Plan(ctx context.Context, name string) (Outcome, error) {
	return c.PlanAt(ctx, name, "")
}

// PlanAt is Plan at commit ("" = the revision the application tracks, or
// the commit it is held at).
func (c *Controller) PlanAt(ctx context.Context, name, commit string) (Outcome, error) {
	app, ok := c.app(name)
	if !ok {
		return Outcome{}, fmt.Errorf("%w: %s", ErrUnknownApplication, name)
	}
	if commit == "" {
		st, _ := c.status.Get(name)
		commit = st.Held.Revision
	}
	d, err := c.render(ctx, app, commit)
	if err != nil {
		return Outcome{Commit: d.commit}, err
	}
	p, recorded, err := c.compare(ctx, app, d)
	return Outcome{Commit: d.commit, Plan: p, Recorded: recorded}, err
}

// reconcile runs one full reconcile of app: plan, and apply when the policy
// or req says so. It records status and raises events; the returned error
// is classed.
func (c *Controller) reconcile(ctx context.Context, app appset.Application, req Request, st *appState) (out Outcome, err error) {
	ctx = notify.WithActor(ctx, req.Actor)
	start := time.Now()
	var d desired
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reconcile %s: panic: %v", app.Name, r)
			c.log.Error("reconcile panicked", "app", app.Name, "err", err, "stack", stackTrace())
		}
		c.record(app, out, err)
		c.observe(app, req, out, d, time.Since(start), err)
	}()
	c.status.Update(app.Name, func(s *AppStatus) { s.Phase = api.PhaseReconciling })

	d, err = c.render(ctx, app, req.Revision)
	out.Commit = d.commit
	if err != nil {
		// A stalled commit is reported once, not on every tick.
		if Class(err) == "stalled" && st.stalledCommit == d.commit && !req.Sync {
			return out, err
		}
		if Class(err) == "stalled" {
			st.stalledCommit = d.commit
			c.emit(ctx, app, notify.SyncFailed, d.commit, err.Error())
		}
		return out, err
	}
	st.stalledCommit = ""
	p, recorded, err := c.compare(ctx, app, d)
	out.Plan, out.Recorded = p, recorded
	if err != nil {
		return out, err
	}
	c.remember(app.Name, d.release)
	if err := c.observeLive(ctx, app, d, p, req, st, &out); err != nil {
		return out, err
	}
	apply := req.Sync || (app.SyncPolicy.Automated && p.Changed())
	if !apply {
		if p.Changed() && st.driftCommit != d.commit {
			st.driftCommit = d.commit
			c.emit(ctx, app, notify.DriftDetected, d.commit, p.Summary())
		}
		if !p.Changed() {
			c.pruneResources(ctx, app, d, req)
		}
		return out, nil
	}
	out, err = c.apply(ctx, app, d, p, req, out)
	if err == nil {
		c.pruneResources(ctx, app, d, req)
	} else if c.live != nil && rolledBack(d.release, c.live.Current()) != "" {
		st.rolledBack = d.commit // reported by the failed sync already
	}
	return out, err
}

// observeLive reads the live snapshot for app: health, a rollout Swarm
// rolled back, and live drift, which an automated application (or a sync)
// corrects. It does nothing without a live snapshot.
func (c *Controller) observeLive(ctx context.Context, app appset.Application, d desired, p plan.Release, req Request, st *appState, out *Outcome) error {
	if c.live == nil {
		return nil
	}
	snap := c.live.Current()
	h := releaseHealth(d.release, snap)
	var findings []plan.Finding
	if !p.Changed() && app.DriftDetection == appset.DriftLive && !snap.ReadFailed() {
		findings = c.liveDrift(app, d.release, snap)
	}
	c.status.Update(app.Name, func(s *AppStatus) {
		s.Health, s.HealthMessage, s.Running, s.Desired = h.State, h.Message, h.Running, h.Desired
		s.Findings = findings
	})
	out.liveDrift = len(findings) > 0
	if p.Changed() {
		return nil
	}
	// A rollout Swarm rolled back is a failed sync of that commit, reported
	// once, and never pushed again until git moves or someone syncs.
	if why := rolledBack(d.release, snap); why != "" && !req.Sync {
		err := &StalledError{Err: fmt.Errorf("release %s at %s: %s", app.Release, short(d.commit), why)}
		if st.rolledBack != d.commit {
			st.rolledBack = d.commit
			c.emit(ctx, app, notify.SyncFailed, d.commit, err.Error())
		}
		return err
	}
	if len(findings) == 0 {
		st.liveDrift = ""
		return nil
	}
	if line := describeFindings(findings); st.liveDrift != line {
		st.liveDrift = line
		c.emit(ctx, app, notify.LiveDriftDetected, d.commit, fmt.Sprintf("release %s: %s", app.Release, line))
	}
	if len(correctable(findings)) == 0 || req.Sync || !app.SyncPolicy.Automated {
		return nil // a sync redeploys everything anyway; a manual app only reports
	}
	if err := c.correct(ctx, app, d, findings); err != nil {
		return err
	}
	out.liveDrift = false
	st.liveDrift = ""
	c.status.Update(app.Name, func(s *AppStatus) { s.Findings = nil })
	return nil
}

func (c *Controller) apply(ctx context.Context, app appset.Application, d desired, p plan.Release, req Request, out Outcome) (Outcome, error) {
	if err := c.gate(app, d.release); err != nil {
		return out, err
	}
	if c.live != nil {
		if err := c.restamp(ctx, app, c.live.Current()); err != nil {
			return out, err
		}
	}
	c.emit(ctx, app, notify.SyncStarted, d.commit, p.Summary())
	c.status.Update(app.Name, func(s *AppStatus) { s.Phase = api.PhaseApplying })
	start := time.Now()
	defer c.markWrite(app.Name)
	res, err := apply.Apply(ctx, c.engine, d.release, apply.Options{
		Owner:        c.owner(app),
		ResolveImage: apply.ResolveImage(app.SyncPolicy.ResolveImage),
		Commit:       d.commit,
		Actor:        req.Actor,
		Logger:       c.log.With("app", app.Name),
	})
	out.Result = res
	out.applyTook = time.Since(start)
	if err != nil {
		err = classifyApply(fmt.Errorf("apply %s at %s: %w", app.Release, short(d.commit), err))
		c.emit(ctx, app, notify.SyncFailed, d.commit, err.Error())
		return out, err
	}
	if app.SyncPolicy.Wait {
		if err := c.waitHealthy(ctx, app, d.release); err != nil {
			err = fmt.Errorf("sync %s at %s: %w", app.Release, short(d.commit), err)
			c.emit(ctx, app, notify.SyncFailed, d.commit, err.Error())
			return out, err
		}
	}
	out.Applied = true
	c.emit(ctx, app, notify.SyncSucceeded, d.commit, applySummary(app.Release, res))
	return out, nil
}

// record stores what one reconcile found in the status table.
func (c *Controller) record(app appset.Application, out Outcome, err error) {
	now := c.now()
	c.status.Update(app.Name, func(s *AppStatus) {
		s.Automated = app.SyncPolicy.Automated
		s.LastReconcile = now
		s.Phase = api.PhaseIdle
		if out.Commit != "" {
			s.Revision = out.Commit
		}
		if out.Recorded != nil {
			s.DeployedRevision = out.Recorded.Commit
		}
		if out.Plan.Action.Valid() {
			s.Plan = []string{out.Plan.Summary()}
			s.Sync, s.Drift = Synced, ""
			switch {
			case out.Plan.Changed():
				s.Sync, s.Drift = OutOfSync, DriftGit
			case out.liveDrift:
				s.Sync, s.Drift = OutOfSync, DriftLive
			}
		}
		if out.Applied {
			s.Sync, s.Drift, s.DeployedRevision, s.LastSync = Synced, "", out.Commit, now
		}
		s.LastError, s.LastErrorClass = "", ""
		if err != nil {
			s.LastError, s.LastErrorClass = err.Error(), Class(err)
			if !out.Plan.Action.Valid() {
				s.Sync = Unknown
			}
		}
	})
}

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

func applySummary(release string, res apply.Result) string {
	counts := map[apply.Action]int{}
	for _, ch := range res.Changes {
		if ch.Kind != apply.KindRevision {
			counts[ch.Action]++
		}
	}
	msg := fmt.Sprintf("release %s: %d created, %d updated, %d unchanged", release,
		counts[apply.Created], counts[apply.Updated], counts[apply.Unchanged])
	if res.Revision > 0 {
		msg += fmt.Sprintf("; revision %d", res.Revision)
	}
	return msg
}

func classifyGit(err error) error {
	var remote *gitsource.RemoteError
	switch {
	case errors.Is(err, gitsource.ErrRevisionNotFound), errors.Is(err, gitsource.ErrAuth),
		errors.Is(err, gitsource.ErrRepositoryNotFound):
		return &StalledError{Err: err}
	case errors.As(err, &remote) && !remote.Transient():
		return &StalledError{Err: err}
	default:
		return &TransientError{Err: err}
	}
}

func classifyApply(err error) error {
	var foreign *apply.ForeignError
	if errors.As(err, &foreign) || apply.IsStalled(err) {
		return &StalledError{Err: err}
	}
	return &TransientError{Err: err}
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	if commit == "" {
		return "unresolved revision"
	}
	return commit
}

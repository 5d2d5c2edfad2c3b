package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/stack"
)

// Result is what one reconcile of one application found and did.
type Result struct {
	Commit   string
	Plan     plan.Release
	Applied  bool
	Applying apply.Result
	Recorded *apply.Revision
	// Artifacts are the release artifacts as this reconcile resolved them.
	Artifacts []artifact.Object
	// Warnings are the render's warnings (options Swarm ignores) and the
	// revision records skipped because they do not decode.
	Warnings []string

	applyTook time.Duration // zero when nothing was applied
	synced    LastSync      // the sync this reconcile wrote, its time unset; Trigger "": none
	liveDrift bool          // the swarm moved and is not corrected (yet)
	// moved says, for a release being installed on a new destination,
	// where it was before and what becomes of it there; "" otherwise.
	moved string
}

// desired is an application rendered at one commit and artifact versions,
// with what the git part of rendering took (for metrics).
type desired struct {
	commit    string
	source    appset.AppSource // where the release was rendered from
	release   stack.Release
	artifacts []artifact.Object
	chart     *chartRender // nil for a compose release
	gitTook   time.Duration
	gitFailed bool
}

// key identifies what d deploys: the commit and the artifact versions.
func (d desired) key() string {
	if len(d.artifacts) == 0 {
		return d.commit
	}
	return d.commit + "+" + versionsKey(d.artifacts)
}

// reconcile runs one full reconcile of app: render → compare → live drift
// → (when the policy or req says so) gate → apply → wait → prune. It
// records status and raises events; the returned error is classed.
func (c *Controller) reconcile(ctx context.Context, app appset.Application, req Request, st *appState) (out Result, err error) {
	ctx = notify.WithActor(ctx, req.Actor)
	start := time.Now()
	var d desired
	wasQuiet := false
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reconcile %s: panic: %v", app.Name, r)
			c.log.Error("reconcile panicked", "app", app.Name, "err", err, "stack", string(debug.Stack()))
		}
		c.record(app, out, err)
		c.observe(app, req, out, d, time.Since(start), err, wasQuiet)
	}()
	c.status.Update(app.Name, func(s *AppStatus) { s.Phase = PhaseReconciling })
	// Nothing is rendered, compared or written for a swarm that does not
	// answer; its applications are unknown until it does.
	if err := c.unreachable(app); err != nil {
		c.markUnknown(app.Name, err)
		return out, err
	}

	// Render: the artifact versions, then the compose files at the commit
	// (a held revision wins over what the application tracks). A tick
	// whose inputs are those of the last tick that found nothing to do
	// ends here: it would render, compare and find the same.
	d, err = c.resolveInputs(ctx, app, req.Revision, st.known(app, req))
	if err == nil && req.Revision == "" && d.source.Repo == app.Source.Repo && d.source.Revision == app.Source.Revision {
		st.resolved = resolvedCommit{repo: app.Source.Repo, revision: app.Source.Revision, commit: d.commit}
	}
	quiet := ""
	if err == nil {
		quiet = c.quietKey(app, req, d, &st.quietInputs)
		if quiet != "" && quiet == st.quiet.key {
			c.observeQuiet(app, st.quiet)
			c.windowVerdict(app) // windows move with time, not with the inputs
			d, wasQuiet = st.quiet.d, true
			return st.quiet.out, nil
		}
		if quiet != "" && quiet == st.templateFailed.key {
			out.Commit, out.Artifacts, wasQuiet = d.commit, d.artifacts, true
			return out, st.templateFailed.err
		}
		d, err = c.renderResolved(ctx, app, d)
	}
	st.quiet, st.templateFailed = quietTick{}, templateFailure{}
	if tmpl := (*templateError)(nil); quiet != "" && errors.As(err, &tmpl) {
		st.templateFailed = templateFailure{key: quiet, err: err}
	}
	out.Commit, out.Artifacts = d.commit, d.artifacts
	c.reportWaiting(ctx, app, d, st)
	if err != nil {
		// A stalled commit is reported once, not on every tick.
		stalled := outcome.Of(err) == outcome.Stalled
		if key := stalledKey(d.commit, err); stalled && (st.stalled != key || req.Sync) {
			st.stalled = key
			c.emit(ctx, app, notify.SyncFailed, d.commit, err.Error())
		}
		return out, err
	}
	st.stalled = ""
	// Compare: git moved when the render differs from the last recorded
	// revision; the swarm moved when live services differ from the render.
	p, latest, err := c.compare(ctx, app, d)
	recorded := latest.Revision
	out.Plan, out.Recorded = p, recorded
	out.Warnings = slices.Concat(d.release.Warnings, latest.Skipped)
	c.warn(app, d, out.Warnings, st)
	if err != nil {
		return out, err
	}
	if recorded == nil {
		out.moved = c.movedFrom(app)
	}
	remembered := c.remember(app, d.release)
	// Sync windows: a window that holds the application keeps every write
	// the controller would make on its own (apply, drift correction,
	// prune, previews); only a sync someone asked for passes, if the
	// window lets manual syncs through.
	held := c.windowVerdict(app)
	if req.Sync && held.ManualDenied {
		err := &outcome.StalledError{Err: fmt.Errorf("sync of %s refused: %s, which allows no manual sync", app.Name, held)}
		c.emit(ctx, app, notify.SyncFailed, d.commit, err.Error())
		return out, err
	}
	if err := c.observeLive(ctx, app, d, p, req, held.Held, st, &out); err != nil {
		return out, err
	}
	if held.Held && !req.Sync {
		c.setWaitingFor(app.Name, nil)
		// Reported once per commit and versions, like any drift, naming
		// the window; nothing is written until it lets syncs through.
		if p.Changed() && st.windowCommit != d.key() {
			st.windowCommit = d.key()
			c.emit(ctx, app, notify.DriftDetected, d.commit, held.String()+": "+p.Summary())
		}
		return out, nil
	}
	st.windowCommit = ""
	// Gate on policy: a manual application (or an automated one with
	// nothing to write) only reports, once per commit and versions.
	if !req.Sync && !(app.SyncPolicy.Automated && p.Changed()) {
		c.setWaitingFor(app.Name, nil)
		if p.Changed() && st.driftCommit != d.key() {
			st.driftCommit = d.key()
			summary := p.Summary()
			if out.moved != "" {
				summary += "; " + out.moved
			}
			c.emit(ctx, app, notify.DriftDetected, d.commit, summary)
		}
		// Prune and previews follow a main release that is where git wants
		// it; while it waits for a sync they wait too.
		if !p.Changed() {
			c.pruneResources(ctx, app, d, req)
			if !req.release {
				c.reconcilePreviews(ctx, app, d)
			}
			if quiet != "" && !out.liveDrift && waitingArtifacts(d.artifacts) == "" {
				q := d
				q.release, q.chart = remembered, nil
				// A drift correction made now is not made again by the
				// quiet ticks that replay this one.
				qout := withoutRecordedRelease(out)
				qout.synced = LastSync{}
				st.quiet = quietTick{key: quiet, out: qout, d: q}
			}
		}
		return out, nil
	}
	// dependsOn: the application is applied only after the applications
	// it depends on are synced and healthy at their current revision.
	if err := c.awaitDependencies(app); err != nil {
		return out, err
	}
	// Someone else's objects refused this very render before, and nothing
	// changed since: say so again in the status, but write nothing and
	// raise no second sync-started/sync-failed pair.
	if f := st.foreign; f != nil && !req.Sync && f.key == d.key() && c.liveOf(app) != nil && c.stillRefused(app, f) {
		return out, f.err
	}
	st.foreign = nil
	if f := st.hookFailed; f != nil && !req.Sync && f.key == d.key() {
		return out, f.err
	}
	st.hookFailed = nil
	// Apply, wait, then prune what the new revision stopped declaring.
	out, err = c.applyRelease(ctx, app, d, p, req, out)
	if out.Applied {
		out.synced = LastSync{Revision: d.commit, Actor: req.Actor, Trigger: triggerOf(req, recorded, d.commit)}
	}
	if preSyncFailed(err) {
		st.hookFailed = &hookFailure{key: d.key(), err: err}
	}
	var foreign *apply.ForeignError
	if errors.As(err, &foreign) && c.liveOf(app) != nil {
		// The namespace is read at the next tick: the snapshot now may
		// predate what the refused apply created before it stopped.
		st.foreign = &foreignRefusal{key: d.key(), err: err}
	}
	if err == nil {
		c.pruneResources(ctx, app, d, req)
		if !req.release {
			c.reconcilePreviews(ctx, app, d)
		}
	} else if c.liveOf(app) != nil && rolledBack(d.release, c.liveOf(app).Current()) != "" {
		st.rolledBack = d.key() // reported by the failed sync already
	}
	return out, err
}

// triggerOf says what started a sync of commit that req made, recorded
// being the release's revision before it (nil: none).
func triggerOf(req Request, recorded *apply.Revision, commit string) Trigger {
	switch {
	case req.Sync:
		return TriggerSync
	case req.webhook:
		return TriggerWebhook
	case recorded == nil || recorded.Commit != commit:
		return TriggerGit
	default:
		return TriggerInterval
	}
}

// stillRefused reports whether the release's namespace is as it was when
// f was refused. The first look after the refusal, from a snapshot that
// has seen the refused apply's writes, records the namespace; until such a
// snapshot exists nothing is known to have changed.
func (c *Controller) stillRefused(app appset.Application, f *foreignRefusal) bool {
	snap := c.liveOf(app).Current()
	if snap.ReadFailed() || !c.seenWrites(app.Name, snap) {
		return true
	}
	ns := namespaceState(snap, app.Release)
	if !f.observed {
		f.namespace, f.observed = ns, true
	}
	return ns == f.namespace
}

// stalledKey names what a stalled failure is about, so that it is
// reported once: the commit that cannot be rendered, or, when the revision
// did not even resolve to a commit (a deleted branch or tag), the error
// itself. An empty key would read as "nothing reported yet" and never be
// reported (see TestFaultGitServerFailuresChangeNothingAndConverge).
func stalledKey(commit string, err error) string {
	if commit != "" {
		return commit
	}
	return "unresolved: " + err.Error()
}

// reportWaiting raises one drift-detected when an artifact's desired
// version starts waiting for its image (not one per tick), and forgets it
// once nothing waits.
func (c *Controller) reportWaiting(ctx context.Context, app appset.Application, d desired, st *appState) {
	line := waitingArtifacts(d.artifacts)
	if line != "" && line != st.artifactWait {
		c.emit(ctx, app, notify.DriftDetected, d.commit, "artifacts waiting for their image: "+line)
	}
	st.artifactWait = line
}

// render resolves app's revision (commit "" = the revision it tracks),
// fetches that commit and renders it into the release's desired specs.
// Errors are classed.
func (c *Controller) render(ctx context.Context, app appset.Application, commit string) (desired, error) {
	d, err := c.resolveInputs(ctx, app, commit, "")
	if err != nil {
		return d, err
	}
	return c.renderResolved(ctx, app, d)
}

// resolveInputs finds what a render of app would read: the artifact
// versions and the commit (commit "" = the revision app tracks; known, when
// not "", is that revision's commit as git last named it, taken instead of
// asking again unless an artifact names the source). It reads refs and the
// registry gate, both cached, and renders nothing.
func (c *Controller) resolveInputs(ctx context.Context, app appset.Application, commit, known string) (desired, error) {
	start := time.Now()
	arts, err := c.resolveArtifacts(ctx, app)
	if err != nil {
		return desired{artifacts: arts.objects, gitTook: time.Since(start), gitFailed: outcome.Of(err) == outcome.Transient}, err
	}
	source := app.Source
	if arts.source != "" {
		// The infrastructure artifact names the stack definitions and the
		// version of them to deploy; a held commit still wins, since a
		// rollback must keep its commit whatever the artifact files say.
		source.Repo, source.Revision = arts.source, arts.revision
		if commit == "" {
			commit = arts.revision
		}
	}
	if commit == "" && arts.source == "" {
		commit = known
	}
	if commit == "" {
		commit, err = c.git.Resolve(ctx, source.Repo, source.Revision)
		if err != nil {
			return desired{artifacts: arts.objects, gitTook: time.Since(start), gitFailed: true},
				classifyGit(fmt.Errorf("resolve %s at %q: %w", gitsource.RedactURL(source.Repo), source.Revision, err))
		}
	}
	return desired{commit: commit, source: source, artifacts: arts.objects, gitTook: time.Since(start)}, nil
}

// renderResolved fetches d's commit and renders it with d's artifact
// versions into the release's desired specs.
func (c *Controller) renderResolved(ctx context.Context, app appset.Application, d desired) (desired, error) {
	start := time.Now()
	tree, err := c.git.Checkout(ctx, d.source.Repo, d.commit)
	if err != nil {
		d.gitTook, d.gitFailed = d.gitTook+time.Since(start), true
		return d, classifyGit(fmt.Errorf("fetch %s at %s: %w", gitsource.RedactURL(d.source.Repo), gitsource.ShortCommit(d.commit), err))
	}
	defer tree.Release()
	d.gitTook += time.Since(start)
	rel, cr, err := c.compose(ctx, app, tree.Dir(), d, nil, c.owner(app))
	if err != nil {
		return d, err
	}
	if err := c.checkSelf(app, rel, d.commit); err != nil {
		return d, err
	}
	d.release, d.chart = rel, cr
	return d, nil
}

// compose renders d's source, checked out in root, with d's artifact
// versions and extra variables (the app set's own variables win over
// both), into the Swarm specs of the release owner names. Services using
// an artifact's image get its resolved reference; an artifact without a
// version is a waiting error.
func (c *Controller) compose(ctx context.Context, app appset.Application, root string, d desired, extra map[string]string, owner stack.Owner) (stack.Release, *chartRender, error) {
	// Precedence, lowest first: artifact versions, the caller's extras
	// (a preview's domain), then what the app set states, so an operator
	// can always pin a variable by hand.
	vars := artifact.Variables(withStandIns(d.artifacts))
	maps.Copy(vars, extra)
	maps.Copy(vars, app.Source.Variables)
	var doc *render.Document
	var cr *chartRender
	if app.Chart != nil {
		r, err := c.renderChart(ctx, app, root, d, extra, owner)
		if err != nil {
			return stack.Release{}, nil, err
		}
		doc, cr = r.doc, &r
	} else {
		var err error
		doc, err = render.Compose(ctx, render.Input{
			Root:      root,
			Path:      d.source.Path,
			Files:     d.source.Files,
			EnvFiles:  d.source.EnvFiles,
			Variables: vars,
			Keys:      c.keys,
		})
		if err != nil {
			return stack.Release{}, nil, &outcome.StalledError{Err: fmt.Errorf("render at %s: %w", gitsource.ShortCommit(d.commit), err)}
		}
	}
	rel, err := stack.Convert(doc.Config, stack.Options{
		Owner: owner,
		Allow: stack.Allow{
			HostPaths:    app.Allow.HostPaths,
			Networks:     app.Allow.Networks,
			Configs:      app.Allow.Configs,
			Secrets:      app.Allow.Secrets,
			Volumes:      app.Allow.Volumes,
			Capabilities: app.Allow.Capabilities,
		},
		Files:        doc.Files,
		Waves:        doc.Waves,
		Hooks:        stackHooks(doc.Hooks),
		Masked:       doc.Masked,
		CheckAddress: c.addressCheck(ctx),
	})
	if err != nil {
		err = &outcome.StalledError{Err: fmt.Errorf("convert at %s: %w", gitsource.ShortCommit(d.commit), err)}
		return stack.Release{}, nil, hideDecrypted(err, stack.Release{Sensitive: doc.Sensitive})
	}
	rel.Sensitive, rel.Warnings = doc.Sensitive, doc.Warnings
	// A service on an artifact's repository, or any stand-in left in the
	// release, is a version the artifact does not have: wait for it.
	missing := append(useArtifactImages(&rel, d.artifacts), usesStandIns(rel, d.artifacts)...)
	slices.Sort(missing)
	if missing = slices.Compact(missing); len(missing) > 0 {
		return stack.Release{}, nil, &outcome.WaitingError{Err: fmt.Errorf("artifacts %s: no version to deploy yet: %s",
			strings.Join(missing, ", "), noVersion(d.artifacts, missing)), Retry: artifact.DefaultMissingFor}
	}
	return rel, cr, nil
}

// addressCheck is Options.CheckAddress under ctx, as stack.Convert takes
// it; nil when the controller checks no address.
func (c *Controller) addressCheck(ctx context.Context) func(string) error {
	if c.checkAddr == nil {
		return nil
	}
	return func(host string) error { return c.checkAddr(ctx, host) }
}

// compare plans the desired release against its last recorded revision
// (the "git moved" half of drift), which it returns with the revision
// configs it skipped because they do not decode.
func (c *Controller) compare(ctx context.Context, app appset.Application, d desired) (plan.Release, apply.Latest, error) {
	latest, err := apply.ReadLatest(ctx, c.revisionSource(app), c.owner(app))
	if err != nil {
		return plan.Release{}, apply.Latest{}, &outcome.TransientError{Err: fmt.Errorf("read recorded revision of %s: %w", app.Release, err)}
	}
	var before *stack.Release
	if latest.Revision != nil {
		before = &latest.Revision.Release
	}
	return plan.Compare(apply.RedactSecrets(d.release), before, plan.Options{}), latest, nil
}

// warn logs warnings (the render's, and revision records skipped) once
// per commit and versions, not on every tick; the status shows them all
// the while (see TestRenderWarningsReachTheLogOnceAndTheStatus).
func (c *Controller) warn(app appset.Application, d desired, warnings []string, st *appState) {
	key := d.key() + "\x00" + strings.Join(warnings, "\x00")
	if len(warnings) == 0 || st.warned == key {
		st.warned = key
		return
	}
	st.warned = key
	for _, w := range warnings {
		c.log.Warn("render warning", "app", app.Name, "revision", d.commit, "warning", w)
	}
}

// gate refuses a write while a service of rel is still updating or rolling
// back: the reconcile waits and says so.
func (c *Controller) gate(app appset.Application, rel stack.Release) error {
	live := c.liveOf(app)
	if live == nil {
		return nil
	}
	if why := rollout(rel, live.Current()); why != "" {
		return &outcome.WaitingError{Err: fmt.Errorf("release %s: waiting for a rollout: %s", rel.Name, why), Retry: 5 * time.Second}
	}
	return nil
}

// applyRelease writes d to the swarm after the gate, raising sync-started
// and then sync-succeeded or sync-failed, and waits for health when the
// policy asks.
func (c *Controller) applyRelease(ctx context.Context, app appset.Application, d desired, p plan.Release, req Request, out Result) (Result, error) {
	if err := c.gate(app, d.release); err != nil {
		return out, err
	}
	if d.chart != nil && out.Recorded != nil {
		if err := checkStable(ctx, *d.chart); err != nil {
			return out, err
		}
	}
	var record *apply.ChartRecord
	if d.chart != nil {
		record = d.chart.record
	}
	if c.liveOf(app) != nil {
		if err := c.restamp(ctx, app, c.liveOf(app).Current()); err != nil {
			return out, err
		}
	}
	summary := p.Summary()
	if out.moved != "" {
		summary += "; " + out.moved
	}
	c.emit(ctx, app, notify.SyncStarted, d.commit, summary)
	c.status.Update(app.Name, func(s *AppStatus) { s.Phase = PhaseApplying })
	start := time.Now()
	defer c.beginWrite(app.Name)()
	opts := apply.Options{
		Digests:      c.destOf(app).digests,
		Owner:        c.owner(app),
		ResolveImage: apply.ResolveImage(app.SyncPolicy.ResolveImage),
		Commit:       d.commit,
		Actor:        req.Actor,
		Force:        req.Force,
		Chart:        record,
		Logger:       c.log.With("app", app.Name),
		Self:         c.selfIn(app, d.release),
	}
	required, err := c.createRequired(ctx, app, d.chart)
	if err != nil {
		err = fmt.Errorf("apply %s at %s: %w", app.Release, gitsource.ShortCommit(d.commit), err)
		c.syncFailed(ctx, app, d.commit, err.Error())
		return out, err
	}
	// Pre-sync hooks (migrations) run before any service is written: one
	// that fails leaves the release's services as they were.
	if err := c.preSync(ctx, app, d, opts); err != nil {
		c.syncFailed(ctx, app, d.commit, err.Error())
		return out, err
	}
	res, err := c.applyWaves(ctx, app, d.release, opts)
	res.Changes = append(required, res.Changes...)
	out.Applying = res
	out.applyTook = time.Since(start)
	if err != nil {
		// apply classes what it knows (a spec the Engine refuses, someone
		// else's objects in the way: stalled); anything else may pass on
		// a later attempt.
		err = fmt.Errorf("apply %s at %s: %w", app.Release, gitsource.ShortCommit(d.commit), err)
		if outcome.Of(err) != outcome.Stalled {
			err = &outcome.TransientError{Err: err}
		}
		err = hideDecrypted(err, d.release)
		c.syncFailed(ctx, app, d.commit, err.Error())
		return out, err
	}
	// The controller's own service is not written yet (res.Self): the rest
	// of the release is what is waited for and what post-sync hooks run
	// against. Its write comes last whatever they found, since the
	// revision already records it; a failure is reported before it.
	var failed error
	if app.SyncPolicy.Wait {
		if err := c.waitHealthy(ctx, app, withoutService(d.release, res.Self), time.Now()); err != nil {
			failed = hideDecrypted(fmt.Errorf("sync %s at %s: %w", app.Release, gitsource.ShortCommit(d.commit), err), d.release)
		}
	}
	if failed == nil {
		out.Applied = true
		// Post-sync hooks run against what was written (and, with wait,
		// found healthy); a failure fails the sync, the release stays.
		failed = c.runHooks(ctx, app, d, stack.PostSync)
	}
	if failed != nil {
		c.syncFailed(ctx, app, d.commit, failed.Error())
	}
	if res.Self != nil {
		ch, err := c.writeSelf(ctx, app, d.commit, res.Self)
		switch {
		case err != nil && failed == nil:
			c.syncFailed(ctx, app, d.commit, err.Error())
			return out, err
		case err == nil:
			res.Changes = append(res.Changes, ch)
			out.Applying = res
		}
	}
	if failed != nil {
		return out, failed
	}
	c.emit(ctx, app, notify.SyncSucceeded, d.commit, applySummary(app.Release, res))
	return out, nil
}

// waitHealthy waits, up to the application's timeout, until every service
// of rel is healthy and converged (see converged) in a snapshot taken
// after written, when the write ended; a zero written (nothing was
// written) takes any snapshot that shows the application's earlier writes.
// When a second passes with no change, it asks the Engine itself (see
// nextWaitStep): no event may be coming. A rollback by Swarm fails at once
// with the daemon's reason.
func (c *Controller) waitHealthy(ctx context.Context, app appset.Application, rel stack.Release, written time.Time) error {
	live := c.liveOf(app)
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
		last := releaseHealth(rel, snap)
		pending := cmp.Or(rollout(rel, snap), converged(rel, snap))
		step := nextWaitStep(written, snap.TakenAt(), c.seenEndedWrites(app.Name, snap), last.State == health.Healthy && pending == "")
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

// applySummary is the message of sync-succeeded: what the write did.
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

// classifyGit classes a git failure: a revision, repository or credential
// git refuses, or a repository over the git cache's caps, is stalled until
// someone changes the app set or the remote; anything else (the network, a
// 5xx) is transient.
func classifyGit(err error) error {
	var remote *gitsource.RemoteError
	switch {
	case errors.Is(err, gitsource.ErrRevisionNotFound), errors.Is(err, gitsource.ErrAuth),
		errors.Is(err, gitsource.ErrRepositoryNotFound), errors.Is(err, gitsource.ErrTooLarge):
		return &outcome.StalledError{Err: err}
	case errors.As(err, &remote) && !remote.Transient():
		return &outcome.StalledError{Err: err}
	default:
		return &outcome.TransientError{Err: err}
	}
}

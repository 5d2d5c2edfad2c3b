package reconcile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/chart"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
)

// An application with a release file (chart.releases) deploys several
// releases, each a chart with its values, in waves. Each release runs the
// same sync as a one-release application, as a derived application whose
// release is "<release>-<name>"; this file orders them and folds their
// outcomes into the application's one status.

// multiRelease reports whether app declares its releases in a release file.
func multiRelease(app appset.Application) bool {
	return app.Chart != nil && app.Chart.Releases != ""
}

// declaredReleases remembers, per application, the release names its
// release file declared at the last read, so the app-set-level prune
// knows them as declared.
type declaredReleases struct {
	mu    sync.Mutex
	byApp map[string][]string
}

// set records the releases app's release file declares.
func (d *declaredReleases) set(app string, names []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byApp == nil {
		d.byApp = map[string][]string{}
	}
	d.byApp[app] = slices.Clone(names)
}

// get returns a copy of the releases app's release file declared.
func (d *declaredReleases) get(app string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.byApp[app])
}

// derived is the one-release application that deploys spec of app.
func derived(app appset.Application, spec chart.ReleaseSpec, waitForHealth bool) appset.Application {
	sub := app
	sub.Release = app.Release + "-" + spec.Name
	sub.Chart = &appset.Chart{Path: spec.Chart, Values: spec.Values, Set: spec.Set}
	if waitForHealth {
		// A later wave starts only once this one converged.
		sub.SyncPolicy.Wait = true
	}
	return sub
}

// reconcileReleases reads app's release file at the commit the
// application is at, then syncs each release wave by wave: a wave starts
// only after the previous one converged, and a failing wave stops the
// later ones, whose releases stay as they are.
func (c *Controller) reconcileReleases(ctx context.Context, app appset.Application, req Request, st *appState) (Result, error) {
	ctx = notify.WithActor(ctx, req.Actor)
	specs, commit, err := c.readReleases(ctx, app, req.Revision)
	if err != nil {
		if key := stalledKey(commit, err); outcome.Of(err) == outcome.Stalled && (st.stalled != key || req.Sync) {
			st.stalled = key
			c.emit(ctx, app, notify.SyncFailed, commit, err.Error())
		}
		c.record(app, Result{Commit: commit}, err)
		return Result{Commit: commit}, err
	}
	st.stalled = ""
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		names = append(names, app.Release+"-"+s.Name)
	}
	c.declared.set(app.Name, names)
	if st.sub == nil {
		st.sub = map[string]*appState{}
	}
	lastWave := specs[len(specs)-1].Wave
	var statuses []AppStatus
	var results []Result
	var failed error
	for i := 0; i < len(specs) && failed == nil; {
		wave := specs[i].Wave
		for ; i < len(specs) && specs[i].Wave == wave; i++ {
			sub := derived(app, specs[i], wave != lastWave)
			sst := st.sub[sub.Release]
			if sst == nil {
				sst = &appState{holdLoaded: true}
				st.sub[sub.Release] = sst
			}
			out, err := c.reconcile(ctx, sub, Request{Sync: req.Sync, Actor: req.Actor, ID: req.ID, Revision: commit,
				Prune: req.Prune, Force: req.Force, release: true, webhook: req.webhook}, sst)
			results = append(results, out)
			if s, ok := c.status.Get(app.Name); ok {
				statuses = append(statuses, s)
			}
			if err != nil && failed == nil {
				failed = fmt.Errorf("wave %d, release %s: %w", wave, sub.Release, err)
			}
		}
	}
	out := fold(commit, results)
	c.foldStatus(app, statuses, out, failed)
	return out, failed
}

// readReleases resolves the commit app deploys (held wins) and reads its
// release file there.
func (c *Controller) readReleases(ctx context.Context, app appset.Application, commit string) ([]chart.ReleaseSpec, string, error) {
	if commit == "" {
		var err error
		commit, err = c.git.Resolve(ctx, app.Source.Repo, app.Source.Revision)
		if err != nil {
			return nil, "", classifyGit(fmt.Errorf("resolve %s at %q: %w", gitsource.RedactURL(app.Source.Repo), app.Source.Revision, err))
		}
	}
	tree, err := c.git.Checkout(ctx, app.Source.Repo, commit)
	if err != nil {
		return nil, commit, classifyGit(fmt.Errorf("fetch %s at %s: %w", gitsource.RedactURL(app.Source.Repo), gitsource.ShortCommit(commit), err))
	}
	defer tree.Release()
	root, err := os.OpenRoot(tree.Dir())
	if err != nil {
		return nil, commit, &outcome.TransientError{Err: fmt.Errorf("release file at %s: %w", gitsource.ShortCommit(commit), err)}
	}
	defer root.Close()
	specs, err := chart.LoadReleases(root.FS(), app.Chart.Releases)
	if err != nil {
		return nil, commit, &outcome.StalledError{Err: fmt.Errorf("release file at %s: %w", gitsource.ShortCommit(commit), err)}
	}
	if len(specs) == 0 {
		return nil, commit, &outcome.StalledError{Err: errors.New("release file declares no releases")}
	}
	return specs, commit, nil
}

// fold sums the results of an application's releases into one.
func fold(commit string, results []Result) Result {
	out := Result{Commit: commit}
	for _, r := range results {
		out.Applied = out.Applied || r.Applied
		out.applyTook += r.applyTook
		out.liveDrift = out.liveDrift || r.liveDrift
		out.Artifacts = r.Artifacts
		if r.Plan.Changed() || !out.Plan.Action.Valid() {
			out.Plan = r.Plan
		}
	}
	return out
}

// foldStatus writes the application's status from the statuses its
// releases' syncs left, one after the other: a plan line per release, the
// worst sync state and health, every drift finding, and the first error.
func (c *Controller) foldStatus(app appset.Application, statuses []AppStatus, out Result, failed error) {
	c.status.Update(app.Name, func(s *AppStatus) {
		s.Plan, s.Findings, s.Unmanaged = nil, nil, nil
		s.Sync, s.Drift = Synced, ""
		healths := map[string]health.Result{}
		for i, rs := range statuses {
			s.Plan = append(s.Plan, rs.Plan...)
			s.Findings = append(s.Findings, rs.Findings...)
			s.Unmanaged = append(s.Unmanaged, rs.Unmanaged...)
			switch {
			case rs.Sync == Unknown:
				s.Sync = Unknown
			case rs.Sync == OutOfSync && s.Sync != Unknown:
				s.Sync = OutOfSync
				if s.Drift == "" {
					s.Drift = rs.Drift
				}
			}
			if rs.Health != "" {
				healths[fmt.Sprint(i)] = health.Result{State: rs.Health, Message: rs.HealthMessage, Running: rs.Running, Desired: rs.Desired}
			}
		}
		if len(healths) > 0 {
			h := health.Application(healths)
			s.Health, s.HealthMessage, s.Running, s.Desired = h.State, h.Message, h.Running, h.Desired
		}
		s.Revision = out.Commit
		s.LastError, s.LastErrorClass = "", ""
		if failed != nil {
			s.LastError, s.LastErrorClass = failed.Error(), outcome.Of(failed)
		}
	})
}

// Releases returns the release names of application name: its release, or
// those its release file declared at the last read.
func (c *Controller) Releases(name string) ([]string, error) {
	app, err := c.lookup(name)
	if err != nil {
		return nil, err
	}
	if !multiRelease(app) {
		return []string{app.Release}, nil
	}
	return c.declared.get(name), nil
}

// declaresRelease reports whether app's release file declared release.
func (c *Controller) declaresRelease(app, release string) bool {
	return slices.Contains(c.declared.get(app), release)
}

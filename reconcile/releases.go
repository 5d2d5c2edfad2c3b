package reconcile

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/chart"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/syncpass"
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
func (c *Controller) reconcileReleases(ctx context.Context, app appset.Application, req Request, st *workerState) (Result, error) {
	ctx = notify.WithActor(ctx, req.Actor)
	env := c.dest(app.Destination.Swarm).env
	specs, commit, err := syncpass.ReadReleases(ctx, env, app, req.Revision)
	st.memo.Report(ctx, env, app, req.Sync, commit, err)
	if err != nil {
		c.record(app, syncpass.Outcome{Result: Result{Commit: commit}, Err: err})
		return Result{Commit: commit}, err
	}
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		names = append(names, app.Release+"-"+s.Name)
	}
	c.declared.set(app.Name, names)
	if st.sub == nil {
		st.sub = map[string]*syncpass.Memo{}
	}
	lastWave := specs[len(specs)-1].Wave
	var statuses []AppStatus
	var results []Result
	var failed error
	for i := 0; i < len(specs) && failed == nil; {
		wave := specs[i].Wave
		for ; i < len(specs) && specs[i].Wave == wave; i++ {
			sub := derived(app, specs[i], wave != lastWave)
			memo := st.sub[sub.Release]
			if memo == nil {
				memo = &syncpass.Memo{}
				st.sub[sub.Release] = memo
			}
			out, err := c.reconcile(ctx, sub, Request{Sync: req.Sync, Actor: req.Actor, ID: req.ID, Revision: commit,
				Prune: req.Prune, Force: req.Force, release: true, webhook: req.webhook, rollback: req.Revision != ""}, memo, 0)
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

// fold sums the results of an application's releases into one.
func fold(commit string, results []Result) Result {
	out := Result{Commit: commit}
	for _, r := range results {
		out.Applied = out.Applied || r.Applied
		out.ApplyTook += r.ApplyTook
		out.LiveDrift = out.LiveDrift || r.LiveDrift
		out.Artifacts = r.Artifacts
		if r.Plan.Changed() || !out.Plan.Action.Valid() {
			out.Plan = r.Plan
		}
	}
	return out
}

// foldStatus writes the application's status from the statuses its
// releases' syncs left, one after the other: a plan line per release, the
// worst sync state, every drift finding, and the first error. Health is
// the worst of the releases already (refreshHealth).
func (c *Controller) foldStatus(app appset.Application, statuses []AppStatus, out Result, failed error) {
	c.status.Update(app.Name, func(s *AppStatus) {
		s.Plan, s.Findings, s.Unmanaged = nil, nil, nil
		s.Sync, s.Drift = Synced, ""
		for _, rs := range statuses {
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
	app, err := c.Application(name)
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

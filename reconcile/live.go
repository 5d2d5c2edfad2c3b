package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// observeLive reads the live snapshot for app: health, a rollout Swarm
// rolled back, and live drift, which an automated application (or a sync)
// corrects. It does nothing without a live snapshot.
// A sync window that holds the application (held) lets findings be
// reported but not corrected.
func (c *Controller) observeLive(ctx context.Context, app appset.Application, d desired, p plan.Release, req Request, held bool, st *appState, out *Result) error {
	if c.liveOf(app) == nil {
		return nil
	}
	snap := c.liveOf(app).Current()
	h := releaseHealth(d.release, snap)
	var findings []plan.Finding
	// A snapshot taken before this application's last write ended has not
	// seen what the write created: comparing it would report every new
	// service missing (see TestInstallRaisesNoLiveDrift). The next refresh
	// wakes the application again.
	if !p.Changed() && app.DriftDetection == appset.DriftLive && !snap.ReadFailed() && c.seenWrites(app.Name, snap) {
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
		err := &outcome.StalledError{Err: fmt.Errorf("release %s at %s: %s", app.Release, gitsource.ShortCommit(d.commit), why)}
		if st.rolledBack != d.key() {
			st.rolledBack = d.key()
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
	if len(correctable(findings)) == 0 || req.Sync || !app.SyncPolicy.Automated || held {
		return nil // a sync redeploys everything anyway; a manual or held app only reports
	}
	if err := c.correct(ctx, app, d, findings); err != nil {
		return err
	}
	out.liveDrift = false
	out.synced = LastSync{Revision: d.commit, Actor: req.Actor, Trigger: TriggerDriftCorrection}
	st.liveDrift = ""
	c.status.Update(app.Name, func(s *AppStatus) { s.Findings = nil })
	return nil
}

// liveDrift compares the running services of an unchanged release with its
// render: the "swarm moved" half of drift.
// Values decrypted from SOPS files are masked in the findings, on both
// sides: the live spec holds them too.
func (c *Controller) liveDrift(app appset.Application, rel stack.Release, snap swarm.Snapshot) []plan.Finding {
	findings := plan.Drift(rel, servicesOf(snap, rel.Name), plan.DriftOptions{
		Owner:        c.owner(app),
		NetworkNames: snap.NetworkNames(),
		ConfigNames:  snap.ConfigNames(),
	})
	if len(rel.Sensitive) > 0 {
		for i, f := range findings {
			f.Path, f.Desired, f.Live, f.Reason = rel.Mask(f.Path), rel.Mask(f.Desired), rel.Mask(f.Live), rel.Mask(f.Reason)
			findings[i] = f
		}
	}
	return findings
}

// correctable returns the findings an automated application puts right:
// everything but what Swarm rolled back, which must never be pushed back
// into the failing spec, and unexpected services, which are prune's.
func correctable(findings []plan.Finding) []plan.Finding {
	var out []plan.Finding
	for _, f := range findings {
		if f.Kind != plan.RolledBack && f.Kind != plan.Unexpected {
			out = append(out, f)
		}
	}
	return out
}

// describeFindings is the one-line summary events and the status carry.
func describeFindings(findings []plan.Finding) string {
	var parts []string
	for _, f := range findings {
		what := string(f.Kind)
		if f.Field != "" {
			what += " " + f.Field
		}
		parts = append(parts, f.Service+": "+what)
	}
	slices.Sort(parts)
	return strings.Join(slices.Compact(parts), "; ")
}

// correct redeploys the drifted services of rel from the recorded state,
// without writing a revision, and leaves rolled-back services alone.
func (c *Controller) correct(ctx context.Context, app appset.Application, d desired, findings []plan.Finding) error {
	skip := map[string]bool{}
	for _, f := range findings {
		if f.Kind == plan.RolledBack {
			skip[f.Service] = true
		}
	}
	rel := d.release
	rel.Services = maps.Clone(rel.Services)
	for name := range skip {
		delete(rel.Services, name)
	}
	if err := c.gate(app, rel); err != nil {
		return err
	}
	defer c.beginWrite(app.Name)()
	res, err := apply.Apply(ctx, c.engineOf(app), rel, apply.Options{
		Digests:      c.destOf(app).digests,
		Owner:        c.owner(app),
		ResolveImage: apply.ResolveImage(app.SyncPolicy.ResolveImage),
		Commit:       d.commit,
		Actor:        notify.ActorFrom(ctx),
		Correction:   true,
		Logger:       c.log.With("app", app.Name),
		Self:         c.selfIn(app, rel),
	})
	if err == nil && res.Self != nil {
		_, err = c.writeSelf(ctx, app, d.commit, res.Self)
	}
	if err != nil {
		err = fmt.Errorf("correct drift of %s: %w", rel.Name, err)
		if outcome.Of(err) != outcome.Stalled {
			err = &outcome.TransientError{Err: err}
		}
		return err
	}
	c.emit(ctx, app, notify.DriftConverged, d.commit, fmt.Sprintf("redeployed release %s: %s", rel.Name, describeFindings(findings)))
	return nil
}

// servicesOf returns the snapshot's services in release's namespace, by name.
func servicesOf(snap swarm.Snapshot, release string) map[string]dswarm.Service {
	out := map[string]dswarm.Service{}
	for _, s := range snap.Namespace(release).Services {
		out[s.Spec.Name] = s
	}
	return out
}

// releaseHealth rolls up the health of every service rel declares, as the
// snapshot shows them.
func releaseHealth(rel stack.Release, snap swarm.Snapshot) health.Result {
	results := map[string]health.Result{}
	for name, spec := range rel.Services {
		in := health.ServiceInput{Declared: &spec, EligibleNodes: snap.EligibleNodes(), Now: snap.TasksAt(), ReadFailed: snap.ReadFailed()}
		if live, ok := snap.Service(name); ok {
			in.Live = &live
			in.Tasks = snap.TasksOf(live.ID)
		}
		results[name] = health.Service(in)
	}
	return health.Release(results)
}

// rollout names a service of rel that the swarm is still updating or
// rolling back, or "" when none is: no write may go to the release then.
func rollout(rel stack.Release, snap swarm.Snapshot) string {
	for _, name := range slices.Sorted(maps.Keys(rel.Services)) {
		live, ok := snap.Service(name)
		if !ok || live.UpdateStatus == nil {
			continue
		}
		switch live.UpdateStatus.State {
		case dswarm.UpdateStateUpdating, dswarm.UpdateStateRollbackStarted:
			return fmt.Sprintf("service %s is %s", name, live.UpdateStatus.State)
		}
	}
	return ""
}

// converged names a service of rel that still has a task meant to run
// with another container spec than the service's (an update Swarm has not
// finished, or not started yet), or "" when none has.
func converged(rel stack.Release, snap swarm.Snapshot) string {
	for _, name := range slices.Sorted(maps.Keys(rel.Services)) {
		live, ok := snap.Service(name)
		if !ok {
			continue // health says missing
		}
		for _, t := range snap.TasksOf(live.ID) {
			current := t.DesiredState == dswarm.TaskStateRunning || t.DesiredState == dswarm.TaskStateReady
			if current && (!reflect.DeepEqual(t.Spec.ContainerSpec, live.Spec.TaskTemplate.ContainerSpec) || t.Spec.ForceUpdate != live.Spec.TaskTemplate.ForceUpdate) {
				return fmt.Sprintf("service %s still runs task %s of an earlier spec", name, t.ID)
			}
		}
	}
	return ""
}

// rolledBack returns the daemon's reason when a service of rel was rolled
// back by Swarm, or "".
func rolledBack(rel stack.Release, snap swarm.Snapshot) string {
	for _, name := range slices.Sorted(maps.Keys(rel.Services)) {
		live, ok := snap.Service(name)
		if ok && live.UpdateStatus != nil && live.UpdateStatus.State == dswarm.UpdateStateRollbackCompleted {
			return fmt.Sprintf("swarm rolled back service %s: %s", name, live.UpdateStatus.Message)
		}
	}
	return ""
}

// kept is what of a render outlives its reconcile (for health, rollouts
// and the quiet tick): the release's name and its services' names and
// modes, the only parts releaseHealth, rollout and rolledBack read. At
// 1,000 applications of 10 services, keeping the whole specs was a third
// of the controller's heap.
func kept(rel stack.Release) stack.Release {
	out := stack.Release{Name: rel.Name, Services: make(map[string]dswarm.ServiceSpec, len(rel.Services))}
	for name, spec := range rel.Services {
		out.Services[name] = dswarm.ServiceSpec{Annotations: dswarm.Annotations{Name: spec.Name}, Mode: spec.Mode}
	}
	return out
}

// rendered is a release's last render, kept for health between
// reconciles, with the application it belongs to and where it runs.
type rendered struct {
	app     string
	swarm   string
	release stack.Release
}

// remember keeps rel, app's last render of one of its releases, for health
// between reconciles, and returns what it keeps (see kept). Renders are
// keyed by destination and release: two swarms may each run a release of
// one name.
func (c *Controller) remember(app appset.Application, rel stack.Release) stack.Release {
	k := kept(rel)
	c.mu.Lock()
	defer c.mu.Unlock()
	// A reconcile that ends after its application left the set keeps
	// nothing: health would bring the application back into the status.
	if _, ok := c.apps[app.Name]; !ok {
		return k
	}
	key := app.Destination.Swarm + "\x00" + rel.Name
	if old, ok := c.rendered[key]; ok && old.app != app.Name {
		c.renderedBy[old.app] = slices.DeleteFunc(c.renderedBy[old.app], func(k string) bool { return k == key })
	}
	if !slices.Contains(c.renderedBy[app.Name], key) {
		c.renderedBy[app.Name] = append(c.renderedBy[app.Name], key)
	}
	c.rendered[key] = rendered{app: app.Name, swarm: app.Destination.Swarm, release: k}
	c.renderGen++
	return k
}

// forgetRendered drops the renders of an application that left the set.
// c.mu is held.
func (c *Controller) forgetRendered(app string) {
	for _, key := range c.renderedBy[app] {
		if c.rendered[key].app == app {
			delete(c.rendered, key)
		}
	}
	delete(c.renderedBy, app)
	c.renderGen++
}

// refreshHealth recomputes the health of every application on d from its
// snapshot: one release's health, or the worst of an application's
// releases. While d does not answer, its applications stay unknown.
func (c *Controller) refreshHealth(d *destination) {
	snap := d.live.Current()
	c.mu.Lock()
	byApp := map[string]map[string]health.Result{}
	for _, r := range c.rendered {
		if r.swarm != d.name {
			continue
		}
		if byApp[r.app] == nil {
			byApp[r.app] = map[string]health.Result{}
		}
		byApp[r.app][r.release.Name] = releaseHealth(r.release, snap)
	}
	c.mu.Unlock()
	for app, releases := range byApp {
		h := health.Application(releases)
		if len(releases) == 1 {
			for _, only := range releases {
				h = only // keep the service-level message of a single release
			}
		}
		if snap.ReadFailed() && !errors.Is(snap.Err(), swarm.ErrNotListed) {
			h.Message = fmt.Sprintf("%s: %v", swarm.Describe(d.name), snap.Err())
		}
		c.status.Update(app, func(s *AppStatus) {
			s.Health, s.HealthMessage, s.Running, s.Desired = h.State, h.Message, h.Running, h.Desired
		})
	}
}

// wakeLiveDrift queues a tick for every healthy-looking application on d
// with live drift detection whose own objects changed in the snapshot, so
// an out-of-band change is seen in seconds while a change to another
// stack wakes nobody. A failing application keeps its backoff.
func (c *Controller) wakeLiveDrift(d *destination) {
	snap := d.live.Current()
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, w := range c.workers {
		app := c.apps[name]
		if app.Destination.Swarm == d.name {
			c.wakeIfMovedLocked(app, w, snap)
		}
	}
}

// wakeIfMoved is wakeLiveDrift for one application whose wake was held
// back, when its reconcile ended: a change that came while it applied is
// looked at now, even if the swarm raises nothing more.
func (c *Controller) wakeIfMoved(app appset.Application) {
	live := c.liveOf(app)
	if live == nil {
		return
	}
	snap := live.Current()
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.workers[app.Name]; ok && c.unwoken[app.Name] {
		c.wakeIfMovedLocked(app, w, snap)
	}
}

// wakeIfMovedLocked queues a tick of app when its objects in snap are not
// those its last wake saw. An application that applies, or fails, is not
// woken, nor one whose last write snap may not show (a reconcile would
// take its own write for drift, and wait): what it was not woken for stays
// unseen, so the next look (a later snapshot, or the end of its
// reconcile) wakes it. c.mu is held.
func (c *Controller) wakeIfMovedLocked(app appset.Application, w *worker, snap swarm.Snapshot) {
	if app.DriftDetection != appset.DriftLive {
		return
	}
	state := digest(c.liveState(app, snap))
	if c.seenLive[app.Name] == state {
		return
	}
	if phase, failed, _ := c.status.brief(app.Name); failed != "" || phase == PhaseApplying ||
		snap.TakenAt().IsZero() || !snap.TakenAt().After(c.wrote[app.Name]) {
		c.unwoken[app.Name] = true
		return
	}
	delete(c.unwoken, app.Name)
	c.seenLive[app.Name] = state
	w.enqueue(Request{live: true})
}

// liveState summarises what app's releases hold in snap (see
// namespaceState); c.mu is held.
func (c *Controller) liveState(app appset.Application, snap swarm.Snapshot) string {
	releases := []string{app.Release}
	for _, key := range c.renderedBy[app.Name] {
		if r := c.rendered[key]; r.swarm == app.Destination.Swarm && r.release.Name != app.Release {
			releases = append(releases, r.release.Name)
		}
	}
	if len(releases) == 1 {
		return namespaceState(snap, app.Release) // most applications: nothing to sort
	}
	// Each key of renderedBy is one release on one swarm: no duplicates.
	slices.Sort(releases)
	parts := make([]string, len(releases))
	for i, rel := range releases {
		parts[i] = namespaceState(snap, rel)
	}
	return strings.Join(parts, "\n--\n")
}

// snapshotConfigs serves apply's revision reads from the live snapshot, so
// that a no-op tick makes no Engine call of its own. apply checks the
// labels of every config itself, so the filters can be ignored here.
type snapshotConfigs struct{ snap swarm.Snapshot }

func (s snapshotConfigs) ConfigList(context.Context, dswarm.ConfigListOptions) ([]dswarm.Config, error) {
	return s.snap.Configs(), nil
}

// revisionSource is where app's recorded revisions are read: the live
// snapshot when it is readable and has seen the application's last write
// (a write it has not seen would read as a stale revision), the Engine
// otherwise.
func (c *Controller) revisionSource(app appset.Application) apply.ConfigLister {
	live := c.liveOf(app)
	if live == nil {
		return c.engineOf(app)
	}
	snap := live.Current()
	if snap.ReadFailed() || !c.seenWrites(app.Name, snap) {
		return c.engineOf(app)
	}
	return snapshotConfigs{snap: snap}
}

// seenWrites reports whether snap was taken after app's last write to the
// swarm ended, with none in flight, so that it shows everything app wrote.
func (c *Controller) seenWrites(app string, snap swarm.Snapshot) bool {
	return !snap.TakenAt().IsZero() && !c.writeUnseen(app, snap.TakenAt())
}

// writeUnseen reports whether a snapshot taken at taken may miss some of
// app's writes: one is in flight, or the last one ended after taken. An
// application that has not written since the controller started has
// nothing unseen.
func (c *Controller) writeUnseen(app string, taken time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	wrote, ok := c.wrote[app]
	return c.writing[app] > 0 || ok && !taken.After(wrote)
}

// seenEndedWrites is seenWrites without the writes in flight: a wait for
// health inside an apply is one of them, and waits for the writes before
// it, not for its own end.
func (c *Controller) seenEndedWrites(app string, snap swarm.Snapshot) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	wrote, ok := c.wrote[app]
	return !snap.TakenAt().IsZero() && (!ok || snap.TakenAt().After(wrote))
}

// beginWrite records that a write of app to the swarm starts, and returns
// the function that records its end; call it once, when nothing more is
// written (defer c.beginWrite(app)()).
func (c *Controller) beginWrite(app string) (end func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writing[app]++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.writing[app]--
		if c.writing[app] == 0 {
			delete(c.writing, app)
		}
		c.wrote[app] = time.Now()
	}
}

// namespaceState summarises what occupies release's namespace on the swarm
// (its services with their versions, its networks and configs), so that a
// refusal can wait for that to change rather than for any change at all:
// tasks elsewhere move all the time.
func namespaceState(snap swarm.Snapshot, release string) string {
	var parts []string
	ns := snap.Namespace(release)
	for _, s := range ns.Services {
		parts = append(parts, "service "+s.Spec.Name+" "+s.ID+" "+strconv.FormatUint(s.Version.Index, 10))
	}
	for _, n := range ns.Networks {
		parts = append(parts, "network "+n.Name+" "+n.ID)
	}
	for _, cfg := range ns.Configs {
		parts = append(parts, "config "+cfg.Spec.Name+" "+cfg.ID)
	}
	slices.Sort(parts)
	return strings.Join(parts, "\n")
}

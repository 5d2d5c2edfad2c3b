package syncpass

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// observed is what one look at the live swarm says of a release, before
// anything is decided. The zero value is no look (no live snapshot).
type observed struct {
	has bool // there was a snapshot to look at
	// findings are the live drift of an unchanged release whose
	// application detects it, from a snapshot that shows its writes.
	findings []plan.Finding
	// rolledBack is the daemon's reason when Swarm rolled a service of an
	// unchanged release back; rollout names a service still updating or
	// rolling back.
	rolledBack string
	rollout    string
	// healthy says an unchanged release runs healthy and converged, with
	// no rollout under way, as a readable snapshot shows it; runs that
	// every service runs the tasks it wants, converged and settled, what
	// a recent restart history still calls degraded.
	healthy, runs bool
	// failing is the cause of a failure of that rollout since it started
	// (a task failed, exited or cannot be placed), "" while it only
	// progresses: a failing rollout may be preempted by a newer commit.
	failing string
	// namespace is the release's namespace (NamespaceState) when it can be
	// read, for a refusal waiting for it to change; readable says it can.
	namespace string
	readable  bool
	// canary is the release's canary service as the snapshot shows it;
	// nil when none runs.
	canary *dswarm.Service
}

// observe looks at v for the release d renders of app; changed says git
// moved, when neither live drift nor a rollback of the recorded revision
// is looked for. It is pure: no I/O, no clock.
func observe(app appset.Application, v view, d desired, owner stack.Owner, changed bool) observed {
	if !v.has {
		return observed{}
	}
	o := observed{has: true, rollout: Rollout(d.release, v.snap), readable: v.readable()}
	if o.rollout != "" {
		o.failing = failingRollout(d.release, v.snap)
	}
	if o.readable {
		o.namespace = NamespaceState(v.snap, app.Release)
	}
	o.canary = canaryIn(v.snap, owner)
	if changed {
		return o
	}
	o.rolledBack = rolledBack(d.release, v.snap)
	settled := o.readable && o.rollout == "" && Converged(d.release, v.snap) == ""
	o.healthy = settled && Health(d.release, v.snap).State == health.Healthy
	o.runs = settled && runsAll(d.release, v.snap)
	// A snapshot taken before this application's last write ended has not
	// seen what the write created: comparing it would report every new
	// service missing (see TestInstallRaisesNoLiveDrift). The next refresh
	// wakes the application again.
	if app.DriftDetection == appset.DriftLive && o.readable {
		o.findings = liveDrift(owner, d.release, v.snap)
	}
	return o
}

// liveDrift compares the running services of an unchanged release with its
// render: the "swarm moved" half of drift. Values decrypted from SOPS
// files are masked in the findings, on both sides: the live spec holds
// them too.
func liveDrift(owner stack.Owner, rel stack.Release, snap swarm.Snapshot) []plan.Finding {
	findings := plan.Drift(rel, servicesOf(snap, rel.Name), plan.DriftOptions{
		Owner:        owner,
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

// servicesOf returns the snapshot's services in release's namespace, by name.
func servicesOf(snap swarm.Snapshot, release string) map[string]dswarm.Service {
	out := map[string]dswarm.Service{}
	for _, s := range snap.Namespace(release).Services {
		out[s.Spec.Name] = s
	}
	return out
}

// Health rolls up the health of every service rel declares, as the
// snapshot shows them, naming the nodes where tasks failed or were lost.
func Health(rel stack.Release, snap swarm.Snapshot) health.Result {
	results := map[string]health.Result{}
	nodes := snap.NodesByID()
	for name, spec := range rel.Services {
		in := health.ServiceInput{Declared: &spec, EligibleNodes: snap.EligibleNodes(), Now: snap.TasksAt(), ReadFailed: snap.ReadFailed(),
			NodeByID: nodes}
		if live, ok := snap.Service(name); ok {
			in.Live = &live
			in.Tasks = snap.TasksOf(live.ID)
		}
		results[name] = health.Service(in)
	}
	return health.Release(results)
}

// runsAll reports whether every service of rel runs the tasks it wants
// (a job: completed them), whatever it went through to get there.
func runsAll(rel stack.Release, snap swarm.Snapshot) bool {
	for name, spec := range rel.Services {
		in := health.ServiceInput{Declared: &spec, EligibleNodes: snap.EligibleNodes(), Now: snap.TasksAt(), ReadFailed: snap.ReadFailed()}
		live, ok := snap.Service(name)
		if !ok {
			return false
		}
		in.Live, in.Tasks = &live, snap.TasksOf(live.ID)
		if r := health.Service(in); r.Desired == 0 || r.Running < r.Desired {
			return false
		}
	}
	return true
}

// Rollout names a service of rel that the swarm is still updating or
// rolling back, or "" when none is: no write may go to the release then.
func Rollout(rel stack.Release, snap swarm.Snapshot) string {
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

// Converged names a service of rel that still has a task meant to run
// with another container spec than the service's (an update Swarm has not
// finished, or not started yet), or "" when none has.
func Converged(rel stack.Release, snap swarm.Snapshot) string {
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

// failingRollout is the cause of a task failure, since its update
// started, of a service of rel Swarm is updating, or the task on a lost
// node such an update waits on for ever (health.Stranded); "" when none
// failed.
func failingRollout(rel stack.Release, snap swarm.Snapshot) string {
	for _, name := range slices.Sorted(maps.Keys(rel.Services)) {
		live, ok := snap.Service(name)
		if !ok || live.UpdateStatus == nil || live.UpdateStatus.State != dswarm.UpdateStateUpdating || live.UpdateStatus.StartedAt == nil {
			continue
		}
		one := stack.Release{Name: rel.Name, Services: map[string]dswarm.ServiceSpec{name: rel.Services[name]}}
		if c, ok := findFailure(one, snap, *live.UpdateStatus.StartedAt); ok {
			return c.String()
		}
	}
	return strandedRollout(rel, snap)
}

// strandedRollout names a service of rel whose update waits on a task a
// lost node took (health.Stranded), "" when none does.
func strandedRollout(rel stack.Release, snap swarm.Snapshot) string {
	for _, name := range slices.Sorted(maps.Keys(rel.Services)) {
		live, ok := snap.Service(name)
		if !ok {
			continue
		}
		if why := health.Stranded(&live, snap.TasksOf(live.ID), snap.NodesByID()); why != "" {
			return name + ": " + why
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

// Kept is what of a render outlives its pass (for health, rollouts and
// the quiet pass): the release's name and its services' names and modes,
// the only parts Health, Rollout and rolledBack read. At 1,000
// applications of 10 services, keeping the whole specs was a third of the
// controller's heap.
func Kept(rel stack.Release) stack.Release {
	out := stack.Release{Name: rel.Name, Services: make(map[string]dswarm.ServiceSpec, len(rel.Services))}
	for name, spec := range rel.Services {
		out.Services[name] = dswarm.ServiceSpec{Annotations: dswarm.Annotations{Name: spec.Name}, Mode: spec.Mode}
	}
	return out
}

// NamespaceState summarises what occupies release's namespace on the swarm
// (its services with their versions, its networks and configs), so that a
// refusal can wait for that to change rather than for any change at all:
// tasks elsewhere move all the time.
func NamespaceState(snap swarm.Snapshot, release string) string {
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

// LiveState summarises what the releases named hold in snap (see
// NamespaceState): what an application's own objects are, for its quiet
// key and for the wakes by a change of them. The first release is the
// application's own; the others follow in any order.
func LiveState(snap swarm.Snapshot, releases []string) string {
	if len(releases) == 1 {
		return NamespaceState(snap, releases[0]) // most applications: nothing to sort
	}
	sorted := slices.Sorted(slices.Values(releases))
	parts := make([]string, len(sorted))
	for i, rel := range sorted {
		parts[i] = NamespaceState(snap, rel)
	}
	return strings.Join(parts, "\n--\n")
}

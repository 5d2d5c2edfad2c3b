// Package appset holds the app set: the applications a controller deploys,
// read from applications.yaml (apiVersion skep/v1).
//
// Loading is strict and goes through package configfile. An unknown key, a value of the wrong type, a bad
// duration, a path leaving the repository or a duplicate name is a
// configfile.Problem carrying file, line, column and field path, and every
// problem in the input is returned at once as configfile.Problems. Defaults
// are applied in one place (setDefaults) after decoding and before
// validation.
//
// A loaded Set is immutable and its methods return copies, so it may be shared
// between goroutines. A Source produces sets (a file, a directory; a git
// repository through ParseFiles), and a Watcher swaps a new set in only when
// it is valid, keeping the last good one otherwise: an invalid push to the
// app set never stops applications that were running.
//
// Generators are kept unexpanded: the caller lists their directories and
// Set.Expand makes the applications, with the same checks.
//
// appset never talks to git, Docker or the network, and reads only the files
// it is pointed at. It says what an application is, not how it is rendered:
// default compose and env file names belong to package render.
package appset

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/window"
)

// APIVersion is the only apiVersion an app-set file may declare.
const APIVersion = "skep/v1"

// Defaults and limits of an application; see setDefaults.
const (
	// DefaultRevision asks for the remote's default branch (what HEAD
	// points to on the remote), resolved by gitsource on every tick.
	DefaultRevision = "HEAD"
	// DefaultPath is the repository root.
	DefaultPath = "."
	// DefaultInterval is how often an application is reconciled when its
	// syncPolicy gives no interval.
	DefaultInterval = 3 * time.Minute
	// DefaultTimeout bounds how long a sync with Wait waits for health.
	DefaultTimeout = 5 * time.Minute
	// MaxKeepHookJobs bounds syncPolicy.keepHookJobs: finished jobs are
	// services, and a swarm lists every one of them.
	MaxKeepHookJobs = 100
	// MinInterval is the floor of SyncPolicy.Interval: a shorter one is a
	// problem, not silently raised.
	MinInterval = 10 * time.Second
)

// Set is a valid, loaded app set. It is immutable: every method returns
// copies, and all are safe to call concurrently. A nil *Set is an empty set.
type Set struct {
	apps   []Application
	byName map[string]int
	// swarmAt is where each application named its destination.swarm, for
	// CheckSwarms' problems; absent when the key was not written.
	swarmAt map[string]configfile.Problem
	// windows are the sync windows of every file, in file order.
	windows []window.Window
	// generators are the generators of every file, in file order; apps
	// holds what they generated only once Expand has run.
	generators []generator
}

// SyncWindows returns a copy of the set's sync windows, in the order the
// files give them.
func (s *Set) SyncWindows() []window.Window {
	if s == nil {
		return nil
	}
	return slices.Clone(s.windows)
}

// Len returns the number of applications; 0 for a nil set.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.apps)
}

// Applications returns a copy of the applications in declaration order
// (files in the order they were given, then order within each file).
func (s *Set) Applications() []Application {
	if s == nil {
		return nil
	}
	out := make([]Application, len(s.apps))
	for i, a := range s.apps {
		out[i] = a.clone()
	}
	return out
}

// Names returns the application names in declaration order; the slice is
// the caller's.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	out := make([]string, len(s.apps))
	for i, a := range s.apps {
		out[i] = a.Name
	}
	return out
}

// Lookup returns a copy of the application called name; ok is false when
// the set has none.
func (s *Set) Lookup(name string) (Application, bool) {
	if s == nil {
		return Application{}, false
	}
	i, ok := s.byName[name]
	if !ok {
		return Application{}, false
	}
	return s.apps[i].clone(), true
}

// Application is the unit of GitOps: where its compose files come from,
// which stack it becomes, where it goes and how it is kept in sync. Values
// returned by a Set are the caller's to keep and change.
type Application struct {
	// Name is a DNS label, unique in the set.
	Name string
	// Source is where the application's compose files are.
	Source AppSource
	// Release is the stack namespace; it defaults to Name and is unique
	// per destination.
	Release string
	// Destination is the swarm the release is deployed to.
	Destination Destination
	// SyncPolicy says when and how the release is applied and pruned.
	SyncPolicy SyncPolicy
	// DriftDetection says what counts as drift; the zero value is
	// DriftManifest.
	DriftDetection DriftDetection
	// Allow lists what the release may use from outside its stack; the
	// zero value allows nothing.
	Allow Allow
	// Artifacts points at the application's release artifacts; nil means
	// it has none and renders its compose files as they are.
	Artifacts *Artifacts
	// Chart renders the release from a chart instead of compose files;
	// nil means compose.
	Chart *Chart
	// SyncWindows are the app set's sync windows that cover this
	// application (see package window); nil when none does.
	SyncWindows []window.Window
	// DependsOn names applications of the set that must be synced and
	// healthy at their current revision before this one syncs. The set
	// has no cycle.
	DependsOn []string
	// Generator names the generator that made this application from the
	// directory Source.Path; "" for an application the app set declares.
	Generator string
	// Self marks the application that deploys the controller itself: its
	// release declares the controller's own service, which is written last
	// in a sync (after a self-update-issued event) and never pruned. At
	// most one application of a set is self, on the local swarm.
	Self bool
	// Rebalance rolls the release's services whose tasks are skewed once
	// a drained or lost node is back (one service at a time per swarm,
	// inside sync windows); nil leaves it to the controller's --rebalance.
	Rebalance *bool
}

// Chart names the chart an application renders and the values it gives
// it. Exactly one of Path, (Repo, Name, Version) and Releases is set.
type Chart struct {
	// Path is the chart's directory in the application's repository.
	Path string
	// Releases is a release file in the application's repository that
	// declares several releases of charts, each with its values and wave;
	// each release's stack is the application's release, a dash and the
	// release's name.
	Releases string
	// Repo, Name and Version fetch the chart from a chart repository
	// (index.yaml over HTTPS), at exactly that version.
	Repo, Name, Version string
	// Values are values files in the application's repository, merged in
	// order over the chart's values.yaml.
	Values []string
	// Set holds inline values (dotted keys), merged last.
	Set map[string]string
}

// Artifacts locates an application's artifact directory in git and says
// how its entries resolve. See package artifact for the files.
type Artifacts struct {
	// Repo holds the artifact files; "" means the app set's own repository
	// when the app set comes from git, else the application's source.
	Repo string
	// Revision is the branch, tag or commit of Repo to read.
	Revision string
	// Path is the directory holding one subdirectory per environment.
	Path string
	// Environment is the subdirectory of Path to read, e.g. testing.
	Environment string
	// Registry and GitBase complete the short names of the
	// release-repository shape: the image is Registry/<docker>, the
	// source GitBase/<github>.
	Registry string
	GitBase  string
	// TagTemplate turns a branch head commit into the image tag CI pushed
	// it under ({commit}, {short}, {branch}); "" means "{commit}".
	TagTemplate string
	// CheckImages is the registry gate: a desired version is used only
	// once its image exists. Off, every desired version is used at once.
	CheckImages bool
	// Previews says where and how service artifacts marked preview get a
	// preview release per branch.
	Previews Previews
}

// Previews configures the per-branch preview releases of an application's
// artifacts. Defaults fill every field of a parsed set.
type Previews struct {
	// Environments are the artifact environments previews run in; in any
	// other, preview: true is reported and ignored.
	Environments []string
	// BaseDomain and Domain make each preview's domain: Domain is a
	// template of {hash}, {artifact}, {environment}, {baseDomain} and
	// {branch}.
	BaseDomain string
	Domain     string
	// Replicas is each replicated service's replica count in a preview.
	Replicas int
	// Branches are glob patterns of the branches previewed (empty: all);
	// Ignore those never previewed. The default branch and a tracked
	// branch never are.
	Branches []string
	Ignore   []string
	// PullRequests also previews the pull- and merge-request heads the
	// forge advertises (refs/pull/<n>/head, refs/merge-requests/<n>/head).
	PullRequests bool
	// Max bounds the previews of one artifact.
	Max int
	// TTL removes a preview whose branch has not moved for this long; 0
	// keeps previews as long as their branch exists.
	TTL time.Duration
	// PortShift publishes each preview's ports shifted by PortShift times
	// its slot number; 0 drops published ports.
	PortShift int
}

// Default preview settings.
const (
	DefaultPreviewReplicas = 1
	DefaultPreviewMax      = 10
)

// DefaultPreviewEnvironments are the environments previews run in unless
// the application says otherwise.
var DefaultPreviewEnvironments = []string{"testing"}

// DriftDetection says how an application notices that the swarm no longer
// matches git. The zero value means DriftManifest.
type DriftDetection string

// The values of DriftDetection.
const (
	// DriftManifest: only git moving counts (compared with the last
	// recorded revision).
	DriftManifest DriftDetection = "manifest"
	// DriftLive: also the running services of an unchanged release,
	// compared field by field with the render.
	DriftLive DriftDetection = "live"
)

// AppSource locates an application's compose files in git.
type AppSource struct {
	// Repo is an https://, http://, ssh://, file:// URL, an scp-like
	// user@host:path, or a local path, kept as written. It never carries
	// a password: credentials come from files or the environment.
	Repo string
	// Revision is a branch, tag or commit; DefaultRevision means the
	// remote's default branch.
	Revision string
	// Path is a clean, slash-separated directory relative to the
	// repository root that does not leave it ("." for the root).
	Path string
	// Files are compose files relative to Path, merged in order like
	// `docker stack deploy -c a -c b`. Empty means the first of
	// render.DefaultFiles that exists.
	Files []string
	// EnvFiles are files relative to Path read for interpolation, in
	// order. Empty means render.DefaultEnvFile when it exists.
	EnvFiles []string
	// Variables are inline interpolation variables; they win over
	// EnvFiles.
	Variables map[string]string
}

// Destination names the swarm a release is deployed to.
type Destination struct {
	// Swarm is "" for the swarm the controller runs in, or the name of a
	// destination in the controller's destinations file.
	Swarm string
}

// SyncPolicy says when and how an application is applied.
type SyncPolicy struct {
	// Automated applies every change the plan finds; false only plans and
	// reports out-of-sync until a sync is requested.
	Automated bool
	// Interval is how often the application is reconciled, at least
	// MinInterval.
	Interval time.Duration
	// Prune removes a release this application stopped declaring.
	Prune bool
	// PruneResources removes the services, networks, configs and secrets
	// a still-declared release stopped declaring; PruneVolumes adds named
	// volumes, which is off by default because their data is not in git.
	PruneResources bool
	PruneVolumes   bool
	// ResolveImage says when image tags are pinned to digests.
	ResolveImage ResolveImage
	// Wait makes a sync wait, up to Timeout, for its services to converge
	// and be healthy before it succeeds.
	Wait bool
	// Timeout bounds that wait; DefaultTimeout when the file gives none.
	Timeout time.Duration
	// KeepHookJobs is how many finished jobs of each hook (compose
	// x-skep-hook) stay in the swarm for their logs; 0 means the hook
	// runner's default.
	KeepHookJobs int
	// Rollback says what is rolled back when a rollout fails after the
	// controller's write; "" means RollbackService.
	Rollback Rollback
	// WaitOutFailing makes a new commit wait for a failing rollout's
	// health timeout instead of preempting it (preemptFailingRollout:
	// false); the zero value preempts.
	WaitOutFailing bool
}

// Rollback says what is rolled back when a rollout fails after the
// controller's write: tasks fail or exit, health checks fail past the
// timeout, or Swarm rolls a service back. The zero value means
// RollbackService.
type Rollback string

// The values of Rollback.
const (
	// RollbackNone rolls nothing back and holds nothing: the failure is
	// reported with its cause, and a service Swarm rolled back on its own
	// does not hold the commit.
	RollbackNone Rollback = "none"
	// RollbackService is Swarm's own rollback, per service, as each
	// service's update_config asks: the other services stay where the
	// write left them, and a commit Swarm rolled back is not applied
	// again.
	RollbackService Rollback = "service"
	// RollbackRelease writes every service of the release back to the
	// last revision that ran healthy, in the reverse of the write order,
	// and holds the failed commit until git moves or someone syncs.
	RollbackRelease Rollback = "release"
)

// ResolveImage says when image tags are pinned to the digest a registry
// reports, as `docker stack deploy --resolve-image` does. The zero value
// means ResolveAlways.
type ResolveImage string

// The values of ResolveImage.
const (
	// ResolveAlways pins every image to the digest the registry reports
	// for its tag, so every node runs the same image.
	ResolveAlways ResolveImage = "always"
	// ResolveChanged asks the registry only for a service that is new or
	// whose image changed; otherwise the live digest is kept.
	ResolveChanged ResolveImage = "changed"
	// ResolveNever deploys images as written; each node resolves a tag
	// when it pulls, so nodes may differ once the tag moves.
	ResolveNever ResolveImage = "never"
)

// Allow lists what a release may use from outside its own stack. An empty
// list allows nothing.
type Allow struct {
	// HostPaths are absolute, clean paths under which bind mounts are
	// allowed; "/" allows every path.
	HostPaths []string
	// Networks, Configs, Secrets and Volumes are names of external objects.
	Networks []string
	Configs  []string
	Secrets  []string
	Volumes  []string
	// Capabilities are the Linux capabilities services may add (cap_add),
	// as written (any case, the CAP_ prefix optional), or ALL.
	Capabilities []string
	// Unplaceable are the placement rules a release may fail and still be
	// written (see the Unplaceable constants): its services' tasks then
	// wait, pending, for a node that satisfies them.
	Unplaceable []string
}

// The rules allow.unplaceable names: what no node of the swarm may
// satisfy for a service (package placement's rules, by the same names),
// and UnplaceableAll for every one of them.
const (
	UnplaceableNoNode      = "no-node"
	UnplaceableConstraint  = "constraint"
	UnplaceablePlatform    = "platform"
	UnplaceableResources   = "resources"
	UnplaceableMaxReplicas = "max-replicas-per-node"
	UnplaceableAll         = "all"
)

// UnplaceableRules lists the values allow.unplaceable accepts.
func UnplaceableRules() []string {
	return []string{UnplaceableNoNode, UnplaceableConstraint, UnplaceablePlatform, UnplaceableResources, UnplaceableMaxReplicas, UnplaceableAll}
}

// AllowsUnplaceable reports whether a's release may be written although
// no node satisfies rule for one of its services.
func (a Allow) AllowsUnplaceable(rule string) bool {
	return slices.Contains(a.Unplaceable, rule) || slices.Contains(a.Unplaceable, UnplaceableAll)
}

// clone returns a with every slice and map copied, so a Set never shares
// memory with what it hands out.
func (a Application) clone() Application {
	a.Source.Files = slices.Clone(a.Source.Files)
	a.Source.EnvFiles = slices.Clone(a.Source.EnvFiles)
	a.Source.Variables = maps.Clone(a.Source.Variables)
	a.Allow.HostPaths = slices.Clone(a.Allow.HostPaths)
	a.Allow.Networks = slices.Clone(a.Allow.Networks)
	a.Allow.Configs = slices.Clone(a.Allow.Configs)
	a.Allow.Secrets = slices.Clone(a.Allow.Secrets)
	a.Allow.Volumes = slices.Clone(a.Allow.Volumes)
	a.Allow.Capabilities = slices.Clone(a.Allow.Capabilities)
	a.Allow.Unplaceable = slices.Clone(a.Allow.Unplaceable)
	if a.Rebalance != nil {
		on := *a.Rebalance
		a.Rebalance = &on
	}
	a.SyncWindows = slices.Clone(a.SyncWindows)
	a.DependsOn = slices.Clone(a.DependsOn)
	return a
}

// CheckSwarms returns configfile.Problems naming, with its file and line,
// every application whose destination.swarm is not "" and not known. known
// lists the names for the message ("", staging, production).
func (s *Set) CheckSwarms(isKnown func(string) bool, known string) error {
	var problems configfile.Problems
	for _, a := range s.Applications() {
		if a.Destination.Swarm == "" || isKnown(a.Destination.Swarm) {
			continue
		}
		p := s.swarmAt[a.Name]
		p.Message = fmt.Sprintf("unknown swarm %q; known: %s", a.Destination.Swarm, known)
		problems = append(problems, p)
	}
	if len(problems) == 0 {
		return nil
	}
	problems.Sort()
	return problems
}

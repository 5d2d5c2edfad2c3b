package appset

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/window"
)

// The file form of an app set: what applications.yaml holds, key for key.
// Only parseFile fills these (through configfile.Decode, which rejects
// unknown keys) and only toApplication reads them; the rest of Skep sees
// Application. Empty strings mean "use the default".
type fileDoc struct {
	APIVersion   string          `yaml:"apiVersion"`
	Applications []fileApp       `yaml:"applications"`
	SyncWindows  []fileWindow    `yaml:"syncWindows,omitempty"`
	Generators   []fileGenerator `yaml:"generators,omitempty"`
}

// fileGenerator is one entry of generators; see Generator. Template holds
// the fields of every application it generates, as written: name and
// source.repo, revision and path come from the generator and the
// directory.
type fileGenerator struct {
	Name        string   `yaml:"name"`
	Repo        string   `yaml:"repo"`
	Revision    string   `yaml:"revision"`
	Directories []string `yaml:"directories"`
	Template    fileApp  `yaml:"template"`
}

// fileWindow is one entry of syncWindows; see window.Window. A nil
// ManualSync means the default, true.
type fileWindow struct {
	Kind         string   `yaml:"kind"`
	Schedule     string   `yaml:"schedule"`
	Duration     duration `yaml:"duration"`
	Applications []string `yaml:"applications"`
	TimeZone     string   `yaml:"timeZone,omitempty"`
	ManualSync   *bool    `yaml:"manualSync,omitempty"`
}

// fileApp is one entry of applications, as written.
type fileApp struct {
	Name        string          `yaml:"name"`
	Source      fileSource      `yaml:"source"`
	Release     string          `yaml:"release"`
	Destination fileDestination `yaml:"destination,omitempty"`
	SyncPolicy  fileSyncPolicy  `yaml:"syncPolicy"`
	// DriftDetection is manifest or live.
	DriftDetection DriftDetection `yaml:"driftDetection"`
	Allow          fileAllow      `yaml:"allow,omitempty"`
	Artifacts      *fileArtifacts `yaml:"artifacts,omitempty"`
	Chart          *fileChart     `yaml:"chart,omitempty"`
	DependsOn      []string       `yaml:"dependsOn,omitempty"`
	Self           bool           `yaml:"self,omitempty"`
	Rebalance      *bool          `yaml:"rebalance,omitempty"`

	// releaseDefaulted records that setDefaults copied Name into Release,
	// so that a clash names the application, not a key nobody wrote.
	releaseDefaulted bool
}

// fileSource is an application's source key; see AppSource.
type fileSource struct {
	Repo      string            `yaml:"repo"`
	Revision  string            `yaml:"revision"`
	Path      string            `yaml:"path"`
	Files     []string          `yaml:"files,omitempty"`
	EnvFiles  []string          `yaml:"envFiles,omitempty"`
	Variables map[string]string `yaml:"variables,omitempty"`
}

// fileChart is an application's chart key; see Chart.
type fileChart struct {
	Path     string            `yaml:"path,omitempty"`
	Releases string            `yaml:"releases,omitempty"`
	Repo     string            `yaml:"repo,omitempty"`
	Name     string            `yaml:"name,omitempty"`
	Version  string            `yaml:"version,omitempty"`
	Values   []string          `yaml:"values,omitempty"`
	Set      map[string]string `yaml:"set,omitempty"`
}

// fileArtifacts is an application's artifacts key; see Artifacts. A nil
// CheckImages means the default, on.
type fileArtifacts struct {
	Repo        string        `yaml:"repo,omitempty"`
	Revision    string        `yaml:"revision"`
	Path        string        `yaml:"path"`
	Environment string        `yaml:"environment"`
	Registry    string        `yaml:"registry,omitempty"`
	GitBase     string        `yaml:"gitBase,omitempty"`
	TagTemplate string        `yaml:"tagTemplate,omitempty"`
	CheckImages *bool         `yaml:"checkImages"`
	Previews    *filePreviews `yaml:"previews,omitempty"`
}

// filePreviews is the artifacts.previews key; see Previews.
type filePreviews struct {
	Environments []string `yaml:"environments,omitempty"`
	BaseDomain   string   `yaml:"baseDomain,omitempty"`
	Domain       string   `yaml:"domain,omitempty"`
	Replicas     *int     `yaml:"replicas,omitempty"`
	Branches     []string `yaml:"branches,omitempty"`
	Ignore       []string `yaml:"ignore,omitempty"`
	PullRequests bool     `yaml:"pullRequests,omitempty"`
	Max          *int     `yaml:"max,omitempty"`
	TTL          duration `yaml:"ttl"`
	PortShift    int      `yaml:"portShift,omitempty"`
}

// fileDestination is an application's destination key; see Destination.
type fileDestination struct {
	Swarm string `yaml:"swarm"`
}

// fileSyncPolicy is an application's syncPolicy key; see SyncPolicy.
type fileSyncPolicy struct {
	Automated      bool         `yaml:"automated"`
	Interval       duration     `yaml:"interval"`
	Prune          bool         `yaml:"prune"`
	PruneResources bool         `yaml:"pruneResources"`
	PruneVolumes   bool         `yaml:"pruneVolumes"`
	ResolveImage   ResolveImage `yaml:"resolveImage"`
	Wait           bool         `yaml:"wait"`
	Timeout        duration     `yaml:"timeout"`
	KeepHookJobs   int          `yaml:"keepHookJobs,omitempty"`
	Rollback       Rollback     `yaml:"rollback,omitempty"`
	// PreemptFailingRollout is nil when the file gives none: true.
	PreemptFailingRollout *bool `yaml:"preemptFailingRollout"`
}

// fileAllow is an application's allow key; see Allow.
type fileAllow struct {
	HostPaths []string `yaml:"hostPaths,omitempty"`
	Networks  []string `yaml:"networks,omitempty"`
	Configs   []string `yaml:"configs,omitempty"`
	Secrets   []string `yaml:"secrets,omitempty"`
	Volumes   []string `yaml:"volumes,omitempty"`
	// Capabilities are the Linux capabilities services may add (cap_add).
	Capabilities []string `yaml:"capabilities,omitempty"`
	// Unplaceable are the placement rules a release may fail.
	Unplaceable []string `yaml:"unplaceable,omitempty"`
}

// duration is a time.Duration written as "90s" or "3m"; set tells an
// explicit value (even "0s") from an absent one.
type duration struct {
	value time.Duration
	set   bool
}

// UnmarshalYAML accepts what time.ParseDuration accepts, if not negative.
// A bare number but 0 is refused ("3" could be seconds or minutes); the floor
// of each field is checked later by validateApp.
func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a duration like 3m or 90s, got %s", configfile.Describe(n))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("want a duration like 3m or 90s, got %s", configfile.Quote(n.Value))
	}
	if v < 0 {
		return fmt.Errorf("want a positive duration, got %s", configfile.Quote(n.Value))
	}
	*d = duration{value: v, set: true}
	return nil
}

// MarshalYAML writes the duration as time.Duration.String does.
func (d duration) MarshalYAML() (any, error) { return d.value.String(), nil }

// UnmarshalYAML accepts always, changed or never; a typo fails the load
// rather than silently meaning always.
func (r *ResolveImage) UnmarshalYAML(n *yaml.Node) error {
	v := ResolveImage(n.Value)
	if n.Kind != yaml.ScalarNode || (v != ResolveAlways && v != ResolveChanged && v != ResolveNever) {
		return fmt.Errorf("want always, changed or never, got %s", configfile.Describe(n))
	}
	*r = v
	return nil
}

// UnmarshalYAML accepts none, service or release; a typo fails the load
// rather than silently meaning service.
func (r *Rollback) UnmarshalYAML(n *yaml.Node) error {
	v := Rollback(n.Value)
	if n.Kind != yaml.ScalarNode || (v != RollbackNone && v != RollbackService && v != RollbackRelease) {
		return fmt.Errorf("want none, service or release, got %s", configfile.Describe(n))
	}
	*r = v
	return nil
}

// UnmarshalYAML accepts manifest or live; a typo fails the load rather
// than silently meaning manifest.
func (d *DriftDetection) UnmarshalYAML(n *yaml.Node) error {
	v := DriftDetection(n.Value)
	if n.Kind != yaml.ScalarNode || (v != DriftManifest && v != DriftLive) {
		return fmt.Errorf("want manifest or live, got %s", configfile.Describe(n))
	}
	*d = v
	return nil
}

// setDefaults fills every field the file left out. It is the only place
// defaults are written; validation runs after it.
func setDefaults(a *fileApp) {
	if a.Source.Revision == "" {
		a.Source.Revision = DefaultRevision
	}
	if a.Source.Path == "" {
		a.Source.Path = DefaultPath
	}
	if a.Release == "" {
		a.Release = a.Name
		a.releaseDefaulted = true
	}
	if !a.SyncPolicy.Interval.set {
		a.SyncPolicy.Interval = duration{value: DefaultInterval, set: true}
	}
	if a.SyncPolicy.ResolveImage == "" {
		a.SyncPolicy.ResolveImage = ResolveAlways
	}
	if !a.SyncPolicy.Timeout.set {
		a.SyncPolicy.Timeout = duration{value: DefaultTimeout, set: true}
	}
	if a.SyncPolicy.PreemptFailingRollout == nil {
		on := true
		a.SyncPolicy.PreemptFailingRollout = &on
	}
	if a.DriftDetection == "" {
		a.DriftDetection = DriftManifest
	}
	if art := a.Artifacts; art != nil {
		if art.Revision == "" {
			art.Revision = DefaultRevision
		}
		if art.Path == "" {
			art.Path = DefaultPath
		}
		if art.CheckImages == nil {
			on := true
			art.CheckImages = &on
		}
		if art.Previews == nil {
			art.Previews = &filePreviews{}
		}
		p := art.Previews
		if p.Environments == nil {
			p.Environments = slices.Clone(DefaultPreviewEnvironments)
		}
		if p.Replicas == nil {
			n := DefaultPreviewReplicas
			p.Replicas = &n
		}
		if p.Max == nil {
			n := DefaultPreviewMax
			p.Max = &n
		}
	}
}

// toApplication converts a defaulted, valid file-form application,
// cleaning its paths. Slices and maps are copied, and empty ones become
// nil, so equal files give Applications that compare equal.
func toApplication(a fileApp) Application {
	return Application{
		Name: a.Name,
		Source: AppSource{
			Repo:      a.Source.Repo,
			Revision:  a.Source.Revision,
			Path:      path.Clean(a.Source.Path),
			Files:     cleanAll(a.Source.Files),
			EnvFiles:  cleanAll(a.Source.EnvFiles),
			Variables: nilIfEmpty(maps.Clone(a.Source.Variables)),
		},
		Release:     a.Release,
		Destination: Destination{Swarm: a.Destination.Swarm},
		SyncPolicy: SyncPolicy{
			Automated:      a.SyncPolicy.Automated,
			Interval:       a.SyncPolicy.Interval.value,
			Prune:          a.SyncPolicy.Prune,
			PruneResources: a.SyncPolicy.PruneResources,
			PruneVolumes:   a.SyncPolicy.PruneVolumes,
			ResolveImage:   a.SyncPolicy.ResolveImage,
			Wait:           a.SyncPolicy.Wait,
			Timeout:        a.SyncPolicy.Timeout.value,
			KeepHookJobs:   a.SyncPolicy.KeepHookJobs,
			Rollback:       a.SyncPolicy.Rollback,
			WaitOutFailing: !*a.SyncPolicy.PreemptFailingRollout,
		},
		DriftDetection: a.DriftDetection,
		Allow: Allow{
			HostPaths:    nilIfEmpty(slices.Clone(a.Allow.HostPaths)),
			Networks:     nilIfEmpty(slices.Clone(a.Allow.Networks)),
			Configs:      nilIfEmpty(slices.Clone(a.Allow.Configs)),
			Secrets:      nilIfEmpty(slices.Clone(a.Allow.Secrets)),
			Volumes:      nilIfEmpty(slices.Clone(a.Allow.Volumes)),
			Capabilities: nilIfEmpty(slices.Clone(a.Allow.Capabilities)),
			Unplaceable:  nilIfEmpty(slices.Clone(a.Allow.Unplaceable)),
		},
		Artifacts: toArtifacts(a.Artifacts),
		Chart:     toChart(a.Chart),
		DependsOn: nilIfEmpty(slices.Clone(a.DependsOn)),
		Self:      a.Self,
		Rebalance: cloneBool(a.Rebalance),
	}
}

// cloneBool copies an optional flag, so no two values share it.
func cloneBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}

// toChart converts a valid chart block, cleaning its paths; nil stays nil.
func toChart(c *fileChart) *Chart {
	if c == nil {
		return nil
	}
	out := &Chart{Repo: c.Repo, Name: c.Name, Version: c.Version, Values: cleanAll(c.Values), Set: nilIfEmpty(maps.Clone(c.Set))}
	if c.Path != "" {
		out.Path = path.Clean(c.Path)
	}
	if c.Releases != "" {
		out.Releases = path.Clean(c.Releases)
	}
	return out
}

// toArtifacts converts a defaulted artifacts block; nil stays nil.
func toArtifacts(a *fileArtifacts) *Artifacts {
	if a == nil {
		return nil
	}
	return &Artifacts{Repo: a.Repo, Revision: a.Revision, Path: path.Clean(a.Path), Environment: a.Environment,
		Registry: a.Registry, GitBase: a.GitBase, TagTemplate: a.TagTemplate, CheckImages: a.CheckImages == nil || *a.CheckImages,
		Previews: toPreviews(a.Previews)}
}

// toPreviews converts a defaulted previews block.
func toPreviews(p *filePreviews) Previews {
	if p == nil {
		return Previews{Environments: slices.Clone(DefaultPreviewEnvironments), Replicas: DefaultPreviewReplicas, Max: DefaultPreviewMax}
	}
	out := Previews{Environments: slices.Clone(p.Environments), BaseDomain: p.BaseDomain, Domain: p.Domain,
		Branches: nilIfEmpty(slices.Clone(p.Branches)), Ignore: nilIfEmpty(slices.Clone(p.Ignore)), PullRequests: p.PullRequests, TTL: p.TTL.value, PortShift: p.PortShift,
		Replicas: DefaultPreviewReplicas, Max: DefaultPreviewMax}
	if p.Replicas != nil {
		out.Replicas = *p.Replicas
	}
	if p.Max != nil {
		out.Max = *p.Max
	}
	return out
}

// fromApplication is the inverse of toApplication, for MarshalYAML. It
// spells out defaults for zero fields too, so an Application built in code
// rather than parsed still marshals to a valid file.
func fromApplication(a Application) fileApp {
	resolve := a.SyncPolicy.ResolveImage
	if resolve == "" {
		resolve = ResolveAlways
	}
	timeout := a.SyncPolicy.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	drift := a.DriftDetection
	if drift == "" {
		drift = DriftManifest
	}
	preempt := !a.SyncPolicy.WaitOutFailing
	return fileApp{
		Name: a.Name,
		Source: fileSource{
			Repo:      a.Source.Repo,
			Revision:  a.Source.Revision,
			Path:      a.Source.Path,
			Files:     a.Source.Files,
			EnvFiles:  a.Source.EnvFiles,
			Variables: a.Source.Variables,
		},
		Release:     a.Release,
		Destination: fileDestination{Swarm: a.Destination.Swarm},
		SyncPolicy: fileSyncPolicy{
			Automated:             a.SyncPolicy.Automated,
			Interval:              duration{value: a.SyncPolicy.Interval, set: true},
			Prune:                 a.SyncPolicy.Prune,
			PruneResources:        a.SyncPolicy.PruneResources,
			PruneVolumes:          a.SyncPolicy.PruneVolumes,
			ResolveImage:          resolve,
			Wait:                  a.SyncPolicy.Wait,
			Timeout:               duration{value: timeout, set: true},
			KeepHookJobs:          a.SyncPolicy.KeepHookJobs,
			Rollback:              a.SyncPolicy.Rollback,
			PreemptFailingRollout: &preempt,
		},
		DriftDetection: drift,
		Allow: fileAllow{
			HostPaths:    a.Allow.HostPaths,
			Networks:     a.Allow.Networks,
			Configs:      a.Allow.Configs,
			Secrets:      a.Allow.Secrets,
			Volumes:      a.Allow.Volumes,
			Capabilities: a.Allow.Capabilities,
			Unplaceable:  a.Allow.Unplaceable,
		},
		Artifacts: fromArtifacts(a.Artifacts),
		Chart:     fromChart(a.Chart),
		DependsOn: a.DependsOn,
		Self:      a.Self,
		Rebalance: cloneBool(a.Rebalance),
	}
}

// fromChart is the inverse of toChart.
func fromChart(c *Chart) *fileChart {
	if c == nil {
		return nil
	}
	return &fileChart{Path: c.Path, Releases: c.Releases, Repo: c.Repo, Name: c.Name, Version: c.Version, Values: c.Values, Set: c.Set}
}

// fromArtifacts is the inverse of toArtifacts.
func fromArtifacts(a *Artifacts) *fileArtifacts {
	if a == nil {
		return nil
	}
	check := a.CheckImages
	p := a.Previews
	replicas, most := p.Replicas, p.Max
	return &fileArtifacts{Repo: a.Repo, Revision: a.Revision, Path: a.Path, Environment: a.Environment,
		Registry: a.Registry, GitBase: a.GitBase, TagTemplate: a.TagTemplate, CheckImages: &check,
		Previews: &filePreviews{Environments: p.Environments, BaseDomain: p.BaseDomain, Domain: p.Domain,
			Replicas: &replicas, Branches: p.Branches, Ignore: p.Ignore, PullRequests: p.PullRequests, Max: &most,
			TTL: duration{value: p.TTL, set: true}, PortShift: p.PortShift}}
}

// MarshalYAML writes s as one app-set file with every default spelled out;
// parsing the result gives back an equal set.
func (s *Set) MarshalYAML() (any, error) {
	doc := fileDoc{APIVersion: APIVersion, Applications: []fileApp{}}
	if s != nil {
		for _, a := range s.apps {
			if a.Generator == "" {
				doc.Applications = append(doc.Applications, fromApplication(a))
			}
		}
		for _, w := range s.windows {
			doc.SyncWindows = append(doc.SyncWindows, fromWindow(w))
		}
		for _, g := range s.generators {
			doc.Generators = append(doc.Generators, g.toFile())
		}
	}
	return doc, nil
}

// toWindow converts a valid file-form window.
func toWindow(w fileWindow) window.Window {
	// Both were checked by validateWindow; a failure here is impossible.
	sched, _ := window.ParseCron(w.Schedule)
	zone, _ := window.LoadZone(w.TimeZone)
	return window.Window{Kind: window.Kind(w.Kind), Schedule: sched, Zone: zone, Duration: w.Duration.value,
		Applications: slices.Clone(w.Applications), ManualSync: w.ManualSync == nil || *w.ManualSync}
}

// fromWindow is the inverse of toWindow.
func fromWindow(w window.Window) fileWindow {
	manual := w.ManualSync
	return fileWindow{Kind: string(w.Kind), Schedule: w.Schedule.String(), Duration: duration{value: w.Duration, set: true},
		Applications: w.Applications, TimeZone: w.Zone.String(), ManualSync: &manual}
}

// cleanAll returns path.Clean of every path, nil for none.
func cleanAll(paths []string) []string {
	if len(paths) == 0 {
		return nil
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = path.Clean(p)
	}
	return out
}

// nilIfEmpty returns nil for an empty slice or map, v otherwise.
func nilIfEmpty[T interface{ ~[]string | ~map[string]string }](v T) T {
	if len(v) == 0 {
		return nil
	}
	return v
}

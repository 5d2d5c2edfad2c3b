package plan

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/stack"
)

// FindingKind says how a live service differs from git. The zero value is
// invalid.
type FindingKind string

const (
	// Modified: a named field of the live spec differs from the render.
	Modified FindingKind = "modified"
	// Missing: declared, but the swarm has no such service.
	Missing FindingKind = "missing"
	// Unexpected: a live service of this owner in the namespace that git
	// does not declare.
	Unexpected FindingKind = "unexpected"
	// RolledBack: Swarm rolled the service back from the declared spec (its
	// failure_action, or `docker service rollback`). Such a service is never
	// reported Modified, so nothing "corrects" it back into a failing spec.
	RolledBack FindingKind = "rolled-back"
)

// Finding is one way a live service differs from git. Field is the named
// field (see DriftFields), Path the exact leaf as in FieldDiff.Path.
// Desired and Live are rendered as in FieldDiff, with environment values
// masked; a side that is absent is "". Reason carries the daemon's message
// for a rolled-back service.
type Finding struct {
	Release string      `json:"release"`
	Service string      `json:"service"`
	Kind    FindingKind `json:"kind"`
	Field   string      `json:"field,omitempty"`
	Path    string      `json:"path,omitempty"`
	Desired string      `json:"desired"`
	Live    string      `json:"live"`
	Reason  string      `json:"reason,omitempty"`
}

// DriftField names a part of a service spec that live drift compares, by
// the FieldDiff path prefixes it covers.
type DriftField struct {
	// Name is what Finding.Field says, such as "image".
	Name string
	// Paths are FieldDiff.Path prefixes, matched on path boundaries.
	Paths []string
}

// DriftFields is the named list of fields live drift compares, most
// specific first. A difference outside it is not drift: the Engine fills
// in fields a spec leaves empty, and a field not listed here is one whose
// daemon default cannot be told from a person's change. Extending the list
// needs a test that the daemon returns the field as sent. Callers must not
// modify it.
var DriftFields = []DriftField{
	{"image", []string{"TaskTemplate.ContainerSpec.Image"}},
	{"replicas", []string{"Mode.Replicated.Replicas"}},
	{"mode", []string{"Mode"}},
	{"env", []string{"TaskTemplate.ContainerSpec.Env"}},
	{"labels", []string{"Labels"}},
	{"container labels", []string{"TaskTemplate.ContainerSpec.Labels"}},
	{"ports", []string{"EndpointSpec.Ports"}},
	{"endpoint mode", []string{"EndpointSpec.Mode"}},
	{"mounts", []string{"TaskTemplate.ContainerSpec.Mounts"}},
	{"networks", []string{"TaskTemplate.Networks"}},
	{"constraints", []string{"TaskTemplate.Placement.Constraints"}},
	{"placement", []string{"TaskTemplate.Placement"}},
	{"resources", []string{"TaskTemplate.Resources"}},
	{"update policy", []string{"UpdateConfig"}},
	{"rollback policy", []string{"RollbackConfig"}},
	{"restart policy", []string{"TaskTemplate.RestartPolicy"}},
	{"healthcheck", []string{"TaskTemplate.ContainerSpec.Healthcheck"}},
	{"secrets", []string{"TaskTemplate.ContainerSpec.Secrets"}},
	{"configs", []string{"TaskTemplate.ContainerSpec.Configs"}},
	{"command", []string{"TaskTemplate.ContainerSpec.Command"}},
	{"args", []string{"TaskTemplate.ContainerSpec.Args"}},
	{"user", []string{"TaskTemplate.ContainerSpec.User", "TaskTemplate.ContainerSpec.Groups"}},
	{"working dir", []string{"TaskTemplate.ContainerSpec.Dir"}},
	{"hostname", []string{"TaskTemplate.ContainerSpec.Hostname"}},
	{"hosts", []string{"TaskTemplate.ContainerSpec.Hosts"}},
	{"dns", []string{"TaskTemplate.ContainerSpec.DNSConfig"}},
	{"stop signal", []string{"TaskTemplate.ContainerSpec.StopSignal"}},
	{"stop grace period", []string{"TaskTemplate.ContainerSpec.StopGracePeriod"}},
	{"init", []string{"TaskTemplate.ContainerSpec.Init"}},
	{"read only", []string{"TaskTemplate.ContainerSpec.ReadOnly"}},
	{"tty", []string{"TaskTemplate.ContainerSpec.TTY", "TaskTemplate.ContainerSpec.OpenStdin"}},
	{"capabilities", []string{"TaskTemplate.ContainerSpec.CapabilityAdd", "TaskTemplate.ContainerSpec.CapabilityDrop", "TaskTemplate.ContainerSpec.Privileges"}},
	{"sysctls", []string{"TaskTemplate.ContainerSpec.Sysctls"}},
	{"ulimits", []string{"TaskTemplate.ContainerSpec.Ulimits"}},
	{"logging", []string{"TaskTemplate.LogDriver"}},
}

// DriftOptions are the facts Drift needs beyond the two specs. The zero
// value reports no Unexpected services and compares network ids as they
// are.
type DriftOptions struct {
	// Owner is the release's owner: a live service in the namespace whose
	// labels name it and that git does not declare is Unexpected.
	Owner stack.Owner
	// NetworkNames maps live network ids to names. The Engine stores a
	// service's networks by id while the render names them; without the
	// map every attachment differs.
	NetworkNames map[string]string
	// ConfigNames maps live config ids to names, for credential specs,
	// which carry a config id live and a name in the render.
	ConfigNames map[string]string
}

// Drift compares each service of desired with the live one of the same
// name, over DriftFields, and returns the findings sorted by service and
// then field order. live maps service names to services as the Engine
// lists them; services outside the release's namespace are ignored.
//
// desired must be what was last applied (a release whose render equals its
// recorded revision): a live spec that went back to its previous one,
// which equals desired, under another Skep spec hash, is taken for a
// rollback. Env values are masked. Drift is pure and keeps nothing.
func Drift(desired stack.Release, live map[string]swarm.Service, opts DriftOptions) []Finding {
	out := []Finding{}
	for _, name := range slices.Sorted(maps.Keys(desired.Services)) {
		want := desired.Services[name]
		svc, ok := live[name]
		if !ok {
			out = append(out, Finding{Release: desired.Name, Service: name, Kind: Missing,
				Desired: imageOf(want), Reason: "declared but not in the swarm"})
			continue
		}
		out = append(out, serviceDrift(desired.Name, name, want, svc, opts)...)
	}
	for _, name := range slices.Sorted(maps.Keys(live)) {
		svc := live[name]
		if _, declared := desired.Services[name]; declared || !inRelease(desired.Name, svc.Spec) {
			continue
		}
		// Skep's own jobs (hooks) sit in the namespace without being
		// services git declares.
		if svc.Spec.Labels[stack.LabelKind] != "" {
			continue
		}
		if opts.Owner.Controller != "" && opts.Owner.Owns(svc.Spec.Labels) {
			out = append(out, Finding{Release: desired.Name, Service: name, Kind: Unexpected,
				Live: imageOf(svc.Spec), Reason: "not declared in git"})
		}
	}
	return out
}

// inRelease reports whether a service belongs to the release's namespace
// as docker stack sees it: by its namespace label or its "<release>_" name.
func inRelease(release string, spec swarm.ServiceSpec) bool {
	return spec.Labels[stack.LabelNamespace] == release || strings.HasPrefix(spec.Name, release+"_")
}

// imageOf renders a spec's image as a Finding shows it; "" for none.
func imageOf(spec swarm.ServiceSpec) string {
	if cs := spec.TaskTemplate.ContainerSpec; cs != nil && cs.Image != "" {
		return strconv.Quote(cs.Image)
	}
	return ""
}

// serviceDrift compares one declared service with its live copy.
func serviceDrift(release, name string, want swarm.ServiceSpec, svc swarm.Service, opts DriftOptions) []Finding {
	desired := driftView(want, nil)
	current := driftView(svc.Spec, &opts)
	// apply pins tags to digests; a pin of the declared tag is no drift.
	matchImages(desired, current)
	diffs := namedDiffs(current, desired)
	if len(diffs) == 0 {
		return nil
	}
	kind, reason := Modified, ""
	if back, why := rolledBack(svc, desired, opts); back {
		kind, reason = RolledBack, why
	}
	out := make([]Finding, 0, len(diffs))
	for _, d := range diffs {
		out = append(out, Finding{
			Release: release, Service: name, Kind: kind, Field: d.field, Path: d.Path,
			Desired: d.New, Live: d.Old, Reason: reason,
		})
	}
	return out
}

// rolledBack reports whether Swarm took svc back from the declared spec:
// its update status says so (Swarm keeps it until the next update), or
// its previous spec is the declared one and the current spec carries
// another Skep spec hash, which only a rollback restores (`docker service
// update` keeps labels, so an out-of-band edit keeps the hash).
func rolledBack(svc swarm.Service, desired *swarm.ServiceSpec, opts DriftOptions) (bool, string) {
	if u := svc.UpdateStatus; u != nil {
		switch u.State {
		case swarm.UpdateStateRollbackStarted, swarm.UpdateStateRollbackPaused, swarm.UpdateStateRollbackCompleted:
			return true, strings.TrimSpace(string(u.State) + ": " + u.Message)
		}
	}
	prev := svc.PreviousSpec
	if prev == nil {
		return false, ""
	}
	cur, old := svc.Spec.Labels[stack.LabelSpecHash], prev.Labels[stack.LabelSpecHash]
	if cur == "" || old == "" || cur == old {
		return false, ""
	}
	previous := driftView(*prev, &opts)
	matchImages(desired, previous)
	if len(namedDiffs(previous, desired)) > 0 {
		return false, ""
	}
	return true, "the live spec went back to the one before the declared spec"
}

// namedDiff is a FieldDiff with the DriftField name it falls under.
type namedDiff struct {
	FieldDiff
	field string
}

// namedDiffs is Fields(live, desired) restricted to DriftFields, with env
// values masked.
func namedDiffs(live, desired *swarm.ServiceSpec) []namedDiff {
	var out []namedDiff
	for _, d := range Fields(*live, *desired, Options{MaskEnv: true}) {
		if field, ok := driftField(d.Path); ok {
			out = append(out, namedDiff{FieldDiff: d, field: field})
		}
	}
	return out
}

// driftField names the DriftField that covers path; the first match wins,
// which is why DriftFields lists the most specific first.
func driftField(path string) (string, bool) {
	for _, f := range DriftFields {
		for _, p := range f.Paths {
			if hasPathPrefix(path, p) {
				return f.Name, true
			}
		}
	}
	return "", false
}

// driftView returns a private copy of spec in the form drift compares:
// Skep's and stack deploy's bookkeeping labels dropped, the Engine's
// defaults filled in, networks on the task template, and, for a live spec
// (names != nil), network and credential-spec config ids turned into names.
func driftView(spec swarm.ServiceSpec, names *DriftOptions) *swarm.ServiceSpec {
	s := copyService(spec)
	maps.DeleteFunc(s.Labels, func(k, _ string) bool {
		return strings.HasPrefix(k, stack.LabelPrefix) || k == stack.LabelStackImage
	})
	stack.EngineDefaults(&s)
	// apply restricts the tasks to the platforms of the pinned digest's
	// manifest, as docker stack deploy does: git never declares them.
	if p := s.TaskTemplate.Placement; p != nil && len(p.Platforms) > 0 {
		kept := *p
		kept.Platforms = nil
		s.TaskTemplate.Placement = &kept
	}
	if cs := s.TaskTemplate.ContainerSpec; cs != nil {
		cs.Image = familiarImage(cs.Image)
		if names != nil {
			if p := cs.Privileges; p != nil && p.CredentialSpec != nil && names.ConfigNames[p.CredentialSpec.Config] != "" {
				p.CredentialSpec.Config = names.ConfigNames[p.CredentialSpec.Config]
			}
		}
	}
	// The deprecated service-level list and the task template's mean the
	// same; Engines move one into the other.
	//lint:ignore SA1019 specs written for API 1.41 may still use it
	s.TaskTemplate.Networks = append(s.TaskTemplate.Networks, s.Networks...)
	s.Networks = nil //lint:ignore SA1019 see above
	if names != nil {
		for i, n := range s.TaskTemplate.Networks {
			if name := names.NetworkNames[n.Target]; name != "" {
				s.TaskTemplate.Networks[i].Target = name
			}
		}
	}
	return &s
}

// familiarImage writes an image the way the Engine client sends it: short
// for Docker Hub, with "latest" when it names neither tag nor digest.
func familiarImage(image string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return image
	}
	return reference.FamiliarString(reference.TagNameOnly(named))
}

// matchImages makes live's image read as desired's when they name the same
// image: same repository and tag, with a digest on one side only, is the
// same (apply pins tags to digests); two digests must agree. Both must be
// familiar already.
func matchImages(desired, live *swarm.ServiceSpec) {
	dc, lc := desired.TaskTemplate.ContainerSpec, live.TaskTemplate.ContainerSpec
	if dc == nil || lc == nil || dc.Image == lc.Image {
		return
	}
	d, errD := reference.ParseNormalizedNamed(dc.Image)
	l, errL := reference.ParseNormalizedNamed(lc.Image)
	if errD != nil || errL != nil || d.Name() != l.Name() {
		return
	}
	dt, dTagged := d.(reference.Tagged)
	lt, lTagged := l.(reference.Tagged)
	if dTagged && (!lTagged || dt.Tag() != lt.Tag()) {
		return
	}
	dd, dDigested := d.(reference.Digested)
	ld, lDigested := l.(reference.Digested)
	if dDigested && lDigested && dd.Digest() != ld.Digest() {
		return
	}
	if dDigested && !dTagged && !lDigested {
		return // a digest pin against a bare tag cannot be proved the same
	}
	lc.Image = dc.Image
}

// copyService returns a deep copy of spec through JSON, which the Engine's
// types are built for.
func copyService(spec swarm.ServiceSpec) swarm.ServiceSpec {
	var out swarm.ServiceSpec
	b, err := json.Marshal(spec)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		// Every field of ServiceSpec round-trips; keep the value rather
		// than panic if a future Engine type does not.
		return spec
	}
	return out
}

package artifact

import (
	"strings"
	"unicode"
)

// Kind says what an artifact versions. The zero value is invalid.
type Kind string

// The two kinds of artifacts.
const (
	// Infrastructure versions the stack definitions themselves: the
	// application's own source repository and the revision of it to deploy.
	Infrastructure Kind = "infrastructure"
	// Service versions one container image.
	Service Kind = "service"
)

// Strategy is how an artifact's desired version is chosen. The zero value
// is invalid: every entry names exactly one.
type Strategy string

// The strategies of a deploy block. Preview is not one of them: it combines
// with any.
const (
	// Release pins a tag, e.g. v1.8.2.
	Release Strategy = "release"
	// Branch tracks the head commit of a branch of the source repository.
	Branch Strategy = "branch"
	// Suspend freezes the artifact at the version the swarm runs.
	Suspend Strategy = "suspend"
)

// Deploy is an entry's deploy block: exactly one of Release, Branch and
// Suspend, and optionally Preview.
type Deploy struct {
	Release string
	Branch  string
	Suspend bool
	// Preview asks for a preview per other branch of the source repository
	// (see the previews issue); it is not a strategy.
	Preview bool
}

// Strategy returns the strategy d names, or "" when it names none.
func (d Deploy) Strategy() Strategy {
	switch {
	case d.Release != "":
		return Release
	case d.Branch != "":
		return Branch
	case d.Suspend:
		return Suspend
	}
	return ""
}

// Entry is one declared artifact, as an artifact file states it, with the
// shorthand names of the release-repository shape already resolved.
type Entry struct {
	Kind Kind
	// Name identifies the artifact within its environment and names its
	// render variables (see Variable and Parameter).
	Name string
	// Image is the OCI repository of a service's image, without tag or
	// digest, e.g. registry.example.org/team/web. Empty for infrastructure.
	Image string
	// Source is the git repository whose tags and branches define versions.
	Source string
	// Provider is what the release-repository shape says deploys the
	// infrastructure (e.g. cloudformation); Skep deploys it as a Swarm stack
	// whatever it says, and keeps it for display only.
	Provider string
	Deploy   Deploy
	// Labels are free metadata, kept for display and routing.
	Labels map[string]string
	// File and Line say where the entry is declared.
	File string
	Line int
}

// Condition is what the registry says of an artifact's desired image. The
// zero value means it was not asked (no registry, or suspended).
type Condition string

// The image conditions.
const (
	// Pushed: the desired image's manifest exists; its digest is known.
	Pushed Condition = "pushed"
	// Waiting: the registry answered that the desired image does not exist
	// (yet).
	Waiting Condition = "waiting"
	// Failed: the registry could not be asked (unreachable, 5xx, refused
	// credentials); the desired version is not used until it answers.
	Failed Condition = "error"
)

// Object is one artifact with what was resolved for it in one reconcile:
// the version git asks for, the version the swarm runs, and the registry's
// answer about the desired image. It is a value.
type Object struct {
	Entry Entry
	// Desired is the version git asks for: the pinned tag, or the branch
	// head commit; "" when it could not be resolved.
	Desired string
	// Current is the version the swarm runs now ("" when nothing runs), and
	// CurrentDigest the digest its image is pinned to, when it is: falling
	// back keeps exactly what runs, so no service is rewritten for it.
	Current       string
	CurrentDigest string
	// Condition is the registry's answer about Desired's image; Reason
	// says why when it is not Pushed. Infrastructure entries have no image:
	// their condition is Pushed once Desired resolved.
	Condition Condition
	Reason    string
	// Digest is the desired image's manifest digest when Pushed.
	Digest string
}

// Suspended reports whether the artifact's deploy is frozen.
func (o Object) Suspended() bool { return o.Entry.Deploy.Suspend }

// ready reports whether the desired version may be used: it resolved, its
// image exists, and the deploy is not suspended.
func (o Object) ready() bool {
	return o.Desired != "" && o.Condition == Pushed && !o.Suspended()
}

// Version returns the version a render uses: the desired one when its image
// is in the registry and the deploy is not suspended, otherwise the one the
// swarm runs. For example, a pin moved to v0.5.0 before its image was
// pushed keeps v0.4.0, the running version, until the registry has v0.5.0.
// "" means no version can be used yet (nothing runs and the desired image is
// missing): the caller must wait, never deploy without one.
func (o Object) Version() string {
	if o.ready() {
		return o.Desired
	}
	return o.Current
}

// Drift reports whether the artifact has a state drift worth acting on: the
// deploy is not suspended, a desired version resolved, and it differs from
// the current one. With ready true the desired image must also be pushed
// (a drift to apply); with ready false the image does not matter (a drift
// to wait for and report). Every ready drift is also a waiting one.
func (o Object) Drift(ready bool) bool {
	if o.Suspended() || o.Desired == "" || o.Desired == o.Current {
		return false
	}
	return !ready || o.Condition == Pushed
}

// Digested returns the image version a render uses, pinned to the digest
// known for it (the registry's for the desired version, the running
// image's for the current one): "v1.2.0@sha256:…", "v1.2.0", or "".
func (o Object) Digested() string {
	v := o.Version()
	switch {
	case v == "":
	case o.ready() && o.Digest != "":
		return v + "@" + o.Digest
	case !o.ready() && o.CurrentDigest != "":
		return v + "@" + o.CurrentDigest
	}
	return v
}

// Reference returns the full image reference a render uses for a service
// artifact ("registry/team/web:v1.2.0@sha256:…"), or "" without a version
// or an image.
func (o Object) Reference() string {
	v := o.Digested()
	if v == "" || o.Entry.Image == "" {
		return ""
	}
	return o.Entry.Image + ":" + v
}

// Variable returns the compose variable prefix of the artifact: its name in
// upper snake case ("web-api" → "WEB_API"), to which _VERSION, _IMAGE and
// _DIGEST are appended.
func Variable(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r == '-' || r == '.' || r == '_':
			b.WriteByte('_')
		default:
			b.WriteRune(unicode.ToUpper(r))
		}
	}
	return b.String()
}

// Parameter returns the artifact's parameter key in the form release
// repositories already use for stack parameters: the name in upper camel
// case followed by "Version" ("specta" → "SpectaVersion", "web-api" →
// "WebApiVersion").
func Parameter(name string) string {
	var b strings.Builder
	upper := true
	for _, r := range name {
		if r == '-' || r == '.' || r == '_' {
			upper = true
			continue
		}
		if upper {
			r = unicode.ToUpper(r)
			upper = false
		}
		b.WriteRune(r)
	}
	return b.String() + "Version"
}

package syncpass

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"
	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/stack"
)

// runningImage is the image s runs: while an update is under way, the one
// of the spec being replaced, which is what runs until the update ends.
func runningImage(s dswarm.Service) string {
	spec := s.Spec
	if s.UpdateStatus != nil && s.UpdateStatus.State == dswarm.UpdateStateUpdating && s.PreviousSpec != nil {
		spec = *s.PreviousSpec
	}
	if spec.TaskTemplate.ContainerSpec == nil {
		return ""
	}
	return spec.TaskTemplate.ContainerSpec.Image
}

// tagOf returns the tag of running ("v1", or "v1@sha256:…" when pinned)
// when it is an image of repository image.
func tagOf(running, image string) (string, bool) {
	named, err := reference.ParseNormalizedNamed(running)
	if err != nil {
		return "", false
	}
	want, err := reference.ParseNormalizedNamed(image)
	if err != nil || named.Name() != want.Name() {
		return "", false
	}
	tagged, ok := named.(reference.Tagged)
	if !ok {
		return "", false
	}
	if digested, ok := named.(reference.Digested); ok {
		return tagged.Tag() + "@" + digested.Digest().String(), true
	}
	return tagged.Tag(), true
}

// useArtifactImages points every service of rel whose image is a service
// artifact's repository at the reference the artifact resolved to, so a
// compose file naming the image without a variable deploys the gated
// version too. It returns the artifacts a service uses that have no
// version yet.
func useArtifactImages(rel *stack.Release, objs []artifact.Object) []string {
	var missing []string
	for _, o := range objs {
		if o.Entry.Kind != artifact.Service {
			continue
		}
		want, err := reference.ParseNormalizedNamed(o.Entry.Image)
		if err != nil {
			continue
		}
		for name, spec := range rel.Services {
			cs := spec.TaskTemplate.ContainerSpec
			if cs == nil {
				continue
			}
			named, err := reference.ParseNormalizedNamed(cs.Image)
			if err != nil || named.Name() != want.Name() {
				continue
			}
			ref := o.Reference()
			if ref == "" {
				missing = append(missing, o.Entry.Name)
				continue
			}
			c := *cs
			c.Image = ref
			spec.TaskTemplate.ContainerSpec = &c
			rel.Services[name] = spec
		}
	}
	slices.Sort(missing)
	return slices.Compact(missing)
}

// waitingArtifacts describes the artifacts whose desired version waits
// for its image, one line: "web v2 (image … is not in the registry yet)".
func waitingArtifacts(objs []artifact.Object) string {
	var parts []string
	for _, o := range objs {
		if o.Drift(false) && !o.Drift(true) {
			parts = append(parts, fmt.Sprintf("%s %s (%s)", o.Entry.Name, o.Desired, o.Reason))
		}
	}
	return strings.Join(parts, "; ")
}

// withStandIns returns objs with every service artifact that has no
// version yet given a stand-in one (see standIn), for the render alone:
// without it `image: ${WEB_IMAGE}` renders to no image at all, an error
// that stalls the commit although the application only waits for a push.
// A release that holds a stand-in is never deployed (see usesStandIns).
func withStandIns(objs []artifact.Object) []artifact.Object {
	out := slices.Clone(objs)
	for i, o := range out {
		if o.Entry.Kind == artifact.Service && o.Version() == "" {
			// Falling back to Current is how Version ends up at it: the
			// desired version is not ready.
			o.Desired, o.Condition = "", artifact.Waiting
			o.Current, o.CurrentDigest = standIn(o.Entry.Name)
			out[i] = o
		}
	}
	return out
}

// standIn is the version and digest a render sees for artifact name
// while it has none, distinct per artifact and found nowhere else.
func standIn(name string) (version, digest string) {
	version = "skep-no-version-" + strings.ToLower(artifact.Variable(name))
	sum := sha256.Sum256([]byte(version))
	return version, "sha256:" + hex.EncodeToString(sum[:])
}

// usesStandIns returns the service artifacts without a version whose
// stand-in rel holds anywhere (an image, a label, an environment
// variable): what a render took from an artifact it cannot have yet. A
// release it cannot read counts as holding every one.
func usesStandIns(rel stack.Release, objs []artifact.Object) []string {
	var names []string
	var data []byte
	var err error
	for _, o := range objs {
		if o.Entry.Kind != artifact.Service || o.Version() != "" {
			continue
		}
		if data == nil && err == nil {
			data, err = json.Marshal(rel)
		}
		version, digest := standIn(o.Entry.Name)
		if err != nil || bytes.Contains(data, []byte(version)) || bytes.Contains(data, []byte(digest)) {
			names = append(names, o.Entry.Name)
		}
	}
	return names
}

// noVersion says, one line, why each of the artifacts named has no version
// to deploy: "web v2 (image … is not in the registry yet)".
func noVersion(objs []artifact.Object, names []string) string {
	var parts []string
	for _, o := range objs {
		if !slices.Contains(names, o.Entry.Name) {
			continue
		}
		switch {
		case o.Suspended():
			parts = append(parts, o.Entry.Name+" (suspended, and nothing runs)")
		case o.Desired == "":
			parts = append(parts, fmt.Sprintf("%s (%s)", o.Entry.Name, o.Reason))
		default:
			parts = append(parts, fmt.Sprintf("%s %s (%s)", o.Entry.Name, o.Desired, o.Reason))
		}
	}
	return strings.Join(parts, "; ")
}

// versionsKey identifies the artifact versions a render used, so that a
// rollout Swarm rolled back is remembered per commit and versions.
func versionsKey(objs []artifact.Object) string {
	var parts []string
	for _, o := range objs {
		parts = append(parts, o.Entry.Name+"="+o.Digested())
	}
	return strings.Join(parts, ",")
}

// Waiting reports whether an artifact's desired version waits for its
// image: the release runs an earlier one until it is pushed.
func Waiting(objs []artifact.Object) bool { return waitingArtifacts(objs) != "" }

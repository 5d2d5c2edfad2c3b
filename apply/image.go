package apply

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/swarm"
)

// ResolveImage says when Apply asks the registry for an image's digest,
// with the meaning of `docker stack deploy --resolve-image`. The zero value
// means ResolveAlways.
type ResolveImage string

const (
	// ResolveAlways pins every service image to the digest the registry
	// reports for its tag, so all nodes run the same image. When the
	// registry cannot be reached the tag is kept (or, for a service already
	// running that tag, the digest it runs).
	ResolveAlways ResolveImage = "always"
	// ResolveChanged asks the registry only for a service that is new or
	// whose image (ignoring digests) differs from the live one; otherwise
	// the live image, digest included, is kept.
	ResolveChanged ResolveImage = "changed"
	// ResolveNever deploys images exactly as written.
	ResolveNever ResolveImage = "never"
)

// Validate returns an error unless r is "" or one of the constants.
func (r ResolveImage) Validate() error {
	switch r {
	case "", ResolveAlways, ResolveChanged, ResolveNever:
		return nil
	}
	return fmt.Errorf("resolve image %q: want always, changed or never", string(r))
}

// resolveTimeout bounds one registry look-up; a registry that does not
// answer must not hold the whole apply.
const resolveTimeout = 30 * time.Second

// normalizeImage adds the "latest" tag to an image without tag or digest
// and writes it in its familiar form, as the Engine client does before it
// sends a spec; comparing against live specs needs the same form.
func normalizeImage(image string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return image
	}
	return reference.FamiliarString(reference.TagNameOnly(named))
}

// withoutDigest returns image's repository and tag, dropping any digest.
func withoutDigest(image string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return image
	}
	out := reference.TrimNamed(named)
	if tagged, ok := named.(reference.Tagged); ok {
		if t, err := reference.WithTag(out, tagged.Tag()); err == nil {
			return reference.FamiliarString(t)
		}
	}
	return reference.FamiliarString(reference.TagNameOnly(out))
}

// hasDigest reports whether image pins a digest already.
func hasDigest(image string) bool {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return false
	}
	_, ok := named.(reference.Digested)
	return ok
}

// prefetchDigests starts the registry look-ups resolveImage will make
// under ResolveAlways, one per distinct image, without waiting for them:
// resolveImage then finds each answered or in flight in the cache. Under
// the other policies whether a service is looked up depends on the live
// one, so nothing is asked ahead.
func (a *applier) prefetchDigests(ctx context.Context) {
	if a.opts.ResolveImage != ResolveAlways || a.opts.Digests == nil {
		return
	}
	for _, spec := range a.rel.Services {
		if cs := spec.TaskTemplate.ContainerSpec; cs != nil {
			if image := normalizeImage(cs.Image); !hasDigest(image) {
				a.opts.Digests.start(ctx, a.eng, image)
			}
		}
	}
}

// resolveImage sets spec's image (normalized by the caller) according to
// the policy. cur is the live service or nil. It never fails: a registry
// that cannot be reached leaves the image unpinned, with a warning.
func (a *applier) resolveImage(ctx context.Context, spec *swarm.ServiceSpec, cur *swarm.Service) {
	cs := spec.TaskTemplate.ContainerSpec
	want := cs.Image
	// A digest written in git is a pin of its own, never replaced by the
	// live one.
	sameAsLive := cur != nil && cur.Spec.TaskTemplate.ContainerSpec != nil &&
		withoutDigest(cur.Spec.TaskTemplate.ContainerSpec.Image) == withoutDigest(want) && !hasDigest(want)
	// The live platforms came from the same digest's manifest; dropping
	// them would make the spec differ and restart the service.
	keepLive := func() {
		cs.Image = cur.Spec.TaskTemplate.ContainerSpec.Image
		if p := cur.Spec.TaskTemplate.Placement; p != nil && len(p.Platforms) > 0 {
			setPlatforms(spec, p.Platforms)
		}
	}
	switch a.opts.ResolveImage {
	case ResolveNever:
		return
	case ResolveChanged:
		if sameAsLive {
			keepLive()
			return
		}
	}
	if hasDigest(want) {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	// No registry auth is sent: private registries are not supported yet.
	info, err := a.opts.Digests.inspect(rctx, a.eng, want)
	if err != nil {
		a.log.Warn("image digest not resolved", "service", spec.Name, "image", want, "err", err)
		if sameAsLive {
			// Re-pinning to the tag alone would restart the service only
			// because the registry is away; keep the digest it runs.
			keepLive()
		}
		return
	}
	named, err := reference.ParseNormalizedNamed(want)
	if err != nil {
		return
	}
	pinned, err := reference.WithDigest(named, info.Descriptor.Digest)
	if err != nil {
		a.log.Warn("image digest not usable", "service", spec.Name, "image", want, "digest", info.Descriptor.Digest, "err", err)
		return
	}
	cs.Image = reference.FamiliarString(pinned)
	a.log.Debug("image digest resolved", "service", spec.Name, "image", cs.Image)
	var platforms []swarm.Platform
	for _, p := range info.Platforms {
		arch := p.Architecture
		// As docker stack deploy does: manifests say "arm" where nodes say
		// "armv7l", and the constraint would never match.
		if strings.EqualFold(arch, "arm") {
			arch = ""
		}
		platforms = append(platforms, swarm.Platform{Architecture: arch, OS: p.OS})
	}
	if len(platforms) > 0 {
		setPlatforms(spec, platforms)
	}
}

// setPlatforms restricts spec's tasks to platforms (as docker stack deploy
// does from the image's manifest), on a copy of the slice, so the spec
// shares nothing with the live service or the registry answer.
func setPlatforms(spec *swarm.ServiceSpec, platforms []swarm.Platform) {
	if spec.TaskTemplate.Placement == nil {
		spec.TaskTemplate.Placement = &swarm.Placement{}
	}
	spec.TaskTemplate.Placement.Platforms = append([]swarm.Platform(nil), platforms...)
}

package artifact

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Platform is one os/architecture (and variant) an image is built for.
type Platform struct {
	OS, Architecture, Variant string
}

// maxPlatformAnswers bounds the cache of Platforms: past it the cache
// starts over, which costs one look-up per image again and nothing else.
const maxPlatformAnswers = 4096

// platformAnswer is one cached answer of Platforms; a zero until keeps it
// for good (a digest names one manifest for ever).
type platformAnswer struct {
	platforms []Platform
	err       error
	until     time.Time
}

// Platforms reads from the registry which platforms image (by tag or by
// digest) is built for: every platform of a multi-platform index, less the
// attestation entries ("unknown/unknown"), or the OS and architecture of a
// single image's config. Answers are cached per reference: by digest for
// good, by tag for the gate's PushedFor, a missing image for MissingFor;
// a registry that fails is backed off as Check backs it off. A look-up
// blocks for at most the timeout and follows the registry gate's
// credentials and transport. A missing image is an error that wraps
// ErrImageMissing. The slice returned is the caller's.
func (r *Registry) Platforms(ctx context.Context, image string) ([]Platform, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", image, err)
	}
	key, host := ref.String(), ref.Context().RegistryStr()
	now := r.opts.Now()
	r.mu.Lock()
	if a, ok := r.platforms[key]; ok && (a.until.IsZero() || now.Before(a.until)) {
		r.mu.Unlock()
		return slices.Clone(a.platforms), a.err
	}
	if b, ok := r.hosts[host]; ok && now.Before(b.until) {
		r.mu.Unlock()
		return nil, errors.New(b.reason)
	}
	r.mu.Unlock()

	platforms, err := r.readPlatforms(ctx, ref)
	now = r.opts.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	a := platformAnswer{platforms: platforms, err: err}
	switch {
	case err == nil:
		delete(r.hosts, host)
		if _, digest := ref.(name.Digest); !digest {
			a.until = now.Add(r.opts.PushedFor)
		}
	case errors.Is(err, ErrImageMissing):
		delete(r.hosts, host)
		a.until = now.Add(r.opts.MissingFor)
	case ctx.Err() != nil:
		return nil, err
	default:
		r.failHost(host, err.Error(), now)
		return nil, err
	}
	if len(r.platforms) >= maxPlatformAnswers {
		clear(r.platforms)
	}
	r.platforms[key] = a
	return slices.Clone(platforms), err
}

// readPlatforms asks the registry for ref's manifest or index.
func (r *Registry) readPlatforms(ctx context.Context, ref name.Reference) ([]Platform, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	desc, err := remote.Get(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(r.opts.Keychain),
		remote.WithTransport(r.opts.Transport))
	if err != nil {
		if isMissing(err) {
			err = fmt.Errorf("%w: %w", ErrImageMissing, err)
		}
		return nil, fmt.Errorf("read the manifest of %s: %w", ref, err)
	}
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, fmt.Errorf("read the index of %s: %w", ref, err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return nil, fmt.Errorf("read the index of %s: %w", ref, err)
		}
		var out []Platform
		for _, d := range m.Manifests {
			// Build attestations sit in the index as manifests of platform
			// unknown/unknown: no node runs them.
			if p := d.Platform; p != nil && p.OS != "unknown" {
				out = append(out, Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant})
			}
		}
		return out, nil
	}
	img, err := desc.Image()
	if err != nil {
		return nil, fmt.Errorf("read the image %s: %w", ref, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read the config of %s: %w", ref, err)
	}
	return []Platform{{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}}, nil
}

// ErrImageMissing says the registry answered that an image (or its
// repository) does not exist.
var ErrImageMissing = errors.New("image not in the registry")

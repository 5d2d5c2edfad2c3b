package artifact

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Platform is one os/architecture (and variant) an image is built for.
type Platform struct {
	OS, Architecture, Variant string
}

// Platforms reads from the registry which platforms image (by tag or by
// digest) is built for: every platform of a multi-platform index, less the
// attestation entries ("unknown/unknown"), or the OS and architecture of a
// single image's config. It is not cached, blocks for at most the timeout,
// and follows the registry gate's credentials and transport. A missing
// image is an error that wraps ErrImageMissing.
func (r *Registry) Platforms(ctx context.Context, image string) ([]Platform, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", image, err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	desc, err := remote.Get(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(r.opts.Keychain),
		remote.WithTransport(r.opts.Transport))
	if err != nil {
		if isMissing(err) {
			err = fmt.Errorf("%w: %w", ErrImageMissing, err)
		}
		return nil, fmt.Errorf("read the manifest of %s: %w", image, err)
	}
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, fmt.Errorf("read the index of %s: %w", image, err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return nil, fmt.Errorf("read the index of %s: %w", image, err)
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
		return nil, fmt.Errorf("read the image %s: %w", image, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read the config of %s: %w", image, err)
	}
	return []Platform{{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}}, nil
}

// ErrImageMissing says the registry answered that an image (or its
// repository) does not exist.
var ErrImageMissing = errors.New("image not in the registry")

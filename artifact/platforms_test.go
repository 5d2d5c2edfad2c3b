package artifact

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// imageFor is a random image whose config says os/arch/variant.
func imageFor(t *testing.T, p v1.Platform) v1.Image {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestPlatformsReadsAnImageOrAnIndexFromTheRegistry(t *testing.T) {
	reg := startRegistry(t)
	ref := func(repo string) name.Reference {
		r, err := name.NewTag(fmt.Sprintf("%s/%s:v1", reg.host, repo))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if err := remote.Write(ref("single"), imageFor(t, v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}), remote.WithContext(t.Context())); err != nil {
		t.Fatal(err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm", Variant: "v7"}, {OS: "unknown", Architecture: "unknown"}} {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: imageFor(t, p), Descriptor: v1.Descriptor{Platform: &p}})
	}
	if err := remote.WriteIndex(ref("multi"), idx, remote.WithContext(t.Context())); err != nil {
		t.Fatal(err)
	}
	r := NewRegistry(RegistryOptions{})
	for _, tc := range []struct {
		name    string
		image   string
		want    []Platform
		missing bool
	}{
		{name: "a single image's config", image: ref("single").String(), want: []Platform{{OS: "linux", Architecture: "arm64", Variant: "v8"}}},
		{name: "an index's platforms, without its attestations", image: ref("multi").String(),
			want: []Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm", Variant: "v7"}}},
		{name: "an image the registry does not hold", image: ref("absent").String(), missing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.Platforms(t.Context(), tc.image)
			if tc.missing {
				if !errors.Is(err, ErrImageMissing) {
					t.Fatalf("Platforms(%s) = %v, %v; want ErrImageMissing", tc.image, got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Platforms(%s) (-want +got):\n%s", tc.image, diff)
			}
		})
	}
}

// TestPlatformsAreCachedPerReference: a tag is asked again only after
// PushedFor, a digest never, a missing image after MissingFor, and a
// registry that fails is backed off rather than asked on every call.
func TestPlatformsAreCachedPerReference(t *testing.T) {
	reg := startRegistry(t)
	digest := reg.push(t, "team/web", "v1")
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	r := NewRegistry(RegistryOptions{Now: func() time.Time { return now }})
	ask := func(image string) error {
		t.Helper()
		_, err := r.Platforms(t.Context(), image)
		return err
	}
	byTag, byDigest, absent := reg.host+"/team/web:v1", reg.host+"/team/web@"+digest, reg.host+"/team/web:v9"
	steps := []struct {
		name    string
		image   string
		advance time.Duration
		fail    bool
		read    bool // the registry is asked (a failing one, with retries)
		missing bool
		failed  bool
	}{
		{name: "a tag is read", image: byTag, read: true},
		{name: "and answered from the cache within PushedFor", image: byTag, advance: DefaultPushedFor - time.Second},
		{name: "and read again after it", image: byTag, advance: 2 * time.Second, read: true},
		{name: "a digest is read", image: byDigest, read: true},
		{name: "and kept for good", image: byDigest, advance: 24 * time.Hour},
		{name: "a missing image is said", image: absent, read: true, missing: true},
		{name: "and kept for MissingFor", image: absent, missing: true},
		{name: "a registry that fails is said", image: byTag, advance: DefaultPushedFor, fail: true, read: true, failed: true},
		{name: "and backed off, not asked again at once", image: byTag, fail: true, failed: true},
	}
	reg.gets.Store(0)
	for _, s := range steps {
		now = now.Add(s.advance)
		reg.fail.Store(s.fail)
		before := reg.gets.Load()
		err := ask(s.image)
		switch {
		case s.missing && !errors.Is(err, ErrImageMissing), s.failed && err == nil, !s.missing && !s.failed && err != nil:
			t.Errorf("%s: Platforms(%s) = %v", s.name, s.image, err)
		}
		if read := reg.gets.Load() > before; read != s.read {
			t.Errorf("%s: the registry was asked: %t, want %t", s.name, read, s.read)
		}
	}
}

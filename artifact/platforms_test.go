package artifact

import (
	"errors"
	"fmt"
	"testing"

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

package apply

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"

	"github.com/skep-cd/skep/harness"
)

// countingEngine is the real Engine, counting digest look-ups.
type countingEngine struct {
	*client.Client
	calls atomic.Int64
}

func (e *countingEngine) DistributionInspect(ctx context.Context, image, auth string) (registry.DistributionInspect, error) {
	e.calls.Add(1)
	return e.Client.DistributionInspect(ctx, image, auth)
}

func TestDigestCacheAsksOncePerImageAndTTL(t *testing.T) {
	cli := harness.RequireSwarm(t)
	reg := harness.StartRegistry(t)
	local := harness.TestImage(t, cli, harness.ImageOptions{Version: "v1"})
	image := reg.Push(t, cli, local, "digests/web", "v1")
	eng := &countingEngine{Client: cli}
	cache := NewDigestCache(time.Hour, 2)

	// Twenty services of twenty applications ask at once: one look-up.
	var wg sync.WaitGroup
	digests := make([]string, 20)
	for i := range digests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, err := cache.inspect(t.Context(), eng, image)
			if err != nil {
				t.Errorf("inspect %s: %v", image, err)
				return
			}
			digests[i] = info.Descriptor.Digest.String()
		}()
	}
	wg.Wait()
	if n := eng.calls.Load(); n != 1 {
		t.Errorf("%d look-ups for one image asked 20 times at once, want 1", n)
	}
	for _, d := range digests {
		if d == "" || d != digests[0] {
			t.Fatalf("answers differ or are empty: %q", digests)
		}
	}
	// A registry that does not know the image: the failure is an answer
	// too, asked once and shared.
	missing := reg.Ref("digests/none", "v1")
	for range 3 {
		if _, err := cache.inspect(t.Context(), eng, missing); err == nil {
			t.Fatalf("inspect of a missing image succeeded")
		}
	}
	if n := eng.calls.Load(); n != 2 {
		t.Errorf("%d look-ups after a missing image asked 3 times, want 2", n)
	}
	// Past the TTL the registry is asked again.
	short := NewDigestCache(time.Nanosecond, 1)
	for range 2 {
		if _, err := short.inspect(t.Context(), eng, image); err != nil {
			t.Fatal(err)
		}
	}
	if n := eng.calls.Load(); n != 4 {
		t.Errorf("%d look-ups after two asks past the TTL, want 4", n)
	}
}

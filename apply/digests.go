package apply

import (
	"context"
	"sync"
	"time"

	"github.com/docker/docker/api/types/registry"
)

// DigestCache remembers the registry's answer for each image (a digest or
// an error) for a short while, so that a tick asks once per distinct image
// however many services and applications use it, concurrent askers share
// one call, and a registry that is down costs one timeout per TTL rather
// than one per service. At most a few look-ups run at once, so a burst of
// first deploys does not queue the Engine behind its own digest calls.
// One cache serves one swarm: each Engine asks its own registries.
type DigestCache struct {
	ttl time.Duration
	sem chan struct{}

	mu      sync.Mutex
	entries map[string]*digestEntry
}

// digestEntry is one image's look-up: done is closed when info and err
// are set.
type digestEntry struct {
	done chan struct{}
	info registry.DistributionInspect
	err  error
	at   time.Time
}

// Defaults of NewDigestCache.
const (
	// DefaultDigestTTL is how long an answer serves: shorter than any
	// interval, so a tag moved in the registry is seen at the next tick.
	DefaultDigestTTL = 5 * time.Second
	// DefaultDigestConcurrency bounds the look-ups one swarm runs at once.
	DefaultDigestConcurrency = 4
)

// NewDigestCache returns a cache keeping answers for ttl with at most
// concurrency look-ups at once; zero values mean the defaults.
func NewDigestCache(ttl time.Duration, concurrency int) *DigestCache {
	if ttl <= 0 {
		ttl = DefaultDigestTTL
	}
	if concurrency <= 0 {
		concurrency = DefaultDigestConcurrency
	}
	return &DigestCache{ttl: ttl, sem: make(chan struct{}, concurrency), entries: map[string]*digestEntry{}}
}

// inspect returns eng's answer for image, from the cache when it is fresh.
// A nil cache asks eng directly.
func (c *DigestCache) inspect(ctx context.Context, eng Engine, image string) (registry.DistributionInspect, error) {
	if c == nil {
		return eng.DistributionInspect(ctx, image, "")
	}
	e := c.start(ctx, eng, image)
	select {
	case <-e.done:
		return e.info, e.err
	case <-ctx.Done():
		return registry.DistributionInspect{}, ctx.Err()
	}
}

// start returns image's entry: the fresh or in-flight one, or a new one
// whose look-up it starts. It does not wait for the answer.
func (c *DigestCache) start(ctx context.Context, eng Engine, image string) *digestEntry {
	c.mu.Lock()
	e, ok := c.entries[image]
	if ok {
		select {
		case <-e.done:
			if time.Since(e.at) >= c.ttl {
				ok = false // stale: ask again
			}
		default: // in flight: wait for it below
		}
	}
	if !ok {
		e = &digestEntry{done: make(chan struct{})}
		c.entries[image] = e
		c.prune()
		c.mu.Unlock()
		c.lookup(ctx, eng, image, e)
	} else {
		c.mu.Unlock()
	}
	return e
}

// lookup asks eng for image within the concurrency bound and completes e.
// The call runs on its own context: an asker that gives up must not fail
// the others waiting for the same answer.
func (c *DigestCache) lookup(ctx context.Context, eng Engine, image string, e *digestEntry) {
	go func() {
		defer close(e.done)
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
		defer cancel()
		c.sem <- struct{}{}
		defer func() { <-c.sem }()
		e.info, e.err = eng.DistributionInspect(lctx, image, "")
		e.at = time.Now()
	}()
}

// prune drops answers older than the TTL, so the cache holds only the
// images in use. c.mu is held.
func (c *DigestCache) prune() {
	for k, e := range c.entries {
		select {
		case <-e.done:
			if time.Since(e.at) >= c.ttl {
				delete(c.entries, k)
			}
		default:
		}
	}
}

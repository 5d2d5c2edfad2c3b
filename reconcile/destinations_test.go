package reconcile

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/swarm"
)

// TestADestinationDownBeforeItIsFollowedIsMarkedDown: a swarm whose
// first list failed before followSwarm subscribed (its goroutine started
// after the watcher's, and ran late on a loaded machine) was never marked
// unreachable. The watcher tells nobody about the same failure twice, so
// its applications reconciled against the dead engine for good, with no
// word of the swarm in their status (seen in CI).
func TestADestinationDownBeforeItIsFollowedIsMarkedDown(t *testing.T) {
	dir := t.TempDir()
	git, err := gitsource.New(gitsource.Options{Dir: filepath.Join(dir, "git")})
	if err != nil {
		t.Fatal(err)
	}
	local, err := swarm.New(swarm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })
	gone, err := swarm.New(swarm.Options{Destination: swarm.Destination{Name: "gone",
		Managers: []swarm.Manager{{Host: "unix://" + filepath.Join(dir, "no-engine.sock")}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gone.Close() })
	live := swarm.NewWatcher(gone, swarm.WatcherOptions{MinInterval: 50 * time.Millisecond})
	c, err := New(Options{AppSet: appset.FileSource{Path: filepath.Join(dir, "apps.yaml")}, Git: git,
		Destinations: map[string]Remote{"": {Engine: local}, "gone": {Engine: gone, Live: live}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		_ = live.Run(ctx)
	}()
	harness.Eventually(t, 10*time.Second, func(context.Context) (bool, string) {
		return !errors.Is(live.Current().Err(), swarm.ErrNotListed), "the watcher has not listed yet"
	})
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		c.followSwarm(ctx, c.dests["gone"])
	}()
	harness.Eventually(t, 10*time.Second, func(context.Context) (bool, string) {
		return c.dests["gone"].down() != nil, fmt.Sprintf("destination not marked down; snapshot error %v", live.Current().Err())
	})
	cancel()
	<-followed
	<-watched
}

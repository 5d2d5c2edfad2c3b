package reconcile

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
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
	c, err := New(Options{AppSet: appset.FileSource{Path: filepath.Join(dir, "apps.yaml")}, Git: git, Engine: local,
		Remotes: map[string]Remote{"gone": {Engine: gone, Live: live}}})
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
	for errors.Is(live.Current().Err(), swarm.ErrNotListed) {
		time.Sleep(5 * time.Millisecond)
	}
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		c.followSwarm(ctx, c.dests["gone"])
	}()
	deadline := time.Now().Add(10 * time.Second)
	for c.dests["gone"].down() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.dests["gone"].down(); err == nil {
		t.Errorf("destination not marked down; snapshot error %v", live.Current().Err())
	}
	cancel()
	<-followed
	<-watched
}

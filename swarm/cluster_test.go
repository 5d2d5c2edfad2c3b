package swarm

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/harness"
)

// TestLocalSwarmCarriesOnThroughAnotherManagerWhenItsOwnStops: on the
// multi-node cluster, a local-swarm client whose DOCKER_HOST is m1, with m2
// and m3 as fallbacks, goes on reading (and its snapshot goes on following
// the swarm) through another manager once m1's engine is stopped.
func TestLocalSwarmCarriesOnThroughAnotherManagerWhenItsOwnStops(t *testing.T) {
	cl := harness.RequireCluster(t)
	m1 := cl.Node(t, "skep-m1")
	t.Setenv("DOCKER_HOST", cl.Managers[0])
	dest, err := LocalDestination(os.Getenv, cl.Managers[1:])
	if err != nil {
		t.Fatal(err)
	}
	c, err := Connect(t.Context(), Options{Destination: dest})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := cl.Client(t, m1).Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Identity().NodeID; got != info.Swarm.NodeID {
		t.Fatalf("the client talks to node %s, want m1 (%s), its DOCKER_HOST", got, info.Swarm.NodeID)
	}
	w := NewWatcher(c, WatcherOptions{})
	ctx, cancel, done := runWatcher(t, w)
	defer func() {
		cancel()
		<-done
	}()
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		s := w.Current()
		return !s.TakenAt().IsZero() && s.Err() == nil, fmt.Sprintf("taken at %v, err %v", s.TakenAt(), s.Err())
	})

	cl.Stop(t, m1)
	harness.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		id, err := c.Probe(ctx)
		return err == nil && id.NodeID != info.Swarm.NodeID, fmt.Sprintf("probe: %+v, %v", id, err)
	})
	// A change made after m1 stopped reaches the snapshot through the
	// events stream of the manager the client moved to.
	mgr := cl.Manager(t, time.Minute)
	ns := harness.Name(t, "fo")
	harness.CleanupStack(t, mgr, ns)
	zero := uint64(0)
	if _, err := c.ServiceCreate(ctx, swarm.ServiceSpec{
		Annotations:  swarm.Annotations{Name: ns + "_after", Labels: map[string]string{"com.docker.stack.namespace": ns}},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: "skep-testapp:absent"}},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &zero}},
	}, swarm.ServiceCreateOptions{}); err != nil {
		t.Fatalf("create a service through the client after m1 stopped: %v", err)
	}
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		s := w.Current()
		_, ok := s.Service(ns + "_after")
		return ok && s.Err() == nil, fmt.Sprintf("service not in the snapshot (err %v)", s.Err())
	})
}

package multinode_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/reconcile"
)

// spreadCompose is a release laid out over the nodes: four replicas at
// most one per node, spread over the zones; a global service; and two
// replicas held to zone b (m2 and w2) by a constraint.
const spreadCompose = `services:
  spread:
    image: ${IMAGE}
    deploy:
      endpoint_mode: dnsrr
      replicas: 4
      placement:
        max_replicas_per_node: 1
        preferences: [{spread: node.labels.zone}]
  everywhere:
    image: ${IMAGE}
    deploy: {mode: global, endpoint_mode: dnsrr}
  zoned:
    image: ${IMAGE}
    deploy:
      endpoint_mode: dnsrr
      replicas: 2
      placement:
        constraints: [node.labels.zone == b]
`

// zones are the cluster's node labels, as scripts/cluster-up sets them.
var zones = map[string]string{"skep-m1": "a", "skep-m3": "a", "skep-w1": "a", "skep-m2": "b", "skep-w2": "b"}

// TestAReleaseSpreadOverTheNodesIsHealthyAndCountsItsTasksPerNode: spread
// with max_replicas_per_node, a global service and a constraint on a node
// label are deployed as Swarm places them, and the application's health
// counts the tasks of every node.
func TestAReleaseSpreadOverTheNodesIsHealthyAndCountsItsTasksPerNode(t *testing.T) {
	e := newEnv(t)
	img := e.image(t, "spread", "v1", harness.ImageOptions{})
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": spreadCompose, ".env": "IMAGE=" + img + "\n"})
	ctrl := e.controller(t, e.app("web"))

	st := waitStatus(t, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Sync == reconcile.Synced && s.Health == health.Healthy
	})
	nodes := len(e.cl.Nodes)
	if want := 4 + nodes + 2; st.Running != want || st.Desired != want {
		t.Errorf("health counts %d/%d running, want %d/%d (4 spread, %d global, 2 zoned)", st.Running, st.Desired, want, want, nodes)
	}
	svcs := e.services(t)

	spread := e.perNode(t, svcs["spread"])
	byZone := map[string]int{}
	for node, n := range spread {
		if n > 1 {
			t.Errorf("spread runs %d tasks on %s, want at most 1 (max_replicas_per_node)", n, node)
		}
		byZone[zones[node]] += n
	}
	if sum(spread) != 4 || byZone["a"] != 2 || byZone["b"] != 2 {
		t.Errorf("spread tasks per node %v (per zone %v), want 4 tasks, 2 in each zone", spread, byZone)
	}

	everywhere := e.perNode(t, svcs["everywhere"])
	for _, n := range e.cl.Nodes {
		if everywhere[n.Name] != 1 {
			t.Errorf("global service runs %d tasks on %s, want 1 (all: %v)", everywhere[n.Name], n.Name, everywhere)
		}
	}

	zoned := e.perNode(t, svcs["zoned"])
	for node := range zoned {
		if zones[node] != "b" {
			t.Errorf("zoned runs on %s (zone %s), want only zone b nodes", node, zones[node])
		}
	}
	if sum(zoned) != 2 {
		t.Errorf("zoned runs %d tasks (%v), want 2", sum(zoned), zoned)
	}
	// Every node pulled the image itself: the tag resolved to one digest,
	// and each node that runs a task holds it.
	for _, name := range slices.Sorted(maps.Keys(svcs)) {
		if image := svcs[name].Spec.TaskTemplate.ContainerSpec.Image; !digested(image) {
			t.Errorf("service %s runs %s, want the tag pinned to a digest", name, image)
		}
	}
}

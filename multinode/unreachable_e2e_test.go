package multinode_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/reconcile"
)

// TestATaskThatCannotPullShowsTheEnginesMessage: an image no registry
// holds (deployed as written, resolveImage: never) cannot be pulled by the
// nodes its tasks land on: health is degraded with the Engine's own
// message, and the application's tasks name the nodes that tried.
func TestATaskThatCannotPullShowsTheEnginesMessage(t *testing.T) {
	e := newEnv(t)
	absent := e.cl.Registry.Ref(harness.Name(t, "nowhere"), "v1")
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": "services:\n  web:\n    image: ${IMAGE}\n    deploy: {endpoint_mode: dnsrr, replicas: 2}\n",
		".env": "IMAGE=" + absent + "\n"})
	ctrl := e.controller(t, e.appWith("web", "automated: true, interval: 10s, resolveImage: never"))
	st := waitStatus(t, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Health == health.Degraded && strings.Contains(s.HealthMessage, "No such image")
	})
	t.Logf("health: %s", st.HealthMessage)
	if !strings.Contains(st.HealthMessage, absent) {
		t.Errorf("health message %q does not name the image the Engine could not pull", st.HealthMessage)
	}
	tasks, err := ctrl.LiveTasks(t.Context(), "web")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, id := range e.nodeIDs(t) {
		ids[id] = true
	}
	if !slices.ContainsFunc(tasks, func(task reconcile.Task) bool {
		return ids[task.NodeID] && task.NodeName != "" && strings.Contains(task.Status.Err, "No such image")
	}) {
		t.Errorf("no task of the application names a node of the cluster and the Engine's error: %+v", tasks)
	}
}

// TestANodeCutOffShowsTheSchedulersMessage: a service held to one worker
// by a constraint loses it when the worker's network is cut: the managers
// give the node up, the replacement task cannot be placed, and health is
// degraded with the scheduler's reason. Once the link is back, it is
// healthy again, without a write.
func TestANodeCutOffShowsTheSchedulersMessage(t *testing.T) {
	e := newEnv(t)
	img := e.image(t, "cut", "v1", harness.ImageOptions{})
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": `services:
  web:
    image: ${IMAGE}
    deploy:
      endpoint_mode: dnsrr
      replicas: 1
      placement: {constraints: [node.hostname == skep-w1]}
`, ".env": "IMAGE=" + img + "\n"})
	ctrl := e.controller(t, e.app("web"))
	waitStatus(t, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Sync == reconcile.Synced && s.Health == health.Healthy
	})
	before := e.services(t)["web"]

	w1 := e.cl.Node(t, "skep-w1")
	e.cl.Cut(t, w1)
	e.cl.WaitNodeState(t, w1.Name, swarm.NodeStateDown, time.Minute)
	st := waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Health == health.Degraded && strings.Contains(s.HealthMessage, "no suitable node")
	})
	t.Logf("health: %s", st.HealthMessage)

	e.cl.Heal(t, w1)
	e.cl.WaitNodeState(t, w1.Name, swarm.NodeStateReady, time.Minute)
	waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Health == health.Healthy && s.Running == 1
	})
	if now := e.services(t)["web"]; !unwritten(before, now) {
		t.Errorf("web was written while its node was cut off")
	}
}

package multinode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
)

// managersCompose is two services of one image; extra is dropped by a
// later commit, so that a prune has something to do.
const managersCompose = `services:
  web:
    image: ${IMAGE}
    deploy: {endpoint_mode: dnsrr, replicas: 2}
  extra:
    image: ${IMAGE}
    deploy: {endpoint_mode: dnsrr, replicas: 1}
`

// webOnlyCompose is managersCompose without extra.
const webOnlyCompose = `services:
  web:
    image: ${IMAGE}
    deploy: {endpoint_mode: dnsrr, replicas: 2}
`

// TestTheControllerCarriesOnThroughAnotherManagerWhenItsOwnStops: the
// manager the controller talks to (its DOCKER_HOST, m1) is stopped. The
// controller goes on through m2 or m3: a commit made while m1 is down is
// deployed once, not lost and not written twice, with at most one
// unreachable and reachable pair of events.
func TestTheControllerCarriesOnThroughAnotherManagerWhenItsOwnStops(t *testing.T) {
	e := newEnv(t)
	v1 := e.image(t, "mgr", "v1", harness.ImageOptions{})
	v2 := e.image(t, "mgr", "v2", harness.ImageOptions{})
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": managersCompose, ".env": "IMAGE=" + v1 + "\n"})
	ctrl := e.controller(t, e.app("web"))
	waitStatus(t, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Sync == reconcile.Synced && s.Health == health.Healthy
	})
	m1 := e.cl.Node(t, "skep-m1")
	m1ID := e.nodeIDs(t)[m1.Name]
	if got := e.engine.Identity().NodeID; got != m1ID {
		t.Fatalf("the controller talks to node %s, want m1 (%s)", got, m1ID)
	}
	before := e.services(t)["web"]

	e.cl.Stop(t, m1)
	// The commit comes once the other managers know m1 is down: before
	// that, Swarm's scheduler may still hand m1 a task of the update, which
	// then waits on m1 for ever (health.Stranded, a newer commit preempts
	// it: syncpass.TestARolloutStrandedOnALostNodeIsFailing).
	e.cl.WaitNodeState(t, m1.Name, swarm.NodeStateDown, 2*time.Minute)
	second := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + v2 + "\n"})
	waitStatus(t, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool {
		return s.DeployedRevision == second && s.Sync == reconcile.Synced && s.Health == health.Healthy
	})
	if got := e.engine.Identity().NodeID; got == m1ID || got == "" {
		t.Errorf("the controller's identity names node %q after m1 stopped, want m2 or m3", got)
	}
	after := e.services(t)["web"]
	if after.ID != before.ID {
		t.Fatalf("web was recreated (id %s, was %s)", after.ID, before.ID)
	}
	// One write: the spec holds v2 and the previous spec is v1's. A second
	// write of the same spec would have made the previous spec v2 too.
	image := func(spec *swarm.ServiceSpec) string {
		if spec == nil || spec.TaskTemplate.ContainerSpec == nil {
			return ""
		}
		return spec.TaskTemplate.ContainerSpec.Image
	}
	if !strings.HasPrefix(image(&after.Spec), v2+"@") || !strings.HasPrefix(image(after.PreviousSpec), v1+"@") {
		t.Errorf("web runs %s after %s; want v2 written once over v1", image(&after.Spec), image(after.PreviousSpec))
	}
	succeeded := 0
	for _, ev := range e.events.of(notify.SyncSucceeded) {
		if ev.Revision == second {
			succeeded++
		}
	}
	if succeeded != 1 {
		t.Errorf("%d sync-succeeded events for %s, want 1:\n%s", succeeded, second, messages(e.events.all()))
	}
	down, up := e.events.of(notify.SwarmUnreachable), e.events.of(notify.SwarmReachable)
	if len(down) > 1 || len(up) != len(down) {
		t.Errorf("%d swarm-unreachable and %d swarm-reachable events, want at most one pair:\n%s", len(down), len(up), messages(append(down, up...)))
	}
}

// TestWithTwoManagersGoneWritesFailCleanlyAndNothingIsPruned: m2 and m3
// crash, and the swarm has no quorum. A commit that changes web and drops
// extra is neither applied nor pruned while it lasts; the controller says
// why. Once the managers are back, the commit is applied and extra pruned,
// web written once.
func TestWithTwoManagersGoneWritesFailCleanlyAndNothingIsPruned(t *testing.T) {
	e := newEnv(t)
	v1 := e.image(t, "quorum", "v1", harness.ImageOptions{})
	v2 := e.image(t, "quorum", "v2", harness.ImageOptions{})
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": managersCompose, ".env": "IMAGE=" + v1 + "\n"})
	ctrl := e.controller(t, e.appWith("web", "pruneResources: true, "))
	waitStatus(t, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Sync == reconcile.Synced && s.Health == health.Healthy
	})
	before := e.services(t)
	seen := len(e.events.all())

	m2, m3 := e.cl.Node(t, "skep-m2"), e.cl.Node(t, "skep-m3")
	e.cl.Kill(t, m2)
	e.cl.Kill(t, m3)
	second := e.repo.Commit(t, "main", map[string]string{
		"compose.yaml": webOnlyCompose, ".env": "IMAGE=" + v2 + "\n"})
	committed := time.Now()
	// The controller notices: the swarm does not answer, and the status
	// says so; it then waits, whatever the interval brings.
	st := waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Health == health.Unknown && strings.Contains(s.HealthMessage, "leader")
	})
	t.Logf("while the swarm has no quorum: %s", st.HealthMessage)
	// Two reconciles after the commit, each refused for the swarm's sake.
	first := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
		return s.LastReconcile.After(committed) && s.LastError != ""
	})
	st = waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
		return s.LastReconcile.After(first.LastReconcile) && s.LastError != ""
	})
	t.Logf("the reconcile's error: %s (%s)", st.LastError, st.LastErrorClass)
	during := e.events.since(seen)
	for _, ev := range during {
		switch ev.Type {
		case notify.ResourcesPruned, notify.PruneFailed, notify.SyncSucceeded, notify.DriftConverged:
			t.Errorf("event %s while the swarm had no quorum: %s", ev.Type, ev.Message)
		}
	}
	if st, _ := ctrl.Statuses().Get("web"); st.DeployedRevision == second {
		t.Errorf("status says %s deployed while the swarm had no quorum", second)
	}

	e.cl.Start(t, m2)
	e.cl.Start(t, m3)
	waitStatus(t, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool {
		return s.DeployedRevision == second && s.Sync == reconcile.Synced && s.Health == health.Healthy
	})
	harness.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		_, ok := e.services(t)["extra"]
		return !ok, "extra is still there after the commit that dropped it was applied"
	})
	after := e.services(t)["web"]
	if after.ID != before["web"].ID || !strings.HasPrefix(after.Spec.TaskTemplate.ContainerSpec.Image, v2+"@") ||
		after.PreviousSpec == nil || !strings.HasPrefix(after.PreviousSpec.TaskTemplate.ContainerSpec.Image, v1+"@") {
		t.Errorf("web after the quorum came back: id %s (was %s), image %s; want v2 written once over v1", after.ID, before["web"].ID, after.Spec.TaskTemplate.ContainerSpec.Image)
	}
}

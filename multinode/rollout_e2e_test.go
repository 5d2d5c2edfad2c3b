package multinode_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
)

// rolloutCompose rolls one task at a time, two seconds apart, the new task
// started before the old one stops, and rolls back on failure.
const rolloutCompose = `services:
  web:
    image: ${IMAGE}
    deploy:
      endpoint_mode: dnsrr
      replicas: 4
      update_config:
        parallelism: 1
        delay: 2s
        failure_action: rollback
        monitor: 10s
        order: start-first
      rollback_config: {parallelism: 0, order: start-first}
`

// TestARollingUpdateAcrossNodesIsWaitedForAndItsRollbackFailsTheSync: a
// healthy image rolls over the nodes one task at a time: the sync waits
// for Swarm's update to complete and succeeds once. An image whose health
// check fails is rolled back by Swarm (failure_action: rollback): the sync
// fails once, naming the rollback, and the spec that failed is not pushed
// again.
func TestARollingUpdateAcrossNodesIsWaitedForAndItsRollbackFailsTheSync(t *testing.T) {
	e := newEnv(t)
	v1 := e.image(t, "roll", "v1", harness.ImageOptions{})
	v2 := e.image(t, "roll", "v2", harness.ImageOptions{})
	bad := e.image(t, "roll", "bad", harness.ImageOptions{Unhealthy: true})
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": rolloutCompose, ".env": "IMAGE=" + v1 + "\n"})
	ctrl := e.controller(t, e.appWith("web", "wait: true, timeout: 4m, "))
	waitStatus(t, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Sync == reconcile.Synced && s.Health == health.Healthy
	})

	second := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + v2 + "\n"})
	waitStatus(t, ctrl, "web", 4*time.Minute, func(s reconcile.AppStatus) bool {
		return s.DeployedRevision == second && s.Sync == reconcile.Synced && s.Health == health.Healthy
	})
	web := e.services(t)["web"]
	if web.UpdateStatus == nil || web.UpdateStatus.State != swarm.UpdateStateCompleted || web.UpdateStatus.CompletedAt == nil {
		t.Fatalf("web's update status %+v, want completed", web.UpdateStatus)
	}
	var succeeded []notify.Event
	for _, ev := range e.events.of(notify.SyncSucceeded) {
		if ev.Revision == second {
			succeeded = append(succeeded, ev)
		}
	}
	// The sync waited for the rollout: it succeeded once, after Swarm
	// completed the update on every node.
	if len(succeeded) != 1 {
		t.Fatalf("%d sync-succeeded events for %s, want 1", len(succeeded), second)
	}
	if succeeded[0].At.Before(*web.UpdateStatus.CompletedAt) {
		t.Errorf("the sync succeeded at %s, before Swarm completed the update at %s", succeeded[0].At.Format(time.TimeOnly), web.UpdateStatus.CompletedAt.Format(time.TimeOnly))
	}
	perNode := e.perNode(t, web)
	if len(perNode) < 2 || sum(perNode) != 4 {
		t.Errorf("v2 runs %v, want 4 tasks over several nodes", perNode)
	}

	failing := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + bad + "\n"})
	st := waitStatus(t, ctrl, "web", 4*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Revision == failing && s.LastError != ""
	})
	if !strings.Contains(st.LastError, "rolled back") {
		t.Errorf("last error = %q, want the rollback named", st.LastError)
	}
	failed := slices.DeleteFunc(e.events.of(notify.SyncFailed), func(ev notify.Event) bool { return ev.Revision != failing })
	if len(failed) != 1 {
		t.Fatalf("%d sync-failed events for %s, want 1:\n%s", len(failed), failing, messages(e.events.all()))
	}
	rolled := e.services(t)["web"]
	if image := rolled.Spec.TaskTemplate.ContainerSpec.Image; !strings.HasPrefix(image, v2+"@") {
		t.Fatalf("after the rollback web runs %s, want v2", image)
	}
	// Two more reconciles: neither pushes the failing spec again.
	starts := len(e.events.of(notify.SyncStarted))
	last := st.LastReconcile
	for range 2 {
		last = waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.LastReconcile.After(last) }).LastReconcile
	}
	if n := len(e.events.of(notify.SyncStarted)); n != starts {
		t.Errorf("the rolled-back revision was deployed again: %d sync-started events, want %d", n, starts)
	}
	if now := e.services(t)["web"]; !unwritten(rolled, now) {
		t.Errorf("the rolled-back service was written to again")
	}
}

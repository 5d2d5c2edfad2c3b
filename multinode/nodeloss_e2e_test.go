package multinode_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
)

// lossCompose puts one web task on every node (five replicas, spread, at
// most two per node so that they can move) and a global agent.
const lossCompose = `services:
  web:
    image: ${IMAGE}
    deploy:
      endpoint_mode: dnsrr
      replicas: 5
      placement: {max_replicas_per_node: 2}
  agent:
    image: ${IMAGE}
    deploy: {mode: global, endpoint_mode: dnsrr}
`

// unwanted are the events a node lost by itself must not raise: the
// scheduler moved tasks, nobody changed what git declares.
var unwanted = []notify.EventType{notify.SyncStarted, notify.SyncSucceeded, notify.SyncFailed,
	notify.DriftDetected, notify.LiveDriftDetected, notify.DriftConverged,
	notify.ResourcesPruned, notify.PruneFailed, notify.SwarmUnreachable}

// TestAWorkerDrainedThenKilledIsRescheduledWithoutARedeploy: a worker
// drained, then another killed. Swarm moves their tasks; the controller
// follows health down and back, counts the global service on the nodes
// left, and writes nothing, raises no drift and prunes nothing.
func TestAWorkerDrainedThenKilledIsRescheduledWithoutARedeploy(t *testing.T) {
	e := newEnv(t)
	img := e.image(t, "loss", "v1", harness.ImageOptions{})
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": lossCompose, ".env": "IMAGE=" + img + "\n"})
	ctrl := e.controller(t, e.app("web"))
	nodes := len(e.cl.Nodes)
	waitStatus(t, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Sync == reconcile.Synced && s.Health == health.Healthy && s.Running == 5+nodes
	})
	before := e.services(t)
	if got := e.perNode(t, before["web"]); len(got) != nodes {
		t.Fatalf("web runs on %v, want one task on each of the %d nodes", got, nodes)
	}
	seen := len(e.events.all())
	healthLog := watchHealth(t, ctrl, "web")

	w1, w2 := e.cl.Node(t, "skep-w1"), e.cl.Node(t, "skep-w2")
	e.cl.Drain(t, w1)
	e.waitMoved(t, w1.Name, 5)
	drained := waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Health == health.Healthy && s.Running == 5+nodes-1 && s.Desired == 5+nodes-1
	})
	afterDrain := healthLog.settled(t, func(s sample) bool { return s.state == health.Healthy && s.running == 5+nodes-1 })

	killed := time.Now()
	e.cl.Kill(t, w2)
	e.cl.WaitNodeState(t, w2.Name, swarm.NodeStateDown, time.Minute)
	e.waitMoved(t, w2.Name, 5)
	waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Health == health.Healthy && s.Running == 5+nodes-2 && s.Desired == 5+nodes-2
	})
	healthLog.settled(t, func(s sample) bool { return s.state == health.Healthy && s.running == 5+nodes-2 })
	samples := healthLog.all()

	t.Logf("health after the drain: %s", drained.HealthMessage)
	for _, s := range samples {
		t.Logf("health: %s", s)
		// Healthy means every task asked for runs: never while one is
		// being replaced.
		if s.state == health.Healthy && s.running < s.desired {
			t.Errorf("health said healthy with %d/%d running at %s", s.running, s.desired, s.at.Format(time.TimeOnly))
		}
	}
	// The killed node's web task is replaced once the managers give the
	// node up: the replacement starts (its health check takes seconds), and
	// the application is not healthy meanwhile.
	if !slices.ContainsFunc(samples[afterDrain:], func(s sample) bool {
		return s.state == health.Progressing || s.state == health.Degraded
	}) {
		t.Errorf("health never left healthy while the killed node's task was replaced: %v", samples[afterDrain:])
	}
	// Back to healthy as it happened: once the replacement ran, not before
	// and not at the next resync (30 s) either: tasks on other nodes raise
	// no event on the manager the controller follows.
	ran := e.replacementRan(t, killed)
	if i := slices.IndexFunc(samples[afterDrain:], func(s sample) bool { return s.state == health.Healthy }); i < 0 {
		t.Errorf("health never came back to healthy after the kill: %v", samples[afterDrain:])
	} else if back := samples[afterDrain+i].at; back.Before(ran.Add(-time.Second)) || back.After(ran.Add(10*time.Second)) {
		t.Errorf("health came back to healthy at %s, the replacement task ran at %s: want within seconds after it",
			back.Format("15:04:05.000"), ran.Format("15:04:05.000"))
	}
	for _, ev := range e.events.since(seen) {
		if slices.Contains(unwanted, ev.Type) {
			t.Errorf("event %s raised for what the scheduler did: %s", ev.Type, ev.Message)
		}
	}
	after := e.services(t)
	for name, svc := range before {
		if !unwritten(svc, after[name]) {
			t.Errorf("service %s was written while its nodes went away (version %d, now %d)", name, svc.Version.Index, after[name].Version.Index)
		}
	}
	// The tasks the swarm gave up are there for the operator to see, with
	// the node they ran on.
	tasks, err := ctrl.LiveTasks(t.Context(), "web")
	if err != nil {
		t.Fatal(err)
	}
	ids := e.nodeIDs(t)
	for _, n := range []string{w1.Name, w2.Name} {
		if !slices.ContainsFunc(tasks, func(task reconcile.Task) bool {
			return task.NodeID == ids[n] && task.NodeName == n && task.DesiredState == swarm.TaskStateShutdown
		}) {
			t.Errorf("the application's tasks show none shut down on %s, by name", n)
		}
	}
}

// replacementRan returns when the last of web's tasks created after since
// started running.
func (e *env) replacementRan(t *testing.T, since time.Time) time.Time {
	t.Helper()
	web := e.services(t)["web"]
	tasks, err := e.engine.TaskList(t.Context(), swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", web.ID))})
	if err != nil {
		t.Fatal(err)
	}
	var ran time.Time
	for _, task := range tasks {
		if task.CreatedAt.After(since) && task.Status.State == swarm.TaskStateRunning && task.Status.Timestamp.After(ran) {
			ran = task.Status.Timestamp
		}
	}
	if ran.IsZero() {
		t.Fatalf("no task of web created after %s runs", since.Format(time.TimeOnly))
	}
	return ran
}

// waitMoved waits until web runs want tasks, none on node.
func (e *env) waitMoved(t *testing.T, node string, want int) {
	t.Helper()
	web := e.services(t)["web"]
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		got, err := e.cl.TasksPerNode(ctx, web.ID)
		if err != nil {
			return false, err.Error()
		}
		return got[node] == 0 && sum(got) == want, fmt.Sprintf("web tasks per node %v", got)
	})
}

// nodeIDs maps node hostnames to ids.
func (e *env) nodeIDs(t *testing.T) map[string]string {
	t.Helper()
	nodes, err := e.cl.Manager(t, time.Minute).NodeList(t.Context(), swarm.NodeListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range nodes {
		out[n.Description.Hostname] = n.ID
	}
	return out
}

// messages joins event messages for a failure report.
func messages(events []notify.Event) string {
	var out []string
	for _, e := range events {
		out = append(out, string(e.Type)+": "+e.Message)
	}
	return strings.Join(out, "\n")
}

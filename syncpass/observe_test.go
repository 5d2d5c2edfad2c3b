package syncpass

import (
	"strings"
	"testing"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// webRelease is the render of a one-service release, and owner its owner.
var (
	owner = stack.Owner{Controller: "c1", Application: "web", Release: "web"}
	one   = uint64(1)
)

func webRelease(image string) stack.Release {
	return stack.Release{Name: "web", Services: map[string]dswarm.ServiceSpec{"web_api": {
		Annotations: dswarm.Annotations{Name: "web_api", Labels: map[string]string{stack.LabelNamespace: "web",
			stack.LabelController: "c1", stack.LabelApplication: "web", stack.LabelRelease: "web"}},
		TaskTemplate: dswarm.TaskSpec{ContainerSpec: &dswarm.ContainerSpec{Image: image}},
		Mode:         dswarm.ServiceMode{Replicated: &dswarm.ReplicatedService{Replicas: &one}},
	}}}
}

// liveService is the swarm's service of rel's spec, running image, in an
// update state ("" for none).
func liveService(rel stack.Release, image string, state dswarm.UpdateState) dswarm.Service {
	spec := rel.Services["web_api"]
	cs := *spec.TaskTemplate.ContainerSpec
	cs.Image = image
	spec.TaskTemplate.ContainerSpec = &cs
	s := dswarm.Service{ID: "svc1", Spec: spec}
	if state != "" {
		s.UpdateStatus = &dswarm.UpdateStatus{State: state, Message: "update paused due to failure"}
	}
	return s
}

// runningTask is a running, healthy task of s, with s's container spec
// unless spec is given.
func runningTask(s dswarm.Service, at time.Time, spec *dswarm.ContainerSpec) dswarm.Task {
	if spec == nil {
		spec = s.Spec.TaskTemplate.ContainerSpec
	}
	return dswarm.Task{ID: "task1", ServiceID: s.ID, DesiredState: dswarm.TaskStateRunning,
		Spec:   dswarm.TaskSpec{ContainerSpec: spec},
		Status: dswarm.TaskStatus{State: dswarm.TaskStateRunning, Timestamp: at.Add(-time.Minute)}}
}

// TestObserveFromASnapshot: what one look at the swarm says of a release,
// from snapshot fixtures: live drift only of an unchanged release, from a
// snapshot that shows the application's writes; a rollback Swarm made;
// a rollout under way; health.
func TestObserveFromASnapshot(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	rel := webRelease("registry/web:v2")
	app := appset.Application{Name: "web", Release: "web", DriftDetection: appset.DriftLive}
	snapOf := func(s dswarm.Service, tasks ...dswarm.Task) swarm.Snapshot {
		node := dswarm.Node{Status: dswarm.NodeStatus{State: dswarm.NodeStateReady}, Spec: dswarm.NodeSpec{Availability: dswarm.NodeAvailabilityActive}}
		return swarm.NewSnapshot(swarm.Contents{Services: []dswarm.Service{s}, Tasks: tasks, Nodes: []dswarm.Node{node}, TakenAt: at})
	}
	same := liveService(rel, "registry/web:v2", "")
	moved := liveService(rel, "registry/web:hand-made", "")
	rolled := liveService(rel, "registry/web:v1", dswarm.UpdateStateRollbackCompleted)
	updating := liveService(rel, "registry/web:v2", dswarm.UpdateStateUpdating)
	for _, tc := range []struct {
		name       string
		app        appset.Application
		v          view
		changed    bool
		findings   string // describeFindings of what is found
		rolledBack bool
		rollout    bool
		health     health.State
	}{
		{name: "a live service as rendered is no drift, and healthy",
			app: app, v: view{snap: snapOf(same, runningTask(same, at, nil)), has: true, seen: true}, health: health.Healthy},
		{name: "an image changed behind the controller's back is drift",
			app: app, v: view{snap: snapOf(moved, runningTask(moved, at, nil)), has: true, seen: true},
			findings: "web_api: modified image", health: health.Healthy},
		{name: "a snapshot that has not seen the application's last write finds no drift",
			app: app, v: view{snap: snapOf(moved, runningTask(moved, at, nil)), has: true, seen: false}, health: health.Healthy},
		{name: "an application that detects no live drift finds none",
			app: appset.Application{Name: "web", Release: "web"}, v: view{snap: snapOf(moved, runningTask(moved, at, nil)), has: true, seen: true}, health: health.Healthy},
		{name: "a changed release is not compared with the swarm",
			app: app, v: view{snap: snapOf(rolled, runningTask(rolled, at, nil)), has: true, seen: true}, changed: true, health: health.Degraded},
		{name: "a service Swarm rolled back is named with the daemon's reason",
			app: app, v: view{snap: snapOf(rolled, runningTask(rolled, at, nil)), has: true, seen: true},
			findings: "web_api: rolled-back image", rolledBack: true, health: health.Degraded},
		{name: "a service updating holds the writes",
			app: app, v: view{snap: snapOf(updating, runningTask(updating, at, nil)), has: true, seen: true}, rollout: true},
		{name: "a declared service the swarm lacks is drift and missing",
			app: app, v: view{snap: swarm.NewSnapshot(swarm.Contents{TakenAt: at}), has: true, seen: true},
			findings: "web_api: missing", health: health.Missing},
		{name: "without a live snapshot nothing is looked at",
			app: app, v: view{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := observe(tc.app, tc.v, desired{release: rel}, owner, tc.changed)
			if o.has != tc.v.has {
				t.Errorf("has = %t, want %t", o.has, tc.v.has)
			}
			if got := describeFindings(o.findings); got != tc.findings {
				t.Errorf("findings = %q, want %q", got, tc.findings)
			}
			if (o.rolledBack != "") != tc.rolledBack || tc.rolledBack && !strings.Contains(o.rolledBack, "update paused due to failure") {
				t.Errorf("rolled back = %q, want %t with the daemon's reason", o.rolledBack, tc.rolledBack)
			}
			if (o.rollout != "") != tc.rollout {
				t.Errorf("rollout = %q, want %t", o.rollout, tc.rollout)
			}
			if tc.health != "" {
				if got := Health(rel, tc.v.snap).State; got != tc.health {
					t.Errorf("Health = %s, want %s", got, tc.health)
				}
			}
		})
	}
}

// TestConvergedUntilEveryTaskRunsTheServicesSpec: a service with a task
// of an earlier spec still to replace has not converged.
func TestConvergedUntilEveryTaskRunsTheServicesSpec(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	rel := webRelease("registry/web:v2")
	s := liveService(rel, "registry/web:v2", "")
	old := &dswarm.ContainerSpec{Image: "registry/web:v1"}
	for _, tc := range []struct {
		name string
		task dswarm.Task
		want bool
	}{
		{"a task of the service's spec has converged", runningTask(s, at, nil), true},
		{"a task of an earlier spec has not", runningTask(s, at, old), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := swarm.NewSnapshot(swarm.Contents{Services: []dswarm.Service{s}, Tasks: []dswarm.Task{tc.task}, TakenAt: at})
			if got := Converged(rel, snap) == ""; got != tc.want {
				t.Errorf("converged = %t (%q), want %t", got, Converged(rel, snap), tc.want)
			}
		})
	}
}

// TestCorrectableLeavesRollbacksAndStrangersAlone: a correction never
// pushes back what Swarm rolled back, nor touches what prune owns.
func TestCorrectableLeavesRollbacksAndStrangersAlone(t *testing.T) {
	in := []plan.Finding{{Service: "a", Kind: plan.Modified}, {Service: "b", Kind: plan.RolledBack}, {Service: "c", Kind: plan.Unexpected}, {Service: "d", Kind: plan.Missing}}
	got := correctable(in)
	if len(got) != 2 || got[0].Service != "a" || got[1].Service != "d" {
		t.Errorf("correctable = %+v, want a and d", got)
	}
}

// TestHealthNamesTheNodeATaskFailedOn: the snapshot's nodes reach health,
// so a failure says where.
func TestHealthNamesTheNodeATaskFailedOn(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	rel := webRelease("registry/web:v2")
	s := liveService(rel, "registry/web:v2", "")
	failed := dswarm.Task{ID: "t0", ServiceID: s.ID, NodeID: "n1", DesiredState: dswarm.TaskStateShutdown,
		Spec:   dswarm.TaskSpec{ContainerSpec: s.Spec.TaskTemplate.ContainerSpec},
		Status: dswarm.TaskStatus{State: dswarm.TaskStateFailed, Err: "task: non-zero exit (1)", Timestamp: at.Add(-10 * time.Second)}}
	node := dswarm.Node{ID: "n1", Description: dswarm.NodeDescription{Hostname: "skep-w1"},
		Status: dswarm.NodeStatus{State: dswarm.NodeStateReady}, Spec: dswarm.NodeSpec{Availability: dswarm.NodeAvailabilityActive}}
	again := failed
	again.ID, again.Status.Timestamp = "t1", at.Add(-5*time.Second)
	snap := swarm.NewSnapshot(swarm.Contents{Services: []dswarm.Service{s}, Tasks: []dswarm.Task{failed, again}, Nodes: []dswarm.Node{node}, TakenAt: at})
	h := Health(rel, snap)
	if h.State == health.Healthy || !strings.Contains(h.Message, "skep-w1") {
		t.Errorf("Health = %s %q, want a failure naming skep-w1", h.State, h.Message)
	}
}

// A rollout whose update waits on a task a lost node took is failing: a
// newer commit preempts it rather than wait for the node to come back.
func TestARolloutStrandedOnALostNodeIsFailing(t *testing.T) {
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	started := at.Add(-time.Minute)
	rel := webRelease("registry/web:v2")
	live := liveService(rel, "registry/web:v2", dswarm.UpdateStateUpdating)
	live.UpdateStatus.StartedAt = &started
	down := readyNode("skep-m1")
	down.Status = dswarm.NodeStatus{State: dswarm.NodeStateDown, Message: "heartbeat failure"}
	stranded := dswarm.Task{ID: "0123456789abcdef", ServiceID: live.ID, NodeID: down.ID, DesiredState: dswarm.TaskStateShutdown,
		Meta: dswarm.Meta{CreatedAt: started.Add(time.Second)}, Spec: dswarm.TaskSpec{ContainerSpec: live.Spec.TaskTemplate.ContainerSpec},
		Status: dswarm.TaskStatus{State: dswarm.TaskStateAccepted}}
	snapOf := func(nodes ...dswarm.Node) swarm.Snapshot {
		return swarm.NewSnapshot(swarm.Contents{Services: []dswarm.Service{live}, Tasks: []dswarm.Task{stranded}, Nodes: nodes, TakenAt: at})
	}
	if got := failingRollout(rel, snapOf(down, readyNode("skep-m2"))); !strings.Contains(got, "web_api: Swarm's update waits on task 0123456789ab, which node skep-m1 took") {
		t.Errorf("failingRollout with the update's task on a lost node = %q, want it named", got)
	}
	wf := waitFor{app: appset.Application{Name: "web", Release: "web"}, rel: rel, written: started}
	if err := wf.failing(t.Context(), Env{}, snapOf(down, readyNode("skep-m2"))); err == nil || !strings.Contains(err.Error(), "release web: service web_api: Swarm's update waits on task 0123456789ab") {
		t.Errorf("a wait for health with the update's task on a lost node: %v, want it to end naming the task", err)
	}
	for _, state := range []dswarm.NodeState{dswarm.NodeStateReady, dswarm.NodeStateUnknown} {
		// Unknown: what a new leader calls every node until it hears from it.
		back := down
		back.Status = dswarm.NodeStatus{State: state}
		if got := failingRollout(rel, snapOf(back, readyNode("skep-m2"))); got != "" {
			t.Errorf("failingRollout with the node %s = %q, want none: the task may still start", state, got)
		}
		if err := wf.failing(t.Context(), Env{}, snapOf(back, readyNode("skep-m2"))); err != nil {
			t.Errorf("a wait with the node %s: %v, want it to go on", state, err)
		}
	}
}

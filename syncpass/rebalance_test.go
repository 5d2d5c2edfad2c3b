package syncpass

import (
	"strings"
	"testing"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/placement"
	"github.com/skep-cd/skep/swarm"
)

// TestToRebalanceRollsOnlyASettledReleaseWhoseTasksAreSkewed: a node back
// with none of web's three tasks while another holds two is skewed; the
// same spread while a rollout runs, a task still starts, or a task of an
// earlier spec runs is judged later; an even spread is not skewed.
func TestToRebalanceRollsOnlyASettledReleaseWhoseTasksAreSkewed(t *testing.T) {
	three := uint64(3)
	rel := webRelease("app:v1")
	spec := rel.Services["web_api"]
	spec.Mode.Replicated.Replicas = &three
	rel.Services["web_api"] = spec
	live := liveService(rel, "app:v1", "")
	nodes := []dswarm.Node{readyNode("skep-m1"), readyNode("skep-w1"), readyNode("skep-w2")}
	task := func(id, node string, state dswarm.TaskState) dswarm.Task {
		tk := runningTask(live, time.Now(), nil)
		tk.ID, tk.NodeID, tk.Status.State = id, "id-"+node, state
		return tk
	}
	skewed := []dswarm.Task{task("t1", "skep-m1", dswarm.TaskStateRunning), task("t2", "skep-m1", dswarm.TaskStateRunning), task("t3", "skep-w2", dswarm.TaskStateRunning)}
	for _, tc := range []struct {
		name       string
		svc        func(dswarm.Service) dswarm.Service
		tasks      []dswarm.Task
		wantJudged bool
		wantShort  []string
	}{
		{name: "a node back holds none of three tasks while another holds two", tasks: skewed, wantJudged: true, wantShort: []string{"skep-w1"}},
		{name: "one task on each node is even", wantJudged: true,
			tasks: []dswarm.Task{task("t1", "skep-m1", dswarm.TaskStateRunning), task("t2", "skep-w1", dswarm.TaskStateRunning), task("t3", "skep-w2", dswarm.TaskStateRunning)}},
		{name: "a rollout of the release runs", tasks: skewed,
			svc: func(s dswarm.Service) dswarm.Service {
				s.UpdateStatus = &dswarm.UpdateStatus{State: dswarm.UpdateStateUpdating}
				return s
			}},
		{name: "a task still starts", tasks: append(skewed[:2:2], task("t3", "skep-w2", dswarm.TaskStateStarting))},
		{name: "a task of an earlier spec runs", tasks: skewed,
			svc: func(s dswarm.Service) dswarm.Service { s.Spec.TaskTemplate.ForceUpdate = 1; return s }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := live
			if tc.svc != nil {
				svc = tc.svc(svc)
			}
			snap := swarm.NewSnapshot(swarm.Contents{Services: []dswarm.Service{svc}, Tasks: tc.tasks, Nodes: nodes, TakenAt: time.Now()})
			skews, judged := toRebalance(rel, snap)
			if judged != tc.wantJudged {
				t.Fatalf("judged = %t, want %t (skews %+v)", judged, tc.wantJudged, skews)
			}
			var short []string
			for _, sk := range skews {
				short = append(short, sk.Short...)
			}
			if strings.Join(short, ",") != strings.Join(tc.wantShort, ",") {
				t.Errorf("short nodes = %v, want %v", short, tc.wantShort)
			}
		})
	}
}

// TestRebalancesByTheApplicationElseTheController: an application's
// rebalance key wins over the controller's default, and a destination
// without the one-at-a-time channel or a live snapshot rebalances nothing.
func TestRebalancesByTheApplicationElseTheController(t *testing.T) {
	on, off := true, false
	withLive := Env{Live: &swarm.Watcher{}, Rebalancing: make(chan struct{}, 1)}
	for _, tc := range []struct {
		name       string
		env        Env
		controller bool
		app        *bool
		want       bool
	}{
		{"the controller's default, off", withLive, false, nil, false},
		{"the controller's default, on", withLive, true, nil, true},
		{"an application that says on", withLive, false, &on, true},
		{"an application that says off, under a controller that rebalances", withLive, true, &off, false},
		{"no channel: nothing", Env{Live: &swarm.Watcher{}}, true, &on, false},
		{"no live snapshot: nothing", Env{Rebalancing: make(chan struct{}, 1)}, true, &on, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			env.Rebalance = tc.controller
			if got := Rebalances(env, appset.Application{Name: "web", Rebalance: tc.app}); got != tc.want {
				t.Errorf("rebalances = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestRebalancedMessageNamesTheNodesAndTheServices: the event says which
// node came back short and each service rolled, with its tasks per node.
func TestRebalancedMessageNamesTheNodesAndTheServices(t *testing.T) {
	got := rebalancedMessage([]placement.Skew{
		{Service: "web_api", Short: []string{"skep-w1"}, Counts: map[string]int{"skep-m1": 2, "skep-w1": 0, "skep-w2": 1}},
		{Service: "web_worker", Short: []string{"skep-w1"}, Counts: map[string]int{"skep-m1": 3, "skep-w1": 1}},
	})
	want := "skep-w1 back with fewer tasks than the other nodes: rolled web_api (tasks per node were skep-m1 2, skep-w1 0, skep-w2 1); " +
		"web_worker (tasks per node were skep-m1 3, skep-w1 1) to spread them again"
	if got != want {
		t.Errorf("message =\n%s\nwant\n%s", got, want)
	}
}

// TestARebalanceDueMakesThePassRunInFull: a node coming back makes a
// rebalance due for an application that rebalances (its passes are not
// quiet until one judged it at these nodes), and for no other.
func TestARebalanceDueMakesThePassRunInFull(t *testing.T) {
	drained := readyNode("skep-w1")
	drained.Spec.Availability = dswarm.NodeAvailabilityDrain
	at := func(nodes ...dswarm.Node) swarm.Snapshot {
		return swarm.NewSnapshot(swarm.Contents{Nodes: nodes, TakenAt: time.Now()})
	}
	before, back := at(readyNode("skep-m1"), drained), at(readyNode("skep-m1"), readyNode("skep-w1"))
	judged := Memo{rebalanced: NodesKey(before)}
	on := true
	env := Env{Live: &swarm.Watcher{}, Rebalancing: make(chan struct{}, 1)}
	for _, tc := range []struct {
		name string
		app  appset.Application
		snap swarm.Snapshot
		want bool
	}{
		{"judged at these nodes", appset.Application{Name: "web", Rebalance: &on}, before, false},
		{"a node back since", appset.Application{Name: "web", Rebalance: &on}, back, true},
		{"a node back, for an application that does not rebalance", appset.Application{Name: "web"}, back, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rebalanceDue(env, Input{App: tc.app, Live: tc.snap, Memo: judged}); got != tc.want {
				t.Errorf("rebalanceDue = %t, want %t", got, tc.want)
			}
		})
	}
}

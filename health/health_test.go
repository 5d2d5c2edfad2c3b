package health

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"
	"github.com/google/go-cmp/cmp"
)

// fixture is one testdata/*.json file: a service as `docker service
// inspect` and `docker service ps` report it, and the health it must have.
type fixture struct {
	Description string `json:"description"`
	Input       struct {
		Service       *swarm.Service     `json:"service"`
		Declared      *swarm.ServiceSpec `json:"declared"`
		Tasks         []swarm.Task       `json:"tasks"`
		EligibleNodes int                `json:"eligibleNodes"`
		Now           time.Time          `json:"now"`
		ReadFailed    bool               `json:"readFailed"`
	} `json:"input"`
	Want Result `json:"want"`
}

func TestServiceHealthOfEachFixture(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("found %d fixtures in testdata, want one per state and mode", len(files))
	}
	seen := map[State]bool{}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var fx fixture
			if err := json.Unmarshal(data, &fx); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if !fx.Want.State.Valid() {
				t.Fatalf("%s: want.state %q is not a state", file, fx.Want.State)
			}
			seen[fx.Want.State] = true
			got := Service(ServiceInput{
				Declared:      fx.Input.Declared,
				Live:          fx.Input.Service,
				Tasks:         fx.Input.Tasks,
				EligibleNodes: fx.Input.EligibleNodes,
				Now:           fx.Input.Now,
				ReadFailed:    fx.Input.ReadFailed,
			})
			if diff := cmp.Diff(fx.Want, got); diff != "" {
				t.Errorf("%s (%s): Service() mismatch (-want +got):\n%s", file, fx.Description, diff)
			}
		})
	}
	for _, s := range []State{Healthy, Progressing, Degraded, Missing, Unknown} {
		if !seen[s] {
			t.Errorf("no fixture wants %s", s)
		}
	}
}

func replicated(n uint64) swarm.ServiceMode {
	return swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &n}}
}

func running(service string, n int) []swarm.Task {
	var out []swarm.Task
	for range n {
		out = append(out, swarm.Task{ServiceID: service, DesiredState: swarm.TaskStateRunning, Status: swarm.TaskStatus{State: swarm.TaskStateRunning}})
	}
	return out
}

func TestServiceUnknownWhenSwarmUnreadable(t *testing.T) {
	live := &swarm.Service{ID: "s", Spec: swarm.ServiceSpec{Mode: replicated(1)}}
	for _, tc := range []struct {
		name string
		in   ServiceInput
		want State
	}{
		{"a failed read of an absent service is unknown, not missing", ServiceInput{ReadFailed: true}, Unknown},
		{"a failed read wins over stale live data", ServiceInput{ReadFailed: true, Live: live, Tasks: running("s", 1)}, Unknown},
		{"a successful read without the service is missing", ServiceInput{}, Missing},
		{"a successful read with the service running is healthy", ServiceInput{Live: live, Tasks: running("s", 1)}, Healthy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Service(tc.in); got.State != tc.want {
				t.Errorf("Service() = %s (%s), want %s", got.State, got.Message, tc.want)
			}
		})
	}
}

func TestServiceIgnoresTasksOfOtherServices(t *testing.T) {
	live := &swarm.Service{ID: "mine", Spec: swarm.ServiceSpec{Mode: replicated(2)}}
	got := Service(ServiceInput{Live: live, Tasks: append(running("mine", 1), running("other", 3)...)})
	want := Result{State: Progressing, Message: "1/2 running", Running: 1, Desired: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Service() mismatch (-want +got):\n%s", diff)
	}
}

func TestServiceRollbackIsDegradedWhateverTheTasks(t *testing.T) {
	for _, state := range []swarm.UpdateState{swarm.UpdateStateRollbackStarted, swarm.UpdateStateRollbackPaused, swarm.UpdateStateRollbackCompleted, swarm.UpdateStatePaused} {
		t.Run(string(state), func(t *testing.T) {
			live := &swarm.Service{ID: "s", Spec: swarm.ServiceSpec{Mode: replicated(1)},
				UpdateStatus: &swarm.UpdateStatus{State: state, Message: "the daemon's reason"}}
			got := Service(ServiceInput{Live: live, Tasks: running("s", 1)})
			if got.State != Degraded || !strings.Contains(got.Message, "the daemon's reason") {
				t.Errorf("Service() = %s %q, want degraded with the daemon's reason", got.State, got.Message)
			}
		})
	}
}

func TestRollUpRanksKnownProblemsAboveUnknown(t *testing.T) {
	order := []State{Healthy, Progressing, Unknown, Missing, Degraded}
	for i := range order {
		for j := range order {
			if got, want := order[i].Worse(order[j]), i > j; got != want {
				t.Errorf("%s.Worse(%s) = %v, want %v", order[i], order[j], got, want)
			}
		}
	}
}

func TestReleaseRollUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		results map[string]Result
		want    Result
	}{
		{
			name: "no services is healthy",
			want: Result{State: Healthy, Message: "no services"},
		},
		{
			name: "all healthy sums counts",
			results: map[string]Result{
				"web": {State: Healthy, Running: 2, Desired: 2},
				"db":  {State: Healthy, Running: 1, Desired: 1},
			},
			want: Result{State: Healthy, Message: "3/3 running", Running: 3, Desired: 3},
		},
		{
			name: "degraded is not hidden by unknown",
			results: map[string]Result{
				"a-cache": {State: Unknown, Message: "the swarm could not be read"},
				"web":     {State: Degraded, Message: "rolled back: bad", Running: 1, Desired: 2},
				"db":      {State: Healthy, Running: 1, Desired: 1},
			},
			want: Result{State: Degraded, Message: "web: rolled back: bad (and 1 more service not healthy)", Running: 2, Desired: 3},
		},
		{
			name: "unknown outranks progressing",
			results: map[string]Result{
				"web": {State: Progressing, Message: "updating"},
				"db":  {State: Unknown, Message: "the swarm could not be read"},
			},
			want: Result{State: Unknown, Message: "db: the swarm could not be read (and 1 more service not healthy)"},
		},
		{
			name: "equally bad services name the first by name",
			results: map[string]Result{
				"zeta":  {State: Missing, Message: "declared but not in the swarm", Desired: 1},
				"alpha": {State: Missing, Message: "declared but not in the swarm", Desired: 1},
			},
			want: Result{State: Missing, Message: "alpha: declared but not in the swarm (and 1 more service not healthy)", Desired: 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Release(tc.results)); diff != "" {
				t.Errorf("Release() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplicationRollUpNamesWorstRelease(t *testing.T) {
	releases := map[string]Result{
		"shop":    Release(map[string]Result{"shop_web": {State: Degraded, Message: "update paused: x", Running: 0, Desired: 1}}),
		"billing": Release(map[string]Result{"billing_api": {State: Healthy, Running: 2, Desired: 2}}),
	}
	want := Result{State: Degraded, Message: "shop: shop_web: update paused: x", Running: 2, Desired: 3}
	if diff := cmp.Diff(want, Application(releases)); diff != "" {
		t.Errorf("Application() mismatch (-want +got):\n%s", diff)
	}
	if got := Application(nil); got.State != Healthy {
		t.Errorf("Application(nil) = %s, want healthy", got.State)
	}
}

func TestServiceNamesTheNodesOfLostAndFailedTasks(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	node := func(id, name string, state swarm.NodeState, message string, avail swarm.NodeAvailability) swarm.Node {
		return swarm.Node{ID: id, Description: swarm.NodeDescription{Hostname: name},
			Status: swarm.NodeStatus{State: state, Message: message}, Spec: swarm.NodeSpec{Availability: avail}}
	}
	nodes := []swarm.Node{
		node("n1", "skep-m1", swarm.NodeStateReady, "", swarm.NodeAvailabilityActive),
		node("n2", "skep-w1", swarm.NodeStateReady, "", swarm.NodeAvailabilityDrain),
		node("n3", "skep-w2", swarm.NodeStateDown, "heartbeat failure", swarm.NodeAvailabilityActive),
	}
	task := func(node string, desired, state swarm.TaskState, ago time.Duration, err string) swarm.Task {
		return swarm.Task{ServiceID: "s", NodeID: node, DesiredState: desired,
			Status: swarm.TaskStatus{State: state, Timestamp: now.Add(-ago), Err: err}}
	}
	up := func(n int) []swarm.Task {
		var out []swarm.Task
		for range n {
			out = append(out, task("n1", swarm.TaskStateRunning, swarm.TaskStateRunning, time.Minute, ""))
		}
		return out
	}
	live := &swarm.Service{ID: "s", Spec: swarm.ServiceSpec{Mode: replicated(3)}}
	for _, tc := range []struct {
		name  string
		tasks []swarm.Task
		nodes []swarm.Node
		want  Result
	}{
		{name: "a task lost with a node that went down names it and the managers' reason",
			tasks: append(up(2), task("n3", swarm.TaskStateShutdown, swarm.TaskStateRunning, 10*time.Minute, ""),
				task("n1", swarm.TaskStateRunning, swarm.TaskStateStarting, time.Second, "")),
			nodes: nodes,
			want:  Result{State: Progressing, Running: 2, Desired: 3, Message: "2/3 running, 1 starting; tasks lost with node skep-w2 down (heartbeat failure)"}},
		{name: "a task still shown running on a node that went down is not running: the orchestrator is yet to replace it",
			tasks: append(up(2), task("n3", swarm.TaskStateRunning, swarm.TaskStateRunning, 10*time.Minute, "")),
			nodes: nodes,
			want:  Result{State: Progressing, Running: 2, Desired: 3, Message: "2/3 running; tasks lost with node skep-w2 down (heartbeat failure)"}},
		{name: "a task on a node a new leader has not heard from yet still runs",
			tasks: append(up(2), task("n4", swarm.TaskStateRunning, swarm.TaskStateRunning, 10*time.Minute, "")),
			nodes: append(slices.Clone(nodes), node("n4", "skep-w3", swarm.NodeStateUnknown, "", swarm.NodeAvailabilityActive)),
			want:  Result{State: Healthy, Running: 3, Desired: 3, Message: "3/3 running"}},
		{name: "a task moved off a drained node names it",
			tasks: append(up(2), task("n2", swarm.TaskStateShutdown, swarm.TaskStateShutdown, 10*time.Second, ""),
				task("n1", swarm.TaskStateRunning, swarm.TaskStatePending, time.Second, "no suitable node (max replicas per node limit exceed)")),
			nodes: nodes,
			want: Result{State: Degraded, Running: 2, Desired: 3,
				Message: "2/3 running; cannot be scheduled: no suitable node (max replicas per node limit exceed); tasks lost with node skep-w1 drained"}},
		{name: "task failures say the node they ran on",
			tasks: append(up(1), task("n1", swarm.TaskStateShutdown, swarm.TaskStateRejected, time.Minute, "No such image: app:v9"),
				task("n1", swarm.TaskStateShutdown, swarm.TaskStateRejected, 30*time.Second, "No such image: app:v9")),
			nodes: nodes,
			want: Result{State: Degraded, Running: 1, Desired: 3,
				Message: "restarting: 1/3 running, 2 task failures in the last 5m0s: on skep-m1: No such image: app:v9"}},
		{name: "without nodes no node is named",
			tasks: append(up(2), task("n3", swarm.TaskStateShutdown, swarm.TaskStateRunning, 10*time.Minute, "")),
			want:  Result{State: Progressing, Running: 2, Desired: 3, Message: "2/3 running"}},
		{name: "a healthy service names no node, whatever its old tasks",
			tasks: append(up(3), task("n2", swarm.TaskStateShutdown, swarm.TaskStateShutdown, 10*time.Second, "")),
			nodes: nodes,
			want:  Result{State: Healthy, Running: 3, Desired: 3, Message: "3/3 running"}},
		{name: "a task that left a drained node long ago is not why",
			tasks: append(up(2), task("n2", swarm.TaskStateShutdown, swarm.TaskStateShutdown, time.Hour, "")),
			nodes: nodes,
			want:  Result{State: Progressing, Running: 2, Desired: 3, Message: "2/3 running"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Service(ServiceInput{Live: live, Tasks: tc.tasks, Nodes: tc.nodes, Now: now})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Service() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// An update whose new task a node took just before it went down waits for
// that task for ever: the health says which task and node, not only that
// it updates. A task of the update still starting on a ready node, or one
// of an earlier spec on the down node, is no such wait.
func TestServiceNamesTheTaskAnUpdateIsStrandedOn(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	started := now.Add(-2 * time.Minute)
	nodes := []swarm.Node{
		{ID: "n1", Description: swarm.NodeDescription{Hostname: "skep-m1"}, Status: swarm.NodeStatus{State: swarm.NodeStateDown, Message: "heartbeat failure"}},
		{ID: "n2", Description: swarm.NodeDescription{Hostname: "skep-m2"}, Status: swarm.NodeStatus{State: swarm.NodeStateReady}},
	}
	v1, v2 := &swarm.ContainerSpec{Image: "app:v1"}, &swarm.ContainerSpec{Image: "app:v2"}
	live := &swarm.Service{ID: "s", Spec: swarm.ServiceSpec{Mode: replicated(2), TaskTemplate: swarm.TaskSpec{ContainerSpec: v2}},
		UpdateStatus: &swarm.UpdateStatus{State: swarm.UpdateStateUpdating, StartedAt: &started}}
	task := func(id, node string, spec *swarm.ContainerSpec, desired, state swarm.TaskState, created time.Time) swarm.Task {
		return swarm.Task{ID: id, ServiceID: "s", NodeID: node, DesiredState: desired, Meta: swarm.Meta{CreatedAt: created},
			Spec: swarm.TaskSpec{ContainerSpec: spec}, Status: swarm.TaskStatus{State: state, Timestamp: created}}
	}
	running := []swarm.Task{
		task("old2", "n2", v1, swarm.TaskStateRunning, swarm.TaskStateRunning, started.Add(-time.Hour)),
		task("new1", "n2", v2, swarm.TaskStateRunning, swarm.TaskStateRunning, started.Add(time.Minute)),
	}
	for _, tc := range []struct {
		name string
		task swarm.Task
		want string
	}{
		{name: "the update's task, accepted by a node now down",
			task: task("0123456789abcdef", "n1", v2, swarm.TaskStateShutdown, swarm.TaskStateAccepted, started.Add(time.Second)),
			want: "updating: 2/2 running; Swarm's update waits on task 0123456789ab, which node skep-m1 took before it went down (heartbeat failure): the update goes on once the node is back, or with the next write; tasks lost with node skep-m1 down (heartbeat failure)"},
		{name: "the update's task starting on a ready node",
			task: task("0123456789abcdef", "n2", v2, swarm.TaskStateRunning, swarm.TaskStatePreparing, started.Add(time.Second)),
			want: "updating: 2/2 running"},
		{name: "a task of the earlier spec on the down node",
			task: task("0123456789abcdef", "n1", v1, swarm.TaskStateShutdown, swarm.TaskStateAccepted, started.Add(-time.Second)),
			want: "updating: 2/2 running; tasks lost with node skep-m1 down (heartbeat failure)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Service(ServiceInput{Live: live, Tasks: append(slices.Clone(running), tc.task), Nodes: nodes, Now: now})
			if got.State != Progressing || got.Message != tc.want {
				t.Errorf("Service() = %s %q, want progressing %q", got.State, got.Message, tc.want)
			}
		})
	}
}

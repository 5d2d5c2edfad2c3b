package placement

import (
	"strings"
	"testing"

	"github.com/docker/docker/api/types/swarm"
	"github.com/google/go-cmp/cmp"
)

const (
	cpu = int64(1e9)
	gib = int64(1 << 30)
)

// node is a ready, active linux/x86_64 node of 2 CPUs and 4 GiB.
func node(name string, role swarm.NodeRole, labels map[string]string) swarm.Node {
	return swarm.Node{
		ID:     "id-" + name,
		Spec:   swarm.NodeSpec{Annotations: swarm.Annotations{Labels: labels}, Role: role, Availability: swarm.NodeAvailabilityActive},
		Status: swarm.NodeStatus{State: swarm.NodeStateReady, Addr: map[string]string{"m1": "10.232.0.11", "m2": "10.232.0.12", "m3": "10.232.0.13", "w1": "10.232.0.21", "w2": "10.232.0.22"}[name]},
		Description: swarm.NodeDescription{
			Hostname:  "skep-" + name,
			Platform:  swarm.Platform{OS: "linux", Architecture: "x86_64"},
			Resources: swarm.Resources{NanoCPUs: 2 * cpu, MemoryBytes: 4 * gib},
			Engine:    swarm.EngineDescription{Labels: map[string]string{"skep.node": name}},
		},
	}
}

// cluster is the test cluster's shape: three managers and two workers in
// zones a and b; w2 is small (1 CPU, 1 GiB).
func cluster() []swarm.Node {
	small := node("w2", swarm.NodeRoleWorker, map[string]string{"zone": "b", "size": "small"})
	small.Description.Resources = swarm.Resources{NanoCPUs: cpu, MemoryBytes: gib}
	return []swarm.Node{
		node("m1", swarm.NodeRoleManager, map[string]string{"zone": "a"}),
		node("m2", swarm.NodeRoleManager, map[string]string{"zone": "b"}),
		node("m3", swarm.NodeRoleManager, map[string]string{"zone": "a"}),
		node("w1", swarm.NodeRoleWorker, map[string]string{"zone": "a"}),
		small,
	}
}

// with changes the nodes named by hostname.
func with(nodes []swarm.Node, change func(*swarm.Node), names ...string) []swarm.Node {
	for i := range nodes {
		for _, name := range names {
			if nodes[i].Description.Hostname == name {
				change(&nodes[i])
			}
		}
	}
	return nodes
}

// service is a replicated service of image app:v1.
func service(replicas uint64, change func(*swarm.ServiceSpec)) swarm.ServiceSpec {
	s := swarm.ServiceSpec{
		Annotations:  swarm.Annotations{Name: "ns_web"},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &replicas}},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: "app:v1"}, Placement: &swarm.Placement{}},
	}
	if change != nil {
		change(&s)
	}
	return s
}

func constraints(c ...string) func(*swarm.ServiceSpec) {
	return func(s *swarm.ServiceSpec) { s.TaskTemplate.Placement.Constraints = c }
}

func reserve(cpus, mem int64) func(*swarm.ServiceSpec) {
	return func(s *swarm.ServiceSpec) {
		s.TaskTemplate.Resources = &swarm.ResourceRequirements{Reservations: &swarm.Resources{NanoCPUs: cpus, MemoryBytes: mem}}
	}
}

func global(change func(*swarm.ServiceSpec)) swarm.ServiceSpec {
	s := service(0, change)
	s.Mode = swarm.ServiceMode{Global: &swarm.GlobalService{}}
	return s
}

// task is a task meant to run on node, reserving cpus.
func task(serviceID, node string, cpus int64) swarm.Task {
	return swarm.Task{ServiceID: serviceID, NodeID: "id-" + node, DesiredState: swarm.TaskStateRunning,
		Status: swarm.TaskStatus{State: swarm.TaskStateRunning},
		Spec:   swarm.TaskSpec{Resources: &swarm.ResourceRequirements{Reservations: &swarm.Resources{NanoCPUs: cpus}}}}
}

func TestCheckNamesWhatNoNodeSatisfies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		service  swarm.ServiceSpec
		nodes    []swarm.Node
		tasks    []swarm.Task
		live     []swarm.Service
		images   map[string][]Platform
		wantRule Rule // "" when the service can be placed
		wantText []string
	}{
		{name: "a plain service fits any ready node", service: service(3, nil)},
		{name: "zero replicas need no node", service: service(0, constraints("node.labels.zone == c")), nodes: nil},
		{name: "no-node: every node drained or down", service: service(1, nil),
			nodes: with(with(cluster(), func(n *swarm.Node) { n.Spec.Availability = swarm.NodeAvailabilityDrain }, "skep-m1", "skep-m2", "skep-m3", "skep-w1"),
				func(n *swarm.Node) { n.Status.State = swarm.NodeStateDown }, "skep-w2"),
			wantRule: RuleNoNode, wantText: []string{"no node is ready and active", "skep-m1 ready, drain", "skep-w2 down, active"}},
		{name: "no-node: a paused node takes no new task", service: service(1, nil),
			nodes:    with(cluster()[:1], func(n *swarm.Node) { n.Spec.Availability = swarm.NodeAvailabilityPause }, "skep-m1"),
			wantRule: RuleNoNode},
		{name: "constraint: a label value no node has", service: service(1, constraints("node.labels.zone == c")),
			wantRule: RuleConstraint, wantText: []string{`"node.labels.zone == c" matches none of the 5`, "node.labels.zone a on skep-m1, skep-m3, skep-w1", "node.labels.zone b on skep-m2, skep-w2"}},
		{name: "constraint: a label no node carries", service: service(1, constraints("node.labels.gpu == yes")),
			wantRule: RuleConstraint, wantText: []string{"node.labels.gpu (unset) on skep-m1"}},
		{name: "constraint: label values compare without case, names with", service: service(1, constraints("node.labels.zone == B")),
			wantRule: ""},
		{name: "constraint: a label name in another case is another label", service: service(1, constraints("node.labels.Zone == b")),
			wantRule: RuleConstraint},
		{name: "constraint: each matches, together none", service: service(1, constraints("node.role == worker", "node.labels.zone == b", "node.labels.size != small")),
			wantRule: RuleConstraint, wantText: []string{"together match no node"}},
		{name: "constraint: role and hostname", service: service(1, constraints("node.role == manager", "node.hostname != skep-m1")), wantRule: ""},
		{name: "constraint: engine labels", service: service(1, constraints("engine.labels.skep.node == w9")),
			wantRule: RuleConstraint, wantText: []string{"engine.labels.skep.node w1 on skep-w1"}},
		{name: "constraint: node.ip by prefix", service: service(1, constraints("node.ip == 10.232.0.16/28")), wantRule: ""},
		{name: "constraint: node.ip outside every node", service: service(1, constraints("node.ip == 192.0.2.0/24")), wantRule: RuleConstraint},
		{name: "constraint: a key the scheduler does not read", service: service(1, constraints("node.zone == a")),
			wantRule: RuleConstraint, wantText: []string{`the scheduler reads no key "node.zone"`}},
		{name: "constraint: not an expression", service: service(1, constraints("zone=a")),
			wantRule: RuleConstraint, wantText: []string{"want key == value"}},
		{name: "platform: an arm64 image on amd64 nodes", service: service(1, nil),
			images:   map[string][]Platform{"app:v1": {{OS: "linux", Architecture: "arm64"}}},
			wantRule: RulePlatform, wantText: []string{"built for linux/arm64", "linux/amd64 (skep-m1, skep-m2, skep-m3, skep-w1, skep-w2)"}},
		{name: "platform: a multi-platform image fits", service: service(1, nil),
			images: map[string][]Platform{"app:v1": {{OS: "linux", Architecture: "arm64"}, {OS: "linux", Architecture: "amd64"}}}},
		{name: "platform: the spec's own platforms come first", service: service(1, func(s *swarm.ServiceSpec) {
			s.TaskTemplate.Placement.Platforms = []swarm.Platform{{OS: "windows", Architecture: "amd64"}}
		}), images: map[string][]Platform{"app:v1": {{OS: "linux", Architecture: "amd64"}}}, wantRule: RulePlatform, wantText: []string{"windows/amd64"}},
		{name: "platform: judged on the nodes the constraints leave", service: service(1, constraints("node.labels.size == small")),
			nodes:  with(cluster(), func(n *swarm.Node) { n.Description.Platform.Architecture = "aarch64" }, "skep-m1"),
			images: map[string][]Platform{"app:v1": {{OS: "linux", Architecture: "arm64"}}}, wantRule: RulePlatform,
			wantText: []string{"the nodes the constraints leave run linux/amd64 (skep-w2)"}},
		{name: "platform: an aarch64 node runs arm64", service: service(1, nil),
			nodes:  with(cluster(), func(n *swarm.Node) { n.Description.Platform.Architecture = "aarch64" }, "skep-w1"),
			images: map[string][]Platform{"app:v1": {{OS: "linux", Architecture: "arm64", Variant: "v8"}}}},
		{name: "resources: more CPU than any node has", service: service(1, reserve(4*cpu, 0)),
			wantRule: RuleResources, wantText: []string{"reserves 4 CPUs per task", "skep-m1 has 2 CPUs, 4 GiB free", "skep-w2 has 1 CPUs, 1 GiB free"}},
		{name: "resources: memory only the big nodes have, on the small one", service: service(1, func(s *swarm.ServiceSpec) {
			reserve(0, 2*gib)(s)
			constraints("node.labels.size == small")(s)
		}), wantRule: RuleResources, wantText: []string{"no node the constraints leave has it free", "skep-w2 has 1 CPUs, 1 GiB free"}},
		{name: "resources: what other tasks hold is not free", service: service(1, reserve(2*cpu, 0)),
			tasks:    []swarm.Task{task("other", "m1", cpu), task("other", "m2", cpu), task("other", "m3", cpu), task("other", "w1", cpu)},
			wantRule: RuleResources, wantText: []string{"skep-m1 has 1 CPUs, 4 GiB free"}},
		{name: "resources: a task shut down holds nothing", service: service(1, reserve(2*cpu, 0)),
			tasks: func() []swarm.Task {
				t := task("other", "m1", 2*cpu)
				t.DesiredState = swarm.TaskStateShutdown
				return []swarm.Task{t}
			}(), nodes: cluster()[:1]},
		{name: "resources: the service's own old tasks are replaced, not counted", service: service(1, reserve(2*cpu, 0)),
			nodes: cluster()[:1], tasks: []swarm.Task{task("svc-web", "m1", 2*cpu)},
			live: []swarm.Service{{ID: "svc-web", Spec: swarm.ServiceSpec{Annotations: swarm.Annotations{Name: "ns_web"}}}}},
		{name: "resources: replicas the room left holds", service: service(9, reserve(cpu, 0))},
		{name: "resources: replicas beyond the room left", service: service(10, reserve(cpu, 0)),
			wantRule: RuleResources, wantText: []string{"10 replicas reserving 1 CPUs each; the eligible nodes hold 9 (skep-m1 2, skep-m2 2, skep-m3 2, skep-w1 2, skep-w2 1)"}},
		{name: "resources: generic resources only one node announces", service: service(2, func(s *swarm.ServiceSpec) {
			s.TaskTemplate.Resources = &swarm.ResourceRequirements{Reservations: &swarm.Resources{GenericResources: []swarm.GenericResource{
				{DiscreteResourceSpec: &swarm.DiscreteGenericResource{Kind: "gpu", Value: 1}}}}}
		}), nodes: with(cluster(), func(n *swarm.Node) {
			n.Description.Resources.GenericResources = []swarm.GenericResource{{DiscreteResourceSpec: &swarm.DiscreteGenericResource{Kind: "gpu", Value: 1}}}
		}, "skep-w1"), wantRule: RuleResources, wantText: []string{"2 replicas reserving gpu 1 each; the eligible nodes hold 1"}},
		{name: "resources: a global service whose reservation a node lacks", service: global(reserve(2*cpu, 0)),
			wantRule: RuleResources, wantText: []string{"global: reserves 2 CPUs per task, which 1 of its 5 nodes lack (skep-w2 has 1 CPUs, 1 GiB free)"}},
		{name: "resources: a global service fits on the nodes its constraints leave", service: global(func(s *swarm.ServiceSpec) {
			reserve(2*cpu, 0)(s)
			constraints("node.labels.zone == a")(s)
		})},
		{name: "max-replicas-per-node: more replicas than nodes allow", service: service(6, func(s *swarm.ServiceSpec) { s.TaskTemplate.Placement.MaxReplicas = 1 }),
			wantRule: RuleMaxReplicas, wantText: []string{"6 replicas at most 1 per node need 6 nodes; 5 are eligible"}},
		{name: "max-replicas-per-node: counted on the nodes the constraints leave", service: service(3, func(s *swarm.ServiceSpec) {
			s.TaskTemplate.Placement.MaxReplicas = 1
			constraints("node.labels.zone == b")(s)
		}), wantRule: RuleMaxReplicas, wantText: []string{"2 are eligible (skep-m2, skep-w2)"}},
		{name: "max-replicas-per-node: enough nodes", service: service(5, func(s *swarm.ServiceSpec) { s.TaskTemplate.Placement.MaxReplicas = 1 })},
		{name: "max-replicas-per-node with reservations: the smaller bound wins", service: service(6, func(s *swarm.ServiceSpec) {
			s.TaskTemplate.Placement.MaxReplicas = 2
			reserve(2*cpu, 0)(s)
		}), wantRule: RuleResources, wantText: []string{"6 replicas reserving 2 CPUs each, at most 2 per node; the eligible nodes hold 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := tc.nodes
			if nodes == nil {
				nodes = cluster()
			}
			got := Check(Input{Services: map[string]swarm.ServiceSpec{"ns_web": tc.service}, Nodes: nodes, Tasks: tc.tasks, Live: tc.live, Images: tc.images})
			if tc.wantRule == "" {
				if len(got) != 0 {
					t.Fatalf("Check = %v, want no problem", got)
				}
				return
			}
			if len(got) != 1 || got[0].Rule != tc.wantRule || got[0].Service != "ns_web" {
				t.Fatalf("Check = %+v, want one %s problem of ns_web", got, tc.wantRule)
			}
			for _, want := range tc.wantText {
				if !strings.Contains(got[0].Message, want) {
					t.Errorf("message %q does not say %q", got[0].Message, want)
				}
			}
		})
	}
}

func TestCheckReportsEveryServiceInNameOrder(t *testing.T) {
	got := Check(Input{Nodes: cluster(), Services: map[string]swarm.ServiceSpec{
		"ns_b": service(1, constraints("node.labels.zone == c")),
		"ns_a": service(1, reserve(8*cpu, 0)),
		"ns_c": service(2, nil),
	}})
	var rules []string
	for _, p := range got {
		rules = append(rules, p.Service+" "+string(p.Rule))
	}
	if diff := cmp.Diff([]string{"ns_a resources", "ns_b constraint"}, rules); diff != "" {
		t.Errorf("Check (-want +got):\n%s", diff)
	}
}

func TestCheckTakesAnArmNodeForAnArmImage(t *testing.T) {
	nodes := with(cluster(), func(n *swarm.Node) { n.Description.Platform.Architecture = "armv7l" }, "skep-w1")
	got := Check(Input{Nodes: nodes, Services: map[string]swarm.ServiceSpec{"ns_web": service(1, nil)},
		Images: map[string][]Platform{"app:v1": {{OS: "linux", Architecture: "arm", Variant: "v7"}}}})
	if len(got) != 0 {
		t.Errorf("Check = %v, want an arm/v7 image placeable on an armv7l node", got)
	}
}

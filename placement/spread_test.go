package placement

import (
	"testing"

	"github.com/docker/docker/api/types/swarm"
	"github.com/google/go-cmp/cmp"
)

// running is one running task of service web on each node named, in order.
func running(nodes ...string) []swarm.Task {
	var out []swarm.Task
	for _, n := range nodes {
		out = append(out, swarm.Task{ServiceID: "svc-web", NodeID: "id-" + n, DesiredState: swarm.TaskStateRunning,
			Status: swarm.TaskStatus{State: swarm.TaskStateRunning}})
	}
	return out
}

func TestSkewedFindsServicesAReturnedNodeLeftUneven(t *testing.T) {
	spread := func(s *swarm.ServiceSpec) {
		s.TaskTemplate.Placement.Preferences = []swarm.PlacementPreference{{Spread: &swarm.SpreadOver{SpreadDescriptor: "node.labels.zone"}}}
	}
	for _, tc := range []struct {
		name      string
		spec      swarm.ServiceSpec
		nodes     []swarm.Node
		tasks     []swarm.Task
		wantShort []string // nil: not skewed
	}{
		{name: "a node back from a drain holds none while another holds two", spec: service(5, nil),
			tasks: running("m1", "m1", "m2", "m3", "w2"), wantShort: []string{"skep-w1"}},
		{name: "one task more on some nodes is as even as it gets", spec: service(7, nil),
			tasks: running("m1", "m1", "m2", "m2", "m3", "w1", "w2")},
		{name: "a node still drained is no part of the spread", spec: service(4, nil),
			nodes: with(cluster(), func(n *swarm.Node) { n.Spec.Availability = swarm.NodeAvailabilityDrain }, "skep-w1"),
			tasks: running("m1", "m2", "m3", "w2")},
		{name: "a node down is no part of the spread", spec: service(5, nil),
			nodes: with(cluster(), func(n *swarm.Node) { n.Status.State = swarm.NodeStateDown }, "skep-w1"),
			tasks: running("m1", "m1", "m2", "m3", "w2")},
		{name: "a service still starting a task is not judged yet", spec: service(5, nil),
			tasks: func() []swarm.Task {
				ts := running("m1", "m1", "m2", "m3", "w2")
				ts[4].Status.State = swarm.TaskStateStarting
				return ts
			}()},
		{name: "a service short of tasks is not judged yet", spec: service(6, nil), tasks: running("m1", "m1", "m2", "m3", "w2")},
		{name: "only the nodes its constraints leave count", spec: service(3, constraints("node.labels.zone == a")),
			tasks: running("m1", "m1", "m3"), wantShort: []string{"skep-w1"}},
		{name: "max_replicas_per_node: a full node beside two of one task is even", spec: service(4, func(s *swarm.ServiceSpec) { s.TaskTemplate.Placement.MaxReplicas = 2 }),
			nodes: cluster()[:3], tasks: running("m1", "m1", "m2", "m3")},
		{name: "max_replicas_per_node: a zone at its nodes' bound takes no more", spec: service(6, func(s *swarm.ServiceSpec) {
			spread(s)
			s.TaskTemplate.Placement.MaxReplicas = 2
		}), nodes: func() []swarm.Node { c := cluster(); return []swarm.Node{c[0], c[1], c[4]} }(), tasks: running("m1", "m1", "m2", "m2", "w2", "w2")},
		{name: "spread over zones: uneven within a zone", spec: service(4, spread),
			tasks: running("m1", "m1", "m2", "w2"), wantShort: []string{"skep-m3", "skep-w1"}},
		{name: "spread over zones: two tasks on the zone of one node and one per node elsewhere is even", spec: service(4, spread),
			nodes: cluster()[:4], tasks: running("m1", "m3", "m2", "m2")},
		{name: "spread over zones: a zone back empty while the other holds every task", spec: service(4, spread),
			tasks: running("m2", "m2", "w2", "w2"), wantShort: []string{"skep-m1", "skep-m3", "skep-w1"}},
		{name: "a global service is never skewed", spec: global(nil), tasks: running("m1", "m1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := tc.nodes
			if nodes == nil {
				nodes = cluster()
			}
			live := map[string]swarm.Service{"ns_web": {ID: "svc-web", Spec: tc.spec}}
			// The extra task belongs to another service: it counts for none.
			got := Skewed(live, nodes, append(tc.tasks, swarm.Task{ServiceID: "other", NodeID: "id-w1", DesiredState: swarm.TaskStateRunning}))
			if tc.wantShort == nil {
				if len(got) != 0 {
					t.Fatalf("Skewed = %+v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0].Service != "ns_web" {
				t.Fatalf("Skewed = %+v, want ns_web", got)
			}
			if diff := cmp.Diff(tc.wantShort, got[0].Short); diff != "" {
				t.Errorf("short nodes (-want +got):\n%s", diff)
			}
		})
	}
}

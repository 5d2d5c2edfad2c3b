package bench_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/bench"
	"github.com/skep-cd/skep/harness"
)

// TestReplicaCutOffFromTheOtherManagersStopsWritingAndTheMajorityTakesOver
// runs three replicas on the multi-node cluster, each deploying through a
// manager of its own, and cuts the leader's manager off from the others
// (its link down) while commits flow. That manager is a minority of one:
// Swarm takes no write from it, so the leader there cannot renew and steps
// down; a replica on the majority side takes the lease over, and the cut
// one sends no write while it leads, nor once its manager is back.
func TestReplicaCutOffFromTheOtherManagersStopsWritingAndTheMajorityTakesOver(t *testing.T) {
	cluster := harness.RequireCluster(t)
	if testing.Short() {
		t.Skip("runs three controllers on the cluster for about two minutes")
	}
	var sockets []string
	for _, m := range cluster.Managers {
		sockets = append(sockets, strings.TrimPrefix(m, "unix://"))
	}
	docker := cluster.Manager(t, time.Minute)
	run := bench.StartDeployment(t, docker, bench.HAOptions{Binary: skepBinary(t), Engines: sockets,
		Image: cluster.Registry.Host + "/skep-ha/never-pulled:v1"}, 2*time.Second)
	h, flow := run.HA, run.Flow
	leader, first := h.WaitLeader(t, flow, 0, time.Minute)
	if !flow.Until(t, time.Minute, func() bool { return run.Applied(flow.Commits[0]) }) {
		t.Fatalf("the first commit was not applied within a minute\n%s", leader.Controller().LogTail())
	}
	var node harness.Node
	for _, n := range cluster.Nodes {
		if "unix://"+leader.Engine == n.Host {
			node = n
		}
	}
	if node.Name == "" {
		t.Fatalf("no cluster node has the engine %s", leader.Engine)
	}

	cut := time.Now()
	cluster.Cut(t, node)
	var next bench.Term
	if !flow.Until(t, 2*time.Minute, func() bool {
		terms := h.Terms()
		next = terms[len(terms)-1]
		return next.Number > first.Number
	}) {
		t.Fatalf("no replica took the lease over within two minutes of cutting %s off\n%s", node.Name, leader.Controller().LogTail())
	}
	t.Logf("%s cut off at %s; %v, %s later", node.Name, cut.Format("15:04:05.000"), next, next.Taken.Sub(cut).Round(time.Millisecond))
	if next.Holder == leader {
		t.Errorf("the replica on the cut-off manager took the lease again: %v", next)
	}
	// Commits go on landing and being applied on the majority side.
	flow.Until(t, 10*time.Second, func() bool { return false })
	cluster.Heal(t, node)
	if !flow.Until(t, 2*time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		st, err := leader.Status(ctx)
		return err == nil && st.Replication != nil && st.Replication.Replica != leader.Name
	}) {
		t.Errorf("the replica on %s does not follow the new leader within two minutes of the heal", node.Name)
	}
	flow.Every = 0
	last := flow.Land(t)
	if !flow.Until(t, time.Minute, func() bool { return run.Applied(last) }) {
		t.Errorf("the last commit %.12s was not applied within a minute", last)
	}
	for _, l := range h.LateWrites() {
		t.Errorf("late write: %s", l)
	}
	for commit, n := range h.Revisions() {
		if n > 1 {
			t.Errorf("commit %.12s applied %d times", commit, n)
		}
	}
	if !h.CaughtUp(t.Context(), 30*time.Second) {
		t.Error("the replicas' histories did not reach the same last event within 30s")
	}
	checkHistories(t, h)
}

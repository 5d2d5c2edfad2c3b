package harness

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"
)

// DumpStack logs the services of namespace and their tasks as the swarm
// has them, with the node each task is on: for a failed test's report,
// which otherwise says only what did not happen.
func DumpStack(t testing.TB, cli *client.Client, namespace string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
	defer cancel()
	nodes := map[string]string{}
	if list, err := cli.NodeList(ctx, swarm.NodeListOptions{}); err == nil {
		for _, n := range list {
			nodes[n.ID] = n.Description.Hostname + " (" + string(n.Status.State) + ")"
		}
	}
	services, err := cli.ServiceList(ctx, swarm.ServiceListOptions{})
	if err != nil {
		t.Logf("dump: %v", err)
		return
	}
	for _, s := range services {
		if !strings.HasPrefix(s.Spec.Name, namespace+"_") {
			continue
		}
		t.Logf("dump: service %s version %d update %+v", s.Spec.Name, s.Version.Index, s.UpdateStatus)
		tasks, _ := cli.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", s.ID))})
		for _, task := range tasks {
			t.Logf("dump:   task %s slot %d on %s: desired %s, %s at %s: %s %s", task.ID[:min(len(task.ID), 10)], task.Slot, nodes[task.NodeID],
				task.DesiredState, task.Status.State, task.Status.Timestamp.Format("15:04:05"), task.Status.Message, task.Status.Err)
		}
	}
}

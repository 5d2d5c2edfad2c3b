package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"
)

func TestRequireClusterFailsWhenRequiredAndNoClusterAnswers(t *testing.T) {
	for _, tc := range []struct {
		name        string
		require     string
		env         string // the env file's content; "" leaves none
		wantFailed  bool
		wantSkipped bool
		wantMessage string
	}{
		{name: "required without an env file fails", require: "1", wantFailed: true, wantMessage: "env"},
		{name: "not required without an env file skips", require: "", wantSkipped: true, wantMessage: "env"},
		{name: "required with engines that do not answer fails", require: "1", wantFailed: true, wantMessage: "gone.sock",
			env: "SKEP_CLUSTER_MANAGERS=unix:///nonexistent/gone.sock\nSKEP_CLUSTER_NODES=skep-m1=unix:///nonexistent/gone.sock\nSKEP_CLUSTER_REGISTRY=127.0.0.1:1\n"},
		{name: "required with an env file lacking the registry fails", require: "1", wantFailed: true, wantMessage: "registry",
			env: "SKEP_CLUSTER_MANAGERS=unix:///nonexistent/gone.sock\nSKEP_CLUSTER_NODES=skep-m1=unix:///nonexistent/gone.sock\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.env != "" {
				if err := os.WriteFile(filepath.Join(dir, "env"), []byte(tc.env), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("SKEP_CLUSTER_STATE_DIR", dir)
			t.Setenv(EnvRequireCluster, tc.require)
			f := &fakeTB{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				RequireCluster(f)
			}()
			<-done
			if f.failed != tc.wantFailed || f.skipped != tc.wantSkipped {
				t.Fatalf("RequireCluster: failed=%v skipped=%v (%s), want failed=%v skipped=%v",
					f.failed, f.skipped, f.msg, tc.wantFailed, tc.wantSkipped)
			}
			if !strings.Contains(f.msg, tc.wantMessage) {
				t.Errorf("message %q does not say %q", f.msg, tc.wantMessage)
			}
		})
	}
}

// TestClusterRunsAnImageFromItsRegistryOnEveryNode: an image pushed to the
// cluster's registry from this machine's main engine is pulled by all five
// nodes, and each answers on its own address through a host-mode port.
func TestClusterRunsAnImageFromItsRegistryOnEveryNode(t *testing.T) {
	c := RequireCluster(t)
	main := RequireSwarm(t)
	ref := c.Registry.Push(t, main, TestImage(t, main, ImageOptions{Version: "everywhere"}), Name(t, "img"), "v1")
	mgr := c.Manager(t, time.Minute)
	name := Name(t, "cl")
	CleanupStack(t, mgr, name)
	port := FreePort(t)
	resp, err := mgr.ServiceCreate(t.Context(), swarm.ServiceSpec{
		Annotations:  swarm.Annotations{Name: name + "_web"},
		Mode:         swarm.ServiceMode{Global: &swarm.GlobalService{}},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: ref}},
		EndpointSpec: PublishHostPort(port),
	}, swarm.ServiceCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	WaitRunning(t, mgr, resp.ID, len(c.Nodes), 2*time.Minute)
	perNode, err := c.TasksPerNode(t.Context(), resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if perNode[n.Name] != 1 {
			t.Errorf("node %s runs %d tasks of the global service, want 1 (all: %v)", n.Name, perNode[n.Name], perNode)
		}
		if body := HTTPGet(t, fmt.Sprintf("http://%s:%d/", n.Addr, port), time.Minute); !strings.Contains(body, "everywhere") {
			t.Errorf("node %s answers %q, want the image's version", n.Name, body)
		}
	}
}

// TestClusterNodeKilledGoesDownAndMends: a killed worker is seen down by
// the managers, and Mend brings it back Ready.
func TestClusterNodeKilledGoesDownAndMends(t *testing.T) {
	c := RequireCluster(t)
	w := c.Node(t, "skep-w1")
	c.Kill(t, w)
	if _, err := c.Client(t, w).Info(t.Context()); err == nil {
		t.Fatalf("node %s's engine still answers after Kill", w.Name)
	}
	c.WaitNodeState(t, w.Name, swarm.NodeStateDown, time.Minute)
	c.Drain(t, c.Node(t, "skep-w2"))
	if _, avail := c.NodeStatus(t, "skep-w2"); avail != swarm.NodeAvailabilityDrain {
		t.Fatalf("skep-w2 is %s after Drain, want drain", avail)
	}
	c.Mend(t)
	for _, name := range []string{"skep-w1", "skep-w2"} {
		state, avail := c.NodeStatus(t, name)
		if state != swarm.NodeStateReady || avail != swarm.NodeAvailabilityActive {
			t.Errorf("node %s is %s and %s after Mend, want ready and active", name, state, avail)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.Client(t, w).Info(ctx); err != nil {
		t.Errorf("node %s's engine does not answer after Mend: %v", w.Name, err)
	}
}

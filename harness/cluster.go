package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"
)

// EnvRequireCluster names the variable that turns a missing multi-node
// cluster from a skip into a failure (CI sets it; see .ci/run).
const EnvRequireCluster = "SKEP_REQUIRE_CLUSTER"

// ClusterRequired reports whether the environment demands the cluster.
// Only "1" counts.
func ClusterRequired() bool { return os.Getenv(EnvRequireCluster) == "1" }

// Cluster is the multi-node swarm scripts/cluster-up starts on this
// machine: three managers and two workers, each engine in its own network
// namespace. Its helpers break and mend nodes; every one of them that
// breaks something registers a cleanup that mends the whole cluster, so the
// next test finds five nodes Ready and active.
type Cluster struct {
	// Managers are the managers' Engine addresses (unix:///...), m1 first:
	// what a destination's managers or the local swarm's fallbacks list.
	Managers []string
	// ManagersTCP are the same engines over mutual TLS (tcp://addr:2376),
	// with the client's CA, certificate and key files.
	ManagersTCP            []string
	TLSCA, TLSCert, TLSKey string
	// Nodes are all five, managers first.
	Nodes []Node
	// Registry is the one every node pulls from (on the host's loopback);
	// it lives as long as the cluster, in memory.
	Registry *Registry
	// Destinations is a destinations file naming the managers as the
	// destination "cluster".
	Destinations string
	ClusterID    string

	mu            sync.Mutex
	clients       map[string]*client.Client
	mendOnCleanup bool
}

// Node is one engine of the cluster.
type Node struct {
	// Name is the swarm node's hostname, skep-m1 ... skep-w2.
	Name string
	// Host is its Engine's unix socket (unix:///...).
	Host string
	// Addr is its address: where its host-mode published ports answer.
	Addr string
	// Manager is true for m1, m2 and m3.
	Manager bool
}

// RequireCluster returns the cluster when scripts/cluster-up has started it
// and all five engines answer, with a leader. Otherwise the test fails when
// ClusterRequired and is skipped with the reason when not. Clients it made
// are closed in t.Cleanup.
func RequireCluster(t testing.TB) *Cluster {
	t.Helper()
	c, reason := findCluster(t.Context())
	if c == nil {
		if ClusterRequired() {
			t.Fatalf("%s=1 but the cluster is not there: %s (run scripts/cluster-up)", EnvRequireCluster, reason)
		}
		t.Skipf("no cluster: %s (run scripts/cluster-up; set %s=1 to make this a failure)", reason, EnvRequireCluster)
	}
	t.Cleanup(c.closeClients)
	return c
}

// clusterStateDir is where scripts/cluster-up keeps its state and env file.
func clusterStateDir() string {
	if d := os.Getenv("SKEP_CLUSTER_STATE_DIR"); d != "" {
		return d
	}
	return "/tmp/skep-cluster"
}

// readEnvFile reads KEY=VALUE lines.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			vars[k] = v
		}
	}
	return vars, sc.Err()
}

// pairs splits "a=x,b=y" into its pairs, in order.
func pairs(s string) [][2]string {
	var out [][2]string
	for _, item := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(item, "="); ok {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}

// findCluster reads the env file cluster-up wrote and checks every engine
// it names; it returns nil and why when anything is missing.
func findCluster(ctx context.Context) (*Cluster, string) {
	dir := clusterStateDir()
	vars, err := readEnvFile(filepath.Join(dir, "env"))
	if err != nil {
		return nil, err.Error()
	}
	c := &Cluster{clients: map[string]*client.Client{},
		TLSCA: vars["SKEP_CLUSTER_TLS_CA"], TLSCert: vars["SKEP_CLUSTER_TLS_CERT"], TLSKey: vars["SKEP_CLUSTER_TLS_KEY"],
		Destinations: vars["SKEP_CLUSTER_DESTINATIONS"], ClusterID: vars["SKEP_CLUSTER_ID"]}
	if v := vars["SKEP_CLUSTER_MANAGERS"]; v != "" {
		c.Managers = strings.Split(v, ",")
	}
	if v := vars["SKEP_CLUSTER_MANAGERS_TCP"]; v != "" {
		c.ManagersTCP = strings.Split(v, ",")
	}
	if v := vars["SKEP_CLUSTER_REGISTRY"]; v != "" {
		c.Registry = &Registry{Host: v}
	}
	addrs := map[string]string{}
	for _, p := range pairs(vars["SKEP_CLUSTER_NODE_ADDRS"]) {
		addrs[p[0]] = p[1]
	}
	for _, p := range pairs(vars["SKEP_CLUSTER_NODES"]) {
		c.Nodes = append(c.Nodes, Node{Name: p[0], Host: p[1], Addr: addrs[p[0]], Manager: slices.Contains(c.Managers, p[1])})
	}
	if len(c.Managers) == 0 || len(c.Nodes) == 0 || c.Registry == nil {
		return nil, "env file " + filepath.Join(dir, "env") + " lacks the managers, nodes or registry"
	}
	if reason := c.healthy(ctx); reason != "" {
		c.closeClients()
		return nil, reason
	}
	return c, ""
}

// healthy returns "" when every engine answers and a manager sees every
// node Ready, and what is wrong otherwise. Each call is bounded, so a
// socket nobody answers on fails the test rather than hanging it.
func (c *Cluster) healthy(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		cli, err := c.clientOf(n)
		if err != nil {
			return err.Error()
		}
		if _, err := cli.Info(ctx); err != nil {
			return "node " + n.Name + ": " + err.Error()
		}
	}
	nodes, err := c.listNodes(ctx)
	if err != nil {
		return err.Error()
	}
	for _, n := range nodes {
		if n.Status.State != swarm.NodeStateReady {
			return fmt.Sprintf("node %s is %s", n.Description.Hostname, n.Status.State)
		}
	}
	if len(nodes) != len(c.Nodes) {
		return fmt.Sprintf("the swarm has %d nodes, the env file names %d", len(nodes), len(c.Nodes))
	}
	return ""
}

// clientOf returns the cluster's client of node n's engine, made once.
func (c *Cluster) clientOf(n Node) (*client.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cli, ok := c.clients[n.Name]; ok {
		return cli, nil
	}
	cli, err := client.NewClientWithOpts(client.WithHost(n.Host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client for %s: %w", n.Name, err)
	}
	c.clients[n.Name] = cli
	return cli, nil
}

// closeClients closes every client the cluster made.
func (c *Cluster) closeClients() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, cli := range c.clients {
		_ = cli.Close()
		delete(c.clients, name)
	}
}

// Node returns the node called name (skep-m1 ...), failing t when there is
// none.
func (c *Cluster) Node(t testing.TB, name string) Node {
	t.Helper()
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("the cluster has no node %q", name)
	return Node{}
}

// Client returns a client of node n's engine; the cluster closes it.
func (c *Cluster) Client(t testing.TB, n Node) *client.Client {
	t.Helper()
	cli, err := c.clientOf(n)
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

// Manager returns a client of a manager that answers now and sees a
// leader, trying m1, m2, m3 in turn, so a test that stopped one can still
// read the swarm. It fails t when none does within timeout.
func (c *Cluster) Manager(t testing.TB, timeout time.Duration) *client.Client {
	t.Helper()
	var found *client.Client
	Eventually(t, timeout, func(ctx context.Context) (bool, string) {
		cli, err := c.manager(ctx)
		found = cli
		return err == nil, fmt.Sprint(err)
	})
	return found
}

// manager finds a manager whose node list answers (which needs a leader).
func (c *Cluster) manager(ctx context.Context) (*client.Client, error) {
	var errs []error
	for _, n := range c.Nodes {
		if !n.Manager {
			continue
		}
		cli, err := c.clientOf(n)
		if err == nil {
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = cli.NodeList(actx, swarm.NodeListOptions{})
			cancel()
			if err == nil {
				return cli, nil
			}
		}
		errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))
	}
	return nil, fmt.Errorf("no manager answers with a leader: %w", errors.Join(errs...))
}

// listNodes lists the swarm's nodes through a manager that answers.
func (c *Cluster) listNodes(ctx context.Context) ([]swarm.Node, error) {
	cli, err := c.manager(ctx)
	if err != nil {
		return nil, err
	}
	return cli.NodeList(ctx, swarm.NodeListOptions{})
}

// NodeStatus returns what the swarm says of node name now: its state
// (ready, down, unknown) and availability (active, drain, pause).
func (c *Cluster) NodeStatus(t testing.TB, name string) (swarm.NodeState, swarm.NodeAvailability) {
	t.Helper()
	cli := c.Manager(t, time.Minute)
	n, _, err := cli.NodeInspectWithRaw(t.Context(), name)
	if err != nil {
		t.Fatalf("inspect node %s: %v", name, err)
	}
	return n.Status.State, n.Spec.Availability
}

// WaitNodeState waits until the swarm reports node name in state (a
// killed node turns down after the managers miss its heartbeats, some 15
// seconds).
func (c *Cluster) WaitNodeState(t testing.TB, name string, state swarm.NodeState, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, func(ctx context.Context) (bool, string) {
		cli, err := c.manager(ctx)
		if err != nil {
			return false, err.Error()
		}
		n, _, err := cli.NodeInspectWithRaw(ctx, name)
		if err != nil {
			return false, err.Error()
		}
		return n.Status.State == state, fmt.Sprintf("node %s is %s", name, n.Status.State)
	})
}

// Kill crashes node n: its dockerd, containerd, shims and containers die
// at once, as on a machine that lost power. The swarm sees it only when
// its heartbeats stop.
func (c *Cluster) Kill(t testing.TB, n Node) { t.Helper(); c.nodeScript(t, "kill", n) }

// Stop stops node n's engine cleanly: its containers stop and it leaves no
// process behind. Its socket refuses connections once it returns.
func (c *Cluster) Stop(t testing.TB, n Node) { t.Helper(); c.nodeScript(t, "stop", n) }

// Start starts node n's engine again after Kill or Stop and waits until it
// answers; it rejoins the swarm as the same node.
func (c *Cluster) Start(t testing.TB, n Node) { t.Helper(); c.nodeScript(t, "start", n) }

// Cut takes node n's link down: its engine runs on, unreachable from the
// other nodes and over TCP (its unix socket still answers).
func (c *Cluster) Cut(t testing.TB, n Node) { t.Helper(); c.nodeScript(t, "cut", n) }

// Heal brings node n's link up after Cut.
func (c *Cluster) Heal(t testing.TB, n Node) { t.Helper(); c.nodeScript(t, "heal", n) }

// Drain sets node n's availability to drain: the swarm moves its tasks
// elsewhere.
func (c *Cluster) Drain(t testing.TB, n Node) {
	t.Helper()
	c.mendLater(t)
	if err := c.setAvailability(t.Context(), n.Name, swarm.NodeAvailabilityDrain); err != nil {
		t.Fatal(err)
	}
}

// Activate sets node n's availability back to active.
func (c *Cluster) Activate(t testing.TB, n Node) {
	t.Helper()
	if err := c.setAvailability(t.Context(), n.Name, swarm.NodeAvailabilityActive); err != nil {
		t.Fatal(err)
	}
}

// setAvailability updates a node's availability, retrying a write that
// lost a race with the swarm's own update of the node.
func (c *Cluster) setAvailability(ctx context.Context, name string, a swarm.NodeAvailability) error {
	var last error
	for range 10 {
		cli, err := c.manager(ctx)
		if err != nil {
			return err
		}
		n, _, err := cli.NodeInspectWithRaw(ctx, name)
		if err != nil {
			return fmt.Errorf("inspect node %s: %w", name, err)
		}
		if n.Spec.Availability == a {
			return nil
		}
		spec := n.Spec
		spec.Availability = a
		if last = cli.NodeUpdate(ctx, n.ID, n.Version, spec); last == nil {
			return nil
		}
	}
	return fmt.Errorf("set node %s to %s: %w", name, a, last)
}

// nodeScript runs scripts/cluster-node VERB NODE, mending the cluster when
// the test ends.
func (c *Cluster) nodeScript(t testing.TB, verb string, n Node) {
	t.Helper()
	c.mendLater(t)
	runScript(t, "cluster-node", verb, n.Name)
}

// mendLater registers, once per test, the cleanup that mends the cluster.
func (c *Cluster) mendLater(t testing.TB) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mendOnCleanup {
		return
	}
	c.mendOnCleanup = true
	t.Cleanup(func() { c.Mend(t) })
}

// Mend brings the cluster back to five nodes Ready and active: every link
// up, every engine started (scripts/cluster-up), every node active. It
// fails t when that does not happen within two minutes.
func (c *Cluster) Mend(t testing.TB) {
	t.Helper()
	for _, n := range c.Nodes {
		runScript(t, "cluster-node", "heal", n.Name)
	}
	runScript(t, "cluster-up")
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 2*time.Minute)
	defer cancel()
	for _, n := range c.Nodes {
		if err := c.setAvailability(ctx, n.Name, swarm.NodeAvailabilityActive); err != nil {
			t.Errorf("mend the cluster: %v", err)
		}
	}
	for {
		reason := c.healthy(ctx)
		if reason == "" {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("mend the cluster: %s", reason)
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// TasksPerNode counts the running tasks of serviceID per node hostname.
// Only tasks meant to run count: a rolling update's shut-down tasks do not.
func (c *Cluster) TasksPerNode(ctx context.Context, serviceID string) (map[string]int, error) {
	cli, err := c.manager(ctx)
	if err != nil {
		return nil, err
	}
	nodes, err := cli.NodeList(ctx, swarm.NodeListOptions{})
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for _, n := range nodes {
		names[n.ID] = n.Description.Hostname
	}
	tasks, err := cli.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(
		filters.Arg("service", serviceID), filters.Arg("desired-state", "running"))})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, task := range tasks {
		if task.Status.State == swarm.TaskStateRunning {
			out[names[task.NodeID]]++
		}
	}
	return out, nil
}

// CleanupNetworks waits, when the test ends, until no node of the cluster
// still holds a network of the stack namespace. Removing a stack's overlay
// network on the managers leaves each node's copy to go with its last
// task, and a network created meanwhile with the same subnet (the pool
// hands out the freed one first) is refused on that node: "Pool overlaps
// with other one on this address space". Register it before the stack's
// own cleanup, so that it runs after it.
func (c *Cluster) CleanupNetworks(t testing.TB, namespace string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
		defer cancel()
		for _, n := range c.Nodes {
			cli, err := c.clientOf(n)
			if err != nil {
				continue
			}
			for {
				nets, err := cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", namespace+"_"))})
				if err == nil && len(nets) == 0 {
					break
				}
				select {
				case <-ctx.Done():
					t.Logf("node %s still holds networks of %s after a minute: %v", n.Name, namespace, err)
					return
				case <-time.After(250 * time.Millisecond):
				}
			}
		}
	})
}

package harness

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for a
// host-mode published port.
func FreePort(t testing.TB) uint32 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	// Closed at return, so the port is free again for the service; another
	// process may take it first, which a test then sees as a bind error.
	defer ln.Close()
	return uint32(ln.Addr().(*net.TCPAddr).Port)
}

// PublishHostPort returns an endpoint spec that publishes the test app's
// port on the node in host mode with DNS round-robin, the only publishing
// that works without IPVS.
func PublishHostPort(published uint32) *swarm.EndpointSpec {
	return &swarm.EndpointSpec{
		// Without IPVS a virtual IP cannot route, so the endpoint resolves to
		// task addresses directly.
		Mode: swarm.ResolutionModeDNSRR,
		Ports: []swarm.PortConfig{{
			Protocol:      swarm.PortConfigProtocolTCP,
			TargetPort:    TestAppPort,
			PublishedPort: published,
			PublishMode:   swarm.PortConfigPublishModeHost,
		}},
	}
}

// WaitRunning waits until serviceID has want tasks in state running, and
// fails the test with the tasks' last error otherwise.
// It blocks up to timeout; more running tasks than want also pass.
func WaitRunning(t testing.TB, cli *client.Client, serviceID string, want int, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, func(ctx context.Context) (bool, string) {
		tasks, err := cli.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(
			// Only tasks meant to run: a rolling update's shut-down tasks would
			// otherwise be reported as failures.
			filters.Arg("service", serviceID), filters.Arg("desired-state", "running"))})
		if err != nil {
			return false, err.Error()
		}
		running, why := 0, fmt.Sprintf("%d tasks", len(tasks))
		for _, task := range tasks {
			if task.Status.State == swarm.TaskStateRunning {
				running++
			} else {
				// The last non-running task's state and error explain a timeout better
				// than a count does.
				why = fmt.Sprintf("task %s is %s: %s %s", task.ID[:12], task.Status.State, task.Status.Message, task.Status.Err)
			}
		}
		return running >= want, why
	})
}

// HTTPGet fetches url until it answers 200 or timeout passes, and returns the
// body. Containers take a moment to bind after their task reports running.
func HTTPGet(t testing.TB, url string, timeout time.Duration) string {
	t.Helper()
	var body string
	Eventually(t, timeout, func(ctx context.Context) (bool, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err.Error()
		}
		// No client timeout: each try is bounded by the ctx Eventually gives.
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return false, err.Error()
		}
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Sprintf("status %d: %s", resp.StatusCode, b)
		}
		body = string(b)
		return true, ""
	})
	return body
}

// ServiceNamed returns the service called exactly name on cli, or nil when
// there is none. The name filter is a prefix match in the daemon, hence the
// exact comparison.
func ServiceNamed(ctx context.Context, cli *client.Client, name string) (*swarm.Service, error) {
	list, err := cli.ServiceList(ctx, swarm.ServiceListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return nil, err
	}
	for _, s := range list {
		if s.Spec.Name == name {
			return &s, nil
		}
	}
	return nil, nil
}

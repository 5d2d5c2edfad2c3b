package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"
)

// PrometheusBinary is where Debian's prometheus package installs the
// server; .ci/run installs the package.
const PrometheusBinary = "/usr/bin/prometheus"

// Prometheus is a real Prometheus server the test started, scraping every
// second the targets the test gives it (a file_sd file it rewrites).
type Prometheus struct {
	// URL is its HTTP API's base address, on loopback.
	URL     string
	targets string
}

// StartPrometheus starts Prometheus on a free loopback port, with its
// data in a temporary directory, and stops it when the test ends. It
// fails the test when the binary is missing: the tests that need it are
// the proof of metric analysis, which no fake stands in for.
func StartPrometheus(t testing.TB) *Prometheus {
	t.Helper()
	if _, err := os.Stat(PrometheusBinary); err != nil {
		t.Fatalf("prometheus: %v (install Debian's prometheus package; .ci/run does)", err)
	}
	dir := t.TempDir()
	p := &Prometheus{targets: filepath.Join(dir, "targets.json")}
	p.SetTargets(t, nil)
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
scrape_configs:
  - job_name: tasks
    file_sd_configs:
      - files: [%q]
        refresh_interval: 1s
`, p.targets)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	port := FreePort(t)
	p.URL = "http://127.0.0.1:" + strconv.Itoa(int(port))
	cmd := exec.Command(PrometheusBinary, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address=127.0.0.1:"+strconv.Itoa(int(port)),
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = t.Output(), t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/-/ready", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "prometheus answers " + resp.Status
	})
	return p
}

// SetTargets makes targets (host:port) what Prometheus scrapes, within a
// second or so.
func (p *Prometheus) SetTargets(t testing.TB, targets []string) {
	t.Helper()
	data, err := json.Marshal([]map[string]any{{"targets": append([]string{}, targets...)}})
	if err != nil {
		t.Fatal(err)
	}
	// Written aside and renamed, so Prometheus never reads half a file.
	tmp := p.targets + ".new"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p.targets); err != nil {
		t.Fatal(err)
	}
}

// ScrapeTasks keeps Prometheus's targets at the running tasks of the
// services named (full names, any that exist), each at the host port its
// container publishes targetPort on in host mode, until the test ends.
func (p *Prometheus) ScrapeTasks(t testing.TB, cli *client.Client, targetPort uint32, services ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		var last []string
		for tick := time.NewTicker(500 * time.Millisecond); ; {
			if targets, err := taskTargets(ctx, cli, targetPort, services); err == nil && !slices.Equal(targets, last) {
				p.SetTargets(t, targets)
				last = targets
			}
			select {
			case <-ctx.Done():
				tick.Stop()
				return
			case <-tick.C:
			}
		}
	}()
}

// taskTargets lists 127.0.0.1:<published port> of every running task of
// services that publishes targetPort in host mode.
func taskTargets(ctx context.Context, cli *client.Client, targetPort uint32, services []string) ([]string, error) {
	var out []string
	for _, name := range services {
		tasks, err := cli.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(
			filters.Arg("service", name), filters.Arg("desired-state", "running"))})
		if err != nil {
			continue // a service not created yet, or gone
		}
		for _, task := range tasks {
			if task.Status.State != swarm.TaskStateRunning || task.Status.PortStatus.Ports == nil {
				continue
			}
			for _, port := range task.Status.PortStatus.Ports {
				if port.TargetPort == targetPort && port.PublishMode == swarm.PortConfigPublishModeHost && port.PublishedPort != 0 {
					out = append(out, "127.0.0.1:"+strconv.Itoa(int(port.PublishedPort)))
					break
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

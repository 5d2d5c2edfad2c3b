package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skep-cd/skep/harness"
)

// controllerMemoryBound is the most memory (peak resident set) a
// controller may reach while it renders the runaway charts below:
// docs/charts.md, "Bounds of a render".
const controllerMemoryBound = 512 << 20

// runawayChart is a chart of faultServices services running image, with
// runaway as templates/runaway.yaml ("" for none).
func runawayChart(image, runaway string) map[string]string {
	files := map[string]string{
		"chart/Chart.yaml":  "name: runaway\nversion: 1.0.0\n",
		"chart/values.yaml": "image: " + image + "\n",
		"chart/templates/web.yaml": `services:
{{- range $i := until ` + strconv.Itoa(faultServices) + ` }}
  s{{ add1 $i }}:
    image: {{ $.Values.image }}
    deploy: {endpoint_mode: dnsrr, replicas: 1}
{{- end }}
`,
	}
	if runaway != "" {
		files["chart/templates/runaway.yaml"] = runaway
	}
	return files
}

// peakMemory is the peak resident set of process pid, from /proc.
func peakMemory(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// cpuTicks is the CPU time process pid used, in clock ticks, from /proc.
func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's closing parenthesis: utime and stime
	// are the 12th and 13th of them.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	utime, _ := strconv.Atoi(fields[11])
	stime, _ := strconv.Atoi(fields[12])
	return utime + stime
}

func TestFaultRunawayChartStopsAtItsBoundsAndSIGTERMStillEndsTheController(t *testing.T) {
	docker := harness.RequireSwarm(t)
	e := newFaultEnv(t, docker, mainSocket(t))
	runaway, err := os.ReadFile(filepath.Join("..", "chart", "testdata", "runaway", "slow-functions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	memory := "{{ $d := dict \"k\" \"v\" }}{{ range until 25 }}{{ $d = dict \"a\" $d \"b\" $d }}{{ end }}\n" +
		"x-a: {{ toYaml $d | len }}\nx-b: {{ indent 3000000000 \"x\" | len }}\nx-c: {{ randAlphaNum 1000000000 | len }}\n"
	repo := e.git.CreateRepo(t, "chart")
	writeTestFile(t, e.apps, fmt.Sprintf(`apiVersion: skep/v1
applications:
  - name: stack
    release: %s
    source: {repo: %s, revision: main}
    chart: {path: chart}
    syncPolicy: {automated: true, interval: 10s, resolveImage: never}
`, e.ns, repo.URL))
	first := repo.Commit(t, "main", runawayChart(e.v1, memory))
	ctl := e.startController(t, filepath.Join(e.dir, "data"))

	waitStalled := func(t *testing.T, commit, want string) {
		t.Helper()
		harness.Eventually(t, 2*time.Minute, func(context.Context) (bool, string) {
			a := e.app(t).Application
			return a.Revision == commit && a.LastErrorClass == "stalled" && strings.Contains(a.LastError, want),
				fmt.Sprintf("at %.12s (want %.12s): %s error %q", a.Revision, commit, a.LastErrorClass, a.LastError)
		})
	}
	t.Run("a template building gigabytes is a stalled error naming it, and the controller stays small", func(t *testing.T) {
		waitStalled(t, first, "chart/templates/runaway.yaml:2:")
		if peak := peakMemory(t, ctl.cmd.Process.Pid); peak > controllerMemoryBound {
			t.Errorf("the controller's peak memory is %d MiB, want at most %d MiB", peak>>20, controllerMemoryBound>>20)
		} else {
			t.Logf("the controller's peak memory: %d MiB", peak>>20)
		}
	})

	second := repo.Commit(t, "main", runawayChart(e.v1, string(runaway)))
	t.Run("a template running for minutes stops at the render's time bound, naming it", func(t *testing.T) {
		e.cli.ok(t, "app", "refresh", "stack")
		waitStalled(t, second, "chart/templates/runaway.yaml: stopped after 10s, the most a render may take")
		if peak := peakMemory(t, ctl.cmd.Process.Pid); peak > controllerMemoryBound {
			t.Errorf("the controller's peak memory is %d MiB, want at most %d MiB", peak>>20, controllerMemoryBound>>20)
		}
	})

	fixed := repo.Commit(t, "main", runawayChart(e.v1, ""), "chart/templates/runaway.yaml")
	t.Run("the commit that fixes the chart deploys", func(t *testing.T) {
		e.cli.ok(t, "app", "refresh", "stack")
		e.waitConverged(t, fixed, e.v1, 2*time.Minute)
	})

	again := repo.Commit(t, "main", runawayChart(e.v2, string(runaway)))
	t.Run("SIGTERM with a runaway render in flight ends the controller within 10s", func(t *testing.T) {
		before := cpuTicks(t, ctl.cmd.Process.Pid)
		e.cli.ok(t, "app", "refresh", "stack")
		// The render is in flight once the worker reconciles the new commit
		// and the controller burns a second of CPU on it.
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			a := e.app(t).Application
			used := cpuTicks(t, ctl.cmd.Process.Pid) - before
			return a.Phase == "reconciling" && used >= 100, fmt.Sprintf("phase %s, %d CPU ticks since the commit", a.Phase, used)
		})
		took := ctl.stop(t, syscall.SIGTERM, 10*time.Second)
		if ctl.err != nil || !strings.Contains(ctl.output.String(), "controller stopped") {
			t.Errorf("controller exited with %v after SIGTERM, want 0 after its clean stop", ctl.err)
		}
		// The log notifier prints every event: a render the stop cut short
		// did not fail.
		if strings.Contains(ctl.output.String(), "type=sync-failed revision="+again) {
			t.Errorf("sync-failed raised for %.12s, whose render the stop cut short", again)
		}
		t.Logf("stopped %s after SIGTERM", took.Round(time.Millisecond))
	})
}

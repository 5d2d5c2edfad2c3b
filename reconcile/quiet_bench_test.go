package reconcile_test

import (
	"context"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/reconcile"
)

// ticks passes on the observations of one application's reconciles.
type ticks struct {
	app string
	c   chan reconcile.Observation
}

func (t *ticks) ObserveReconcile(o reconcile.Observation) {
	if o.Application == t.app {
		t.c <- o
	}
}

// BenchmarkQuietTick is one plain tick of a synced, healthy application
// whose commit and swarm did not change, through the worker as the
// interval queues it: an ls-remote against the git server, then nothing.
// cpu-ns/op is the process's CPU time per quiet tick (getrusage): the
// controller's, since the git server runs in a process of its own, whose
// CPU per tick (its `git http-backend` runs included) is
// git-server-cpu-ns/op; rendered-ticks counts
// the ticks that were not quiet (rendered and compared), left out of it,
// and the benchmark fails when more than 1 in 20 were.
func BenchmarkQuietTick(b *testing.B) {
	e := newEnv(b)
	port := harness.FreePort(b)
	e.repo.Commit(b, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	obs := &ticks{app: "web", c: make(chan reconcile.Observation, 64)}
	// The controller asks a git server in a process of its own, so that
	// this process's CPU is the tick's alone.
	server := harness.StartGitServerProcess(b, e.git.Root)
	// An interval of an hour: only the benchmark's refreshes tick.
	apps := strings.Replace(appSet(e.app("web", true)), "interval: 10s", "interval: 1h", 1)
	if apps = strings.Replace(apps, e.git.URL, server.URL, 1); !strings.Contains(apps, server.URL) {
		b.Fatalf("the app set does not name the git server process:\n%s", apps)
	}
	ctrl := e.controllerWith(b, appset.FileSource{Path: writeFile(b, b.TempDir(), "apps.yaml", apps)}, reconcile.Options{Observer: obs,
		// At the controller's default level, as `skep controller` runs:
		// the tests' debug lines are not what a tick costs.
		Logger: slog.New(slog.NewTextHandler(b.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))})
	run(b, ctrl)
	waitStatus(b, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Sync == reconcile.Synced && s.Health == health.Healthy
	})
	tick := func() reconcile.Observation {
		if err := ctrl.Refresh(b.Context(), "web"); err != nil {
			b.Fatal(err)
		}
		select {
		case o := <-obs.c:
			return o
		case <-time.After(time.Minute):
			b.Fatal("no tick within a minute")
			return reconcile.Observation{}
		}
	}
	// The first ticks after the deploy record what a quiet tick is.
	harness.Eventually(b, time.Minute, func(context.Context) (bool, string) {
		return tick().Quiet, "the tick was not quiet"
	})
	// Only quiet ticks count towards cpu-ns/op: a tick that rendered is
	// not the no-op tick this measures, and a few of them weigh more than
	// the rest together.
	var quietCPU time.Duration
	quiet, full := 0, 0
	serverBefore := server.CPU(b)
	for b.Loop() {
		start := cpuTime(b)
		if !tick().Quiet {
			full++
			continue
		}
		quietCPU += cpuTime(b) - start
		quiet++
	}
	if quiet == 0 {
		b.Fatalf("none of %d ticks was quiet", b.N)
	}
	b.ReportMetric(float64(quietCPU)/float64(quiet), "cpu-ns/op")
	b.ReportMetric(float64(server.CPU(b)-serverBefore)/float64(b.N), "git-server-cpu-ns/op")
	b.ReportMetric(float64(full), "rendered-ticks")
	// Health events of the service's own task may make a rare tick render;
	// more than that is a quiet key that does not hold.
	if full*20 > b.N {
		b.Fatalf("%d of %d ticks rendered and compared", full, b.N)
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

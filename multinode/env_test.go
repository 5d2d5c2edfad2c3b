// Package multinode_test proves Skep's core on a swarm of several nodes:
// the cluster scripts/cluster-up starts (three managers, two workers, each
// engine in its own network namespace), with images pulled by every node
// from the cluster's registry, never pre-loaded.
//
// The tests are black-box: a controller built with reconcile.New and run
// with Run, as the binary wires it, whose local swarm is the cluster with
// m1 first and m2, m3 as fallback managers (swarm.LocalDestination). They
// break nodes through the harness (drain, kill, stop) and the harness mends
// the cluster when each test ends. Without the cluster they skip, or fail
// when SKEP_REQUIRE_CLUSTER=1 (CI). See docs/testing.md.
package multinode_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	skepswarm "github.com/skep-cd/skep/swarm"
)

// recorder keeps every event the controller raised.
type recorder struct {
	mu     sync.Mutex
	events []notify.Event
}

func (r *recorder) Notify(_ context.Context, e notify.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// all returns the events so far, in order.
func (r *recorder) all() []notify.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]notify.Event(nil), r.events...)
}

// of returns the events of type typ so far.
func (r *recorder) of(typ notify.EventType) []notify.Event {
	var out []notify.Event
	for _, e := range r.all() {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// since returns the events raised after the first n.
func (r *recorder) since(n int) []notify.Event {
	all := r.all()
	if n > len(all) {
		return nil
	}
	return all[n:]
}

// env is one test's cluster, git repository, controller id and stack.
type env struct {
	cl *harness.Cluster
	// main is this machine's own engine: it builds the test images and
	// pushes them to the cluster's registry.
	main   *client.Client
	git    *harness.GitServer
	repo   *harness.Repo
	id, ns string
	events *recorder
	// engine is the controller's client of the cluster (m1, then m2, m3),
	// which the test also reads the swarm through.
	engine *skepswarm.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cl := harness.RequireCluster(t)
	e := &env{
		cl:     cl,
		main:   harness.RequireSwarm(t),
		git:    harness.StartGitServer(t, harness.GitServerOptions{}),
		id:     harness.Name(t, "ctl"),
		ns:     harness.Name(t, "mn"),
		events: &recorder{},
	}
	e.repo = e.git.CreateRepo(t, "app")
	// The controller's view of its local swarm: DOCKER_HOST is m1, the
	// other managers are its fallbacks, as --local-managers makes them.
	getenv := func(k string) string {
		if k == client.EnvOverrideHost {
			return cl.Managers[0]
		}
		return ""
	}
	dest, err := skepswarm.LocalDestination(getenv, cl.Managers[1:])
	if err != nil {
		t.Fatal(err)
	}
	e.engine, err = skepswarm.Connect(t.Context(), skepswarm.Options{Destination: dest})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.engine.Close() })
	// Registered after the engine's Close, so they run before it; and
	// before any node is broken, so they run after the cluster is mended.
	// The stack goes first, then the nodes' copies of its networks.
	cl.CleanupNetworks(t, e.ns)
	harness.CleanupStack(t, e.engine.Client, e.ns)
	t.Cleanup(func() {
		if t.Failed() {
			e.dump(t)
		}
	})
	return e
}

// dump logs the release's services and tasks as the swarm has them, for a
// failed test's report.
func (e *env) dump(t *testing.T) {
	for _, ev := range e.events.all() {
		t.Logf("dump: event %s %s of %s: %s", ev.At.Format("15:04:05.000"), ev.Type, ev.Application, ev.Message)
	}
	harness.DumpStack(t, e.engine.Client, e.ns)
}

// image builds the test application reporting version and pushes it to
// the cluster's registry under a repository of this test; it returns the
// reference, by tag, that every node pulls.
func (e *env) image(t *testing.T, repo, version string, opts harness.ImageOptions) string {
	t.Helper()
	opts.Version = version
	return e.cl.Registry.Push(t, e.main, harness.TestImage(t, e.main, opts), repo, version)
}

// app is the application entry of the test's release, automated, with
// live drift detection: the proofs that nothing is raised for what the
// scheduler does need the controller to look.
func (e *env) app(name string) string { return e.appWith(name, "") }

// defaultPolicy is the syncPolicy of app.
const defaultPolicy = "automated: true, interval: 10s, resolveImage: always"

// appWith is app with more syncPolicy fields before defaultPolicy's
// ("prune: true, "), or, when policy ends without ", ", that policy alone.
func (e *env) appWith(name, policy string) string {
	if policy == "" || strings.HasSuffix(policy, ", ") {
		policy += defaultPolicy
	}
	return fmt.Sprintf(`apiVersion: skep/v1
applications:
  - name: %s
    release: %s
    source: {repo: %s, revision: main}
    driftDetection: live
    syncPolicy: {%s}
`, name, e.ns, e.repo.URL, policy)
}

// controller builds a controller like the binary does, with the live
// snapshot of the cluster, and runs it until the test ends.
func (e *env) controller(t *testing.T, apps string) *reconcile.Controller {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	git, err := gitsource.New(gitsource.Options{Dir: t.TempDir(), Logger: logger, RefsMaxAge: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "apps.yaml")
	if err := os.WriteFile(file, []byte(apps), 0o644); err != nil {
		t.Fatal(err)
	}
	var reg notify.Registry
	reg.Register(e.events)
	ctrl, err := reconcile.New(reconcile.Options{
		ControllerID: e.id, AppSet: appset.FileSource{Path: file}, AppSetInterval: time.Second,
		Git: git, Notifier: &reg, Logger: logger,
		Destinations: map[string]reconcile.Remote{"": {Engine: e.engine, Live: skepswarm.NewWatcher(e.engine, skepswarm.WatcherOptions{Logger: logger})}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ctrl.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("controller did not stop within 30s of cancel")
		}
	})
	return ctrl
}

// waitStatus waits until app's status satisfies cond and returns it.
func waitStatus(t *testing.T, ctrl *reconcile.Controller, app string, timeout time.Duration, cond func(reconcile.AppStatus) bool) reconcile.AppStatus {
	t.Helper()
	var st reconcile.AppStatus
	harness.Eventually(t, timeout, func(context.Context) (bool, string) {
		st, _ = ctrl.Statuses().Get(app)
		return cond(st), fmt.Sprintf("status: sync %s, health %s (%s), %d/%d running, last error %q",
			st.Sync, st.Health, st.HealthMessage, st.Running, st.Desired, st.LastError)
	})
	return st
}

// services returns the release's live services by short name (web, not
// ns_web), read through a manager that answers.
func (e *env) services(t *testing.T) map[string]swarm.Service {
	t.Helper()
	out := map[string]swarm.Service{}
	harness.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		list, err := e.engine.ServiceList(ctx, swarm.ServiceListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, s := range list {
			if name, ok := strings.CutPrefix(s.Spec.Name, e.ns+"_"); ok {
				out[name] = s
			}
		}
		return true, ""
	})
	return out
}

// perNode counts service's running tasks per node hostname.
func (e *env) perNode(t *testing.T, service swarm.Service) map[string]int {
	t.Helper()
	var got map[string]int
	harness.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		var err error
		got, err = e.cl.TasksPerNode(ctx, service.ID)
		return err == nil, fmt.Sprint(err)
	})
	return got
}

// unwritten reports whether after is before's service with no write since:
// a write changes the spec or, when the spec is the same, sets the previous
// spec. The version index is no measure: Swarm moves it itself as tasks
// come and go.
func unwritten(before, after swarm.Service) bool {
	return after.ID == before.ID && reflect.DeepEqual(after.Spec, before.Spec) && reflect.DeepEqual(after.PreviousSpec, before.PreviousSpec)
}

// sum adds a per-node count up.
func sum(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// digested reports whether an image reference pins a digest.
func digested(image string) bool { return strings.Contains(image, "@sha256:") }

// sample is the application's health at one moment.
type sample struct {
	at               time.Time
	state            health.State
	message          string
	running, desired int
}

func (s sample) String() string {
	return fmt.Sprintf("%s %s %d/%d (%s)", s.at.Format("15:04:05.000"), s.state, s.running, s.desired, s.message)
}

// healthLog records every change of an application's health.
type healthLog struct {
	mu      sync.Mutex
	samples []sample
}

// watchHealth records every change of app's health, polling its status
// every 100ms until the test ends.
func watchHealth(t *testing.T, ctrl *reconcile.Controller, app string) *healthLog {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	l := &healthLog{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			st, _ := ctrl.Statuses().Get(app)
			s := sample{at: time.Now(), state: st.Health, message: st.HealthMessage, running: st.Running, desired: st.Desired}
			l.mu.Lock()
			if n := len(l.samples); n == 0 || l.samples[n-1].state != s.state || l.samples[n-1].message != s.message {
				l.samples = append(l.samples, s)
			}
			l.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return l
}

// settled waits until the last change recorded meets cond and returns
// the number of changes so far. The log samples every 100 ms, so the
// status a test has just read may not be in it yet.
func (l *healthLog) settled(t *testing.T, cond func(sample) bool) int {
	t.Helper()
	n := 0
	harness.Eventually(t, 5*time.Second, func(context.Context) (bool, string) {
		samples := l.all()
		n = len(samples)
		return n > 0 && cond(samples[n-1]), fmt.Sprintf("health changes so far: %v", samples)
	})
	return n
}

// all returns the changes recorded so far, in order.
func (l *healthLog) all() []sample {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sample(nil), l.samples...)
}

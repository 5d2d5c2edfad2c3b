package reconcile_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
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

func (r *recorder) of(t notify.EventType) []notify.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []notify.Event
	for _, e := range r.events {
		if e.Type == t {
			out = append(out, e)
		}
	}
	return out
}

// env is one test's real swarm, git server and controller id.
type env struct {
	cli    *client.Client
	git    *harness.GitServer
	repo   *harness.Repo
	id     string
	ns     string
	v1, v2 string
	events *recorder
	// wrap, when set, wraps the Engine the controller writes and reads
	// through (not its live snapshot's), to count its calls.
	wrap func(reconcile.Engine) reconcile.Engine
	// watch, when set, wraps what the live snapshot reads the swarm
	// through, and watcher tunes the snapshot.
	watch   func(skepswarm.Reader) skepswarm.Reader
	watcher skepswarm.WatcherOptions
	// notifiers are registered beside events.
	notifiers []notify.Notifier
	// maxFileBytes, when set, is the git cache's cap on one file.
	maxFileBytes int64
	// refsMaxAge is the git cache's RefsMaxAge; zero means 500ms.
	refsMaxAge time.Duration
}

func newEnv(t testing.TB) *env {
	t.Helper()
	parallel(t)
	return newSerialEnv(t)
}

// newSerialEnv is newEnv for a test that must run alone in the process.
func newSerialEnv(t testing.TB) *env {
	t.Helper()
	cli := harness.RequireSwarm(t)
	e := &env{
		cli:    cli,
		git:    harness.StartGitServer(t, harness.GitServerOptions{}),
		id:     harness.Name(t, "ctl"),
		ns:     harness.Name(t, "e2e"),
		v1:     harness.TestImage(t, cli, harness.ImageOptions{Version: "v1"}),
		v2:     harness.TestImage(t, cli, harness.ImageOptions{Version: "v2"}),
		events: &recorder{},
	}
	e.repo = e.git.CreateRepo(t, "app")
	harness.CleanupStack(t, cli, e.ns)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		e.events.mu.Lock()
		for _, ev := range e.events.events {
			t.Logf("dump: event %s %s of %s at %.12s: %s", ev.At.Format("15:04:05.000"), ev.Type, ev.Application, ev.Revision, ev.Message)
		}
		e.events.mu.Unlock()
		harness.DumpStack(t, cli, e.ns)
	})
	return e
}

// paralleled holds the tests parallel marked, so a test that builds two
// envs marks itself once.
var paralleled sync.Map

// parallel runs t beside the package's other end-to-end tests (up to
// go test's -parallel at once): each has its own controller id, stack
// prefix, git server and ports, and they wait on the swarm far more than
// they compute. A test that counts the process's goroutines builds its env
// with newSerialEnv instead.
func parallel(t testing.TB) {
	p, ok := t.(interface{ Parallel() })
	if !ok {
		return // a benchmark
	}
	if _, done := paralleled.LoadOrStore(t, true); !done {
		p.Parallel()
	}
}

// compose is a one-service stack on the test image, with a config from a
// file, published in host mode (no IPVS here).
func compose(port uint32) string {
	return fmt.Sprintf(`services:
  web:
    image: ${IMAGE}
    deploy:
      endpoint_mode: dnsrr
      replicas: 1
    ports:
      - target: 8080
        published: %d
        mode: host
    configs:
      - source: settings
        target: /settings.txt
configs:
  settings:
    file: ./settings.txt
`, port)
}

func appSet(apps ...string) string {
	return "apiVersion: skep/v1\napplications:\n" + strings.Join(apps, "")
}

func (e *env) app(name string, automated bool) string {
	return fmt.Sprintf(`  - name: %s
    release: %s
    source:
      repo: %s
      revision: main
    syncPolicy:
      automated: %t
      interval: 10s
      resolveImage: never
`, name, e.ns, e.repo.URL, automated)
}

// bystander is a manual application of another release that deploys
// nothing: what stays in an app set when a test removes its application,
// since an empty set holds every prune.
func (e *env) bystander() string {
	return strings.Replace(e.app("bystander", false), "    release: "+e.ns+"\n", "    release: "+e.ns+"-bystander\n", 1)
}

func (e *env) controller(t testing.TB, source appset.Source) *reconcile.Controller {
	t.Helper()
	return e.controllerWith(t, source, reconcile.Options{})
}

// controllerWith builds a controller like the binary does, with the live
// snapshot of the local swarm, taking PruneApplications, OwnStack, Charts,
// Now, Observer, Self, the named Destinations and CheckAddress from opts.
func (e *env) controllerWith(t testing.TB, source appset.Source, opts reconcile.Options) *reconcile.Controller {
	t.Helper()
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	git, err := gitsource.New(gitsource.Options{Dir: t.TempDir(), Logger: logger, RefsMaxAge: cmp.Or(e.refsMaxAge, 500*time.Millisecond), MaxFileBytes: e.maxFileBytes})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := skepswarm.Connect(t.Context(), skepswarm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close() })
	var reg notify.Registry
	reg.Register(e.events)
	for _, n := range e.notifiers {
		reg.Register(n)
	}
	var eng reconcile.Engine = engine
	if e.wrap != nil {
		eng = e.wrap(engine)
	}
	dests := maps.Clone(opts.Destinations)
	if dests == nil {
		dests = map[string]reconcile.Remote{}
	}
	dests[""] = reconcile.Remote{Engine: eng, Live: e.newWatcher(engine, logger)}
	ctrl, err := reconcile.New(reconcile.Options{
		ControllerID: e.id, AppSet: source, AppSetInterval: time.Second,
		Git: git, Destinations: dests, Notifier: &reg, Logger: logger,
		PruneApplications: opts.PruneApplications, OwnStack: opts.OwnStack, Charts: opts.Charts, Now: opts.Now, Observer: opts.Observer,
		Self: opts.Self, CheckAddress: opts.CheckAddress,
	})
	if err != nil {
		t.Fatal(err)
	}
	return ctrl
}

// newWatcher is the live snapshot of engine, read through e.watch and tuned
// by e.watcher when they are set.
func (e *env) newWatcher(engine *skepswarm.Client, logger *slog.Logger) *skepswarm.Watcher {
	var r skepswarm.Reader = engine
	if e.watch != nil {
		r = e.watch(engine)
	}
	opts := e.watcher
	opts.Logger = logger
	return skepswarm.NewWatcher(r, opts)
}

// run starts ctrl and stops it, checking that Run returned, when the test ends.
func run(t testing.TB, ctrl *reconcile.Controller) {
	t.Helper()
	runStoppable(t, ctrl)
}

// runStoppable starts ctrl and returns what stops it and checks that Run
// returned; the test's end stops it too.
func runStoppable(t testing.TB, ctrl *reconcile.Controller) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ctrl.Run(ctx)
	}()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("controller did not stop within 30s of cancel")
		}
	}
	t.Cleanup(stop)
	return stop
}

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// service returns the live service of the test's release, or nil.
func (e *env) service(ctx context.Context, name string) (*swarm.Service, error) {
	return harness.ServiceNamed(ctx, e.cli, e.ns+"_"+name)
}

// unwritten reports whether after is before's service with no write since:
// a write changes the spec or, when the spec is the same, sets the previous
// spec. The version index is no measure: Swarm moves it itself as a new
// service's status settles.
func unwritten(before, after *swarm.Service) bool {
	return before != nil && after != nil && after.ID == before.ID &&
		reflect.DeepEqual(after.Spec, before.Spec) && reflect.DeepEqual(after.PreviousSpec, before.PreviousSpec)
}

func (e *env) waitImage(t *testing.T, image string, timeout time.Duration) *swarm.Service {
	t.Helper()
	var got *swarm.Service
	harness.Eventually(t, timeout, func(ctx context.Context) (bool, string) {
		s, err := e.service(ctx, "web")
		if err != nil || s == nil {
			return false, fmt.Sprintf("service %s_web: %v (absent)", e.ns, err)
		}
		got = s
		img := s.Spec.TaskTemplate.ContainerSpec.Image
		return img == image, "image is " + img
	})
	return got
}

// waitPruneChecks waits until ctrl has looked for releases to prune n
// times from now.
func waitPruneChecks(t testing.TB, ctrl *reconcile.Controller, n int) {
	t.Helper()
	for range n {
		seen := ctrl.Statuses().PruneChecked()
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			return ctrl.Statuses().PruneChecked().After(seen), "no prune check yet"
		})
	}
}

func waitStatus(t testing.TB, ctrl *reconcile.Controller, app string, timeout time.Duration, cond func(reconcile.AppStatus) bool) reconcile.AppStatus {
	t.Helper()
	var st reconcile.AppStatus
	harness.Eventually(t, timeout, func(context.Context) (bool, string) {
		st, _ = ctrl.Statuses().Get(app)
		return cond(st), fmt.Sprintf("status %+v", st)
	})
	return st
}

func TestAutomatedAppDeploysAndFollowsAnImageCommit(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.app("web", true)))})
	run(t, ctrl)

	svc := e.waitImage(t, e.v1, 2*time.Minute)
	harness.WaitRunning(t, e.cli, svc.ID, 1, 2*time.Minute)
	if body := harness.HTTPGet(t, fmt.Sprintf("http://127.0.0.1:%d/", port), time.Minute); !strings.Contains(body, `"v1"`) {
		t.Fatalf("v1 service answered %s", body)
	}
	for k, want := range map[string]string{"io.skep.controller": e.id, "io.skep.application": "web", "io.skep.release": e.ns} {
		if got := svc.Spec.Labels[k]; got != want {
			t.Errorf("service label %s = %q, want %q", k, got, want)
		}
	}

	second := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
	e.waitImage(t, e.v2, 40*time.Second) // one interval (10s) plus the ref cache
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		body := harness.HTTPGet(t, fmt.Sprintf("http://127.0.0.1:%d/", port), time.Minute)
		return strings.Contains(body, `"v2"`), "answered " + body
	})
	st := waitStatus(t, ctrl, "web", 30*time.Second, func(s reconcile.AppStatus) bool { return s.DeployedRevision == second })
	if st.Sync != reconcile.Synced {
		t.Errorf("status after sync = %+v, want synced", st)
	}
	if got := e.events.of(notify.SyncSucceeded); len(got) < 2 || got[len(got)-1].Revision != second || got[len(got)-1].Actor != "" {
		t.Errorf("sync-succeeded events = %+v, want the last for %s with no actor", got, second)
	}
}

func TestManualAppReportsOutOfSyncAndWaitsForSync(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	first := e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.app("web", false)))})
	run(t, ctrl)

	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Sync == reconcile.OutOfSync })
	if st.Revision != first || len(st.Plan) != 1 || !strings.Contains(st.Plan[0], "install") {
		t.Errorf("manual app status = %+v, want out-of-sync at %s with an install plan", st, first)
	}
	if s, err := e.service(t.Context(), "web"); err != nil || s != nil {
		t.Fatalf("manual app created its service before any sync: %v %v", s, err)
	}
	if got := e.events.of(notify.DriftDetected); len(got) != 1 || got[0].Revision != first {
		t.Errorf("drift-detected events = %+v, want one for %s", got, first)
	} else if msg := got[0].Message; !strings.Contains(msg, "1 service to create") || strings.Contains(msg, "created") {
		// Nothing was written: the event says what a sync would change.
		t.Errorf("drift-detected message = %q, want what would change (\"1 service to create\"), not what was done", msg)
	}

	if err := ctrl.SyncNow("web", "alice"); err != nil {
		t.Fatal(err)
	}
	svc := e.waitImage(t, e.v1, time.Minute)
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Sync == reconcile.Synced })
	if got := e.events.of(notify.SyncSucceeded); len(got) != 1 || got[0].Actor != "alice" {
		t.Errorf("sync-succeeded events = %+v, want one by alice", got)
	}

	second := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
	st = waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Revision == second })
	if st.Sync != reconcile.OutOfSync || !strings.Contains(strings.Join(st.Plan, " "), "image") {
		t.Errorf("after a commit, manual status = %+v, want out-of-sync naming the image", st)
	}
	live, err := e.service(t.Context(), "web")
	if err != nil || live == nil {
		t.Fatal(err)
	}
	if !unwritten(svc, live) || live.Spec.TaskTemplate.ContainerSpec.Image != e.v1 {
		t.Errorf("manual app changed its service before a sync: %v → %v, image %s",
			svc.Version, live.Version, live.Spec.TaskTemplate.ContainerSpec.Image)
	}
	plan, err := ctrl.Plan(t.Context(), "web", "")
	if err != nil {
		t.Fatal(err)
	}
	var diff strings.Builder
	for _, c := range plan.Plan.Changes {
		for _, f := range c.Fields {
			fmt.Fprintf(&diff, "%s %s: %s → %s\n", c.Name, f.Path, f.Old, f.New)
		}
	}
	if !strings.Contains(diff.String(), e.v1) || !strings.Contains(diff.String(), e.v2) {
		t.Errorf("plan diff does not show %s → %s:\n%s", e.v1, e.v2, diff.String())
	}
}

func TestBadCommitFailsWithFileAndLineAndTheNextGoodOneRecovers(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.app("web", true)))})
	run(t, ctrl)
	before := e.waitImage(t, e.v1, 2*time.Minute)

	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{name: "invalid yaml names file and line", files: map[string]string{"compose.yaml": "services:\n  web:\n    image: [unclosed\n"}, want: "compose.yaml"},
		{name: "unknown compose key names the key", files: map[string]string{"compose.yaml": strings.Replace(compose(port), "    image:", "    imagez: x\n    image:", 1)}, want: "imagez"},
		{name: "refused host path names the field", files: map[string]string{"compose.yaml": strings.Replace(compose(port), "    configs:\n      - source", "    volumes:\n      - /etc:/host-etc\n    configs:\n      - source", 1)}, want: "/etc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := e.repo.Commit(t, "main", tc.files)
			st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
				return s.Revision == bad && s.LastError != ""
			})
			if !strings.Contains(st.LastError, tc.want) || st.LastErrorClass != "stalled" {
				t.Errorf("error = %q (%s), want a stalled error naming %q", st.LastError, st.LastErrorClass, tc.want)
			}
			live, err := e.service(t.Context(), "web")
			if err != nil || !unwritten(before, live) {
				t.Errorf("a bad commit touched the swarm: %v, %v", live, err)
			}
			e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port)})
		})
	}
	good := e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), ".env": "IMAGE=" + e.v2 + "\n"})
	e.waitImage(t, e.v2, time.Minute)
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.DeployedRevision == good && s.LastError == "" })
}

func TestAppSetCommitAddsAnAppAndAnInvalidSetKeepsTheOldOne(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	sets := e.git.CreateRepo(t, "appset")
	sets.Commit(t, "main", map[string]string{"apps/applications.yaml": appSet()})
	git, err := gitsource.New(gitsource.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctrl := e.controller(t, reconcile.GitAppSet{Git: git, Repo: sets.URL, Revision: "main", Path: "apps"})
	run(t, ctrl)
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		return ctrl.Loaded(), "app set not loaded"
	})

	added := sets.Commit(t, "main", map[string]string{"apps/applications.yaml": appSet(e.app("web", true))})
	e.waitImage(t, e.v1, 2*time.Minute)
	if st := ctrl.Statuses().AppSet(); st.Revision != added || st.Stale {
		t.Errorf("app-set status = %+v, want revision %s, not stale", st, added)
	}

	broken := sets.Commit(t, "main", map[string]string{"apps/applications.yaml": appSet(e.app("web", true)) + "    syncPolicy: {interval: often}\n"})
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		st := ctrl.Statuses().AppSet()
		return st.Stale && st.Error != "", fmt.Sprintf("app-set status %+v", st)
	})
	st := ctrl.Statuses().AppSet()
	if st.Revision != added || !strings.Contains(st.Error, "applications.yaml:") {
		t.Errorf("after the invalid commit %s, app-set status = %+v, want the old revision kept and the file named", broken, st)
	}
	if _, ok := ctrl.Statuses().Get("web"); !ok {
		t.Error("the running application was dropped by an invalid app set")
	}
	if s, err := e.service(t.Context(), "web"); err != nil || s == nil {
		t.Errorf("service gone after an invalid app set: %v", err)
	}
}

func TestRestartWithAnEmptyDataDirectoryIsANoOp(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	commit := e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	apps := appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.app("web", true)))}

	first := e.controller(t, apps)
	if _, err := first.LoadAppSet(t.Context()); err != nil {
		t.Fatal(err)
	}
	out, err := first.ReconcileOnce(t.Context(), "web", reconcile.Request{Sync: true})
	if err != nil || !out.Applied || out.Applying.Revision != 1 {
		t.Fatalf("first deploy = %+v, %v; want revision 1 applied", out.Applying, err)
	}
	before, err := e.service(t.Context(), "web")
	if err != nil || before == nil {
		t.Fatal(err)
	}

	second := e.controller(t, apps) // new git cache directory: an empty disk
	if _, err := second.LoadAppSet(t.Context()); err != nil {
		t.Fatal(err)
	}
	out, err = second.ReconcileOnce(t.Context(), "web", reconcile.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Plan.Changed() || out.Applied || out.Recorded == nil || out.Recorded.Commit != commit {
		t.Errorf("restarted controller: plan %s, applied %v, recorded %+v; want unchanged against revision of %s",
			out.Plan.Summary(), out.Applied, out.Recorded, commit)
	}
	after, err := e.service(t.Context(), "web")
	if err != nil || !unwritten(before, after) {
		t.Errorf("restart wrote to the service: %v → %v", before, after)
	}
}

// A release name squatted by a service Skep did not create is refused once
// (one sync-started, one sync-failed), not on every tick, until git or the
// swarm changes.
func TestForeignReleaseIsRefusedOnceNotEveryTick(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	one := uint64(1)
	spec := swarm.ServiceSpec{Annotations: swarm.Annotations{Name: e.ns + "_web"},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &one}},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: e.v1}},
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR}}
	if _, err := e.cli.ServiceCreate(t.Context(), spec, swarm.ServiceCreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.app("web", true)))})
	run(t, ctrl)
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.LastErrorClass == "stalled" })
	if !strings.Contains(st.LastError, "not created by skep") {
		t.Errorf("status error = %q, want the foreign service named", st.LastError)
	}
	// Two more intervals (10s each) pass without a change.
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
		return s.LastReconcile.After(st.LastReconcile.Add(21 * time.Second))
	})
	if n, m := len(e.events.of(notify.SyncStarted)), len(e.events.of(notify.SyncFailed)); n != 1 || m != 1 {
		t.Errorf("sync-started %d, sync-failed %d over three ticks, want one of each", n, m)
	}
	if st, _ := ctrl.Statuses().Get("web"); st.LastErrorClass != "stalled" || !strings.Contains(st.LastError, "not created by skep") {
		t.Errorf("status after the quiet ticks = %q (%s), want the refusal still shown", st.LastError, st.LastErrorClass)
	}
}

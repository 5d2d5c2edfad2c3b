package bench

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/wire"
)

// Options configure Run. The zero value means all defaults, except Binary.
type Options struct {
	// Binary is the skep binary measured; required.
	Binary string
	// Samples is how many times each sampled measurement (webhook, polling,
	// out-of-band correction) is taken; its median is reported. Default 10.
	Samples int
	// Idle is the length of each idle window. Default 5m, the period the
	// issue's idle CPU target is per.
	Idle time.Duration
	// Scale is the number of applications (replicas 0) of the larger
	// scale point. Default 200; negative skips it.
	Scale int
	// ScaleServices is the number of services of each application of the
	// larger scale point. Default 1; the memory bound is for 10.
	ScaleServices int
	// ScaleRepos is the number of repositories the larger scale point's
	// applications are spread over, round robin, one directory each.
	// Default 1: the git server's load stays off the machine.
	ScaleRepos int
	// ScaleOnly measures the larger scale point alone: none of the 20
	// applications' measurements, whose 60 running containers' health
	// checks a small machine may not keep up with.
	ScaleOnly bool
	// DeployOnly measures Skep's first deploy of the 20 applications alone,
	// Samples times, each into stacks of its own: the one number of the
	// table that a single sample leaves to the machine's mood.
	DeployOnly bool
	// IdleOnly measures the 20 applications' idle window alone, Samples
	// windows one after the other on one controller: idle CPU moves from
	// one window to the next by more than a target's margin.
	IdleOnly bool
	// PollOnly measures polling at the interval floor alone, Samples
	// pushes, on the 20 applications deployed and settled: the row whose
	// median moves most with how the pushes' phases fell.
	PollOnly bool
	// WebhookOnly measures the webhook push against `docker stack deploy`
	// alone, Samples pushes each, on the 20 applications deployed and
	// settled and application 1's docker twin.
	WebhookOnly bool
	// FailoverOnly measures the take-overs of a replicated controller
	// alone: Samples kills, freezes and stops of its leader each.
	FailoverOnly bool
	// ControllerLogLevel is the controller's --log-level. Default info.
	ControllerLogLevel string
	// GoResults names a file of `go test -bench` output whose results for
	// render, convert and plan, live drift and the event fan-out join the
	// table. Empty leaves them out.
	GoResults string
	// Log receives progress. Default slog.Default().
	Log *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Samples <= 0 {
		o.Samples = 10
	}
	if o.Idle <= 0 {
		o.Idle = 5 * time.Minute
	}
	if o.Scale == 0 {
		o.Scale = 200
	}
	if o.ScaleServices <= 0 {
		o.ScaleServices = 1
	}
	if o.ScaleRepos <= 0 {
		o.ScaleRepos = 1
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o
}

const (
	// smallApps is the first scale point: 20 applications, the first half
	// with two services, 30 services in all.
	smallApps = 20
	// interval is every application's sync interval but the polling one's.
	interval = 30 * time.Second
	// pollInterval is the shortest interval the app set allows.
	pollInterval = 10 * time.Second
)

// env is what one Run shares between its measurements.
type env struct {
	tb     testing.TB
	cli    *client.Client // the real Engine, never counted
	opts   Options
	log    *slog.Logger
	docker string // the docker CLI
	image  string
	git    *harness.GitServer
	// gitProxy counts the controller's git requests; applications name
	// their repositories by its URL.
	gitProxy *Proxy
	proxy    *Proxy
	watch    *Watch
	prefix   string // every stack's name starts with it
	rev      int    // the last BENCH_REV committed or deployed
}

// Run measures everything once on cli's swarm and returns the report. It
// fails tb when a part cannot be set up or a step does not happen within
// its timeout. Everything it creates is removed by the time tb ends.
func Run(tb testing.TB, cli *client.Client, opts Options) *Report {
	tb.Helper()
	opts = opts.withDefaults()
	if opts.Binary == "" {
		tb.Fatal("bench: no skep binary given")
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		tb.Fatalf("bench: the docker CLI is needed for the docker stack deploy side: %v", err)
	}
	prefix := harness.Name(tb, "skb")
	git := harness.StartGitServer(tb, harness.GitServerOptions{})
	e := &env{
		tb: tb, cli: cli, opts: opts, log: opts.Log, docker: docker,
		image:    harness.TestImage(tb, cli, harness.ImageOptions{}),
		git:      git,
		gitProxy: StartGitProxy(tb, git.URL),
		proxy:    StartProxy(tb, EngineSocket(tb)),
		watch:    WatchServices(tb, cli, prefix),
		prefix:   prefix,
	}
	r := &Report{Samples: opts.Samples, CPUs: runtime.NumCPU(), LoadStart: loadAverage()}
	switch {
	case opts.DeployOnly:
		e.firstDeploys(r)
	case opts.IdleOnly:
		e.idleWindows(r)
	case opts.PollOnly:
		e.pollingAlone(r)
	case opts.WebhookOnly:
		e.webhookAlone(r)
	case opts.FailoverOnly:
		e.failovers(r)
	case !opts.ScaleOnly:
		e.small(r)
	}
	alone := opts.DeployOnly || opts.IdleOnly || opts.PollOnly || opts.WebhookOnly || opts.FailoverOnly
	if opts.Scale > 0 && !alone {
		e.large(r)
	}
	if !alone && !opts.ScaleOnly {
		e.failovers(r)
	}
	if opts.GoResults != "" {
		r.Go = readGoResults(tb, opts.GoResults)
	}
	r.LoadEnd = loadAverage()
	return r
}

// EngineSocket is the path of the Engine's unix socket: DOCKER_HOST's, or
// the default.
func EngineSocket(tb testing.TB) string {
	tb.Helper()
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		return "/var/run/docker.sock"
	}
	path, ok := strings.CutPrefix(host, "unix://")
	if !ok {
		tb.Fatalf("bench: DOCKER_HOST=%s; the counting proxy needs a unix socket", host)
	}
	return path
}

// small runs every measurement at 20 applications, Skep and its docker
// twins side by side.
func (e *env) small(r *Report) {
	ctx := e.tb.Context()
	apps := e.smallSet("")
	dir := e.tb.TempDir()

	e.log.Info("first deploy with docker stack deploy", "stacks", len(apps), "services", len(serviceNames(apps, true)))
	files := make([]string, len(apps))
	for i, a := range apps {
		files[i] = filepath.Join(dir, a.docker+".yaml")
		e.writeFile(files[i], compose(a, e.image, 0))
	}
	before := e.proxy.Counts()
	start := time.Now()
	// One after the other, as a deploy script runs them.
	for i, a := range apps {
		e.stackDeploy(ctx, files[i], a.docker)
	}
	r.DockerDeploy = e.waitDeployed(ctx, serviceNames(apps, true), start)
	r.DockerDeploy.Requests = e.proxy.Counts().Since(before)
	// The first twin stays for the webhook comparison; the others would
	// only load the machine.
	var twins []string
	for _, a := range apps[1:] {
		twins = append(twins, a.docker)
	}
	e.removeStacks(ctx, twins...)

	e.log.Info("first deploy with skep", "applications", len(apps))
	appsFile := e.pushApps(dir, apps)
	before = e.proxy.Counts()
	ctrl := e.startController(dir, appsFile)
	r.Deploy = e.waitDeployed(ctx, serviceNames(apps, false), ctrl.Started)
	r.Deploy.Requests = e.proxy.Counts().Since(before)
	e.settle(ctx, ctrl, len(apps))

	e.log.Info("idle", "applications", len(apps), "window", e.opts.Idle)
	r.SmallIdle = e.idle(ctrl, len(apps))

	e.log.Info("webhook push against docker stack deploy", "samples", e.opts.Samples)
	r.Webhook, r.DockerWebhook = e.webhook(ctx, ctrl, apps[0], files[0])

	e.log.Info("out-of-band scale corrected", "samples", e.opts.Samples)
	r.Correction, r.Others, r.OthersByTicks = e.outOfBand(ctx, ctrl, apps, 1)

	e.log.Info("polling at the interval floor", "samples", e.opts.Samples)
	r.Polling = e.polling(ctx, ctrl, apps, appsFile)

	ctrl.Stop(e.tb)
	e.removeStacks(ctx, append([]string{apps[0].docker}, releases(apps)...)...)
}

// smallSet is the 20 applications, the first half with two services,
// their releases and docker twins named with tag, cleaned up when tb ends.
func (e *env) smallSet(tag string) []app {
	apps := make([]app, smallApps)
	for i := range apps {
		services := []string{"web"}
		if i < smallApps/2 {
			services = append(services, "worker")
		}
		apps[i] = app{name: fmt.Sprintf("%sapp%02d", tag, i+1), release: fmt.Sprintf("%s-%ss%02d", e.prefix, tag, i+1),
			docker: fmt.Sprintf("%s-%sd%02d", e.prefix, tag, i+1), services: services, replicas: 1, interval: interval.String(), calmHealthcheck: true}
		harness.CleanupStack(e.tb, e.cli, apps[i].release)
		harness.CleanupStack(e.tb, e.cli, apps[i].docker)
	}
	return apps
}

// pushApps gives each application a repository holding its compose file
// and writes their app set into dir; it returns the app set's path.
func (e *env) pushApps(dir string, apps []app) string {
	for i := range apps {
		apps[i].repo = e.git.CreateRepo(e.tb, apps[i].name)
		apps[i].repo.Commit(e.tb, "main", map[string]string{"compose.yaml": compose(apps[i], e.image, 0)})
		apps[i].repoURL = e.repoURL(apps[i].repo)
	}
	appsFile := filepath.Join(dir, "apps.yaml")
	e.writeFile(appsFile, appSet(apps))
	return appsFile
}

// firstDeploys times Skep's first deploy of the 20 applications, from the
// controller's start until the Engine's create event of the last service,
// Samples times; each sample deploys stacks and repositories of its own
// and removes them before the next.
func (e *env) firstDeploys(r *Report) {
	ctx := e.tb.Context()
	for k := range e.opts.Samples {
		apps := e.smallSet(fmt.Sprintf("f%d", k+1))
		dir := e.tb.TempDir()
		appsFile := e.pushApps(dir, apps)
		ctrl := e.startController(dir, appsFile)
		took := e.waitExist(ctx, serviceNames(apps, false), ctrl.Started)
		r.FirstDeploys = append(r.FirstDeploys, took)
		e.log.Info("first deploy", "sample", k+1, "every_service_exists", took)
		ctrl.Stop(e.tb)
		e.removeStacks(ctx, releases(apps)...)
	}
}

// idleWindows measures, on the 20 applications deployed by Skep alone
// and settled, Samples idle windows one after the other; the window of
// median CPU stands as SmallIdle.
func (e *env) idleWindows(r *Report) {
	e.onSettledSmallSet(func(ctrl *Controller, apps []app, _ string) {
		for k := range e.opts.Samples {
			e.log.Info("idle", "applications", len(apps), "window", e.opts.Idle, "sample", k+1)
			r.IdleWindows = append(r.IdleWindows, e.idle(ctrl, len(apps)))
		}
	})
	byCPU := slices.Clone(r.IdleWindows)
	slices.SortFunc(byCPU, func(a, b Idle) int { return cmp.Compare(a.CPU, b.CPU) })
	r.SmallIdle = byCPU[len(byCPU)/2]
}

// pollingAlone measures polling on the 20 applications deployed by Skep
// alone and settled.
func (e *env) pollingAlone(r *Report) {
	e.onSettledSmallSet(func(ctrl *Controller, apps []app, appsFile string) {
		e.log.Info("polling at the interval floor", "samples", e.opts.Samples)
		r.Polling = e.polling(e.tb.Context(), ctrl, apps, appsFile)
	})
}

// webhookAlone measures the webhook push against `docker stack deploy`
// on the 20 applications deployed by Skep alone and settled, and
// application 1's docker twin.
func (e *env) webhookAlone(r *Report) {
	e.onSettledSmallSet(func(ctrl *Controller, apps []app, _ string) {
		ctx := e.tb.Context()
		file := filepath.Join(e.tb.TempDir(), apps[0].docker+".yaml")
		e.writeFile(file, compose(apps[0], e.image, e.rev))
		start := time.Now()
		e.stackDeploy(ctx, file, apps[0].docker)
		e.waitDeployed(ctx, serviceNames(apps[:1], true), start)
		e.log.Info("webhook push against docker stack deploy", "samples", e.opts.Samples)
		r.Webhook, r.DockerWebhook = e.webhook(ctx, ctrl, apps[0], file)
		e.removeStacks(ctx, apps[0].docker)
	})
}

// onSettledSmallSet deploys the 20 applications with Skep alone, lets
// them settle, runs measure, then stops the controller and removes the
// stacks.
func (e *env) onSettledSmallSet(measure func(ctrl *Controller, apps []app, appsFile string)) {
	ctx := e.tb.Context()
	apps := e.smallSet("")
	dir := e.tb.TempDir()
	appsFile := e.pushApps(dir, apps)
	ctrl := e.startController(dir, appsFile)
	// Not reported: Options.DeployOnly measures the deploy, without the
	// running containers of earlier samples.
	e.waitDeployed(ctx, serviceNames(apps, false), ctrl.Started)
	e.settle(ctx, ctrl, len(apps))
	measure(ctrl, apps, appsFile)
	ctrl.Stop(e.tb)
	e.removeStacks(ctx, releases(apps)...)
}

// releases names the stacks Skep deploys for apps.
func releases(apps []app) []string {
	out := make([]string, len(apps))
	for i, a := range apps {
		out[i] = a.release
	}
	return out
}

// large measures idle cost and memory at opts.Scale applications of
// opts.ScaleServices services each at replicas 0, spread over
// opts.ScaleRepos repositories (one directory each): by default one, so
// that the git server's load stays off the machine.
func (e *env) large(r *Report) {
	ctx := e.tb.Context()
	n := e.opts.Scale
	services := []string{"web"}
	for k := 2; k <= e.opts.ScaleServices; k++ {
		services = append(services, fmt.Sprintf("s%d", k))
	}
	apps := make([]app, n)
	files := make([]map[string]string, e.opts.ScaleRepos)
	for k := range files {
		files[k] = map[string]string{}
	}
	for i := range apps {
		apps[i] = app{name: fmt.Sprintf("scale%04d", i+1), release: fmt.Sprintf("%s-l%04d", e.prefix, i+1),
			services: services, replicas: 0, interval: interval.String(), resolveNever: true}
		apps[i].path = "apps/" + apps[i].name
		files[i%len(files)][apps[i].path+"/compose.yaml"] = compose(apps[i], e.image, 0)
		harness.CleanupStack(e.tb, e.cli, apps[i].release)
	}
	for k := range files {
		name := "scale"
		if len(files) > 1 {
			name = fmt.Sprintf("scale%02d", k+1)
		}
		repo := e.git.CreateRepo(e.tb, name)
		repo.Commit(e.tb, "main", files[k])
		for i := k; i < len(apps); i += len(files) {
			apps[i].repoURL = e.repoURL(repo)
		}
	}
	dir := e.tb.TempDir()
	appsFile := filepath.Join(dir, "apps.yaml")
	e.writeFile(appsFile, appSet(apps))

	e.log.Info("scale point", "applications", n, "services_each", len(services), "repositories", len(files))
	ctrl := e.startController(dir, appsFile)
	last, err := e.created(ctx, serviceNames(apps, false), 10*time.Minute)
	if err != nil {
		e.tb.Fatalf("scale point: %v", err)
	}
	r.ScaleDeploy = last.Sub(ctrl.Started)
	e.settle(ctx, ctrl, n)
	e.log.Info("idle", "applications", n, "window", e.opts.Idle)
	r.LargeIdle = e.idle(ctrl, n)
	r.LargeIdle.Services = len(services)
	ctrl.Stop(e.tb)
	stacks := make([]string, len(apps))
	for i, a := range apps {
		stacks[i] = a.release
	}
	e.removeStacks(ctx, stacks...)
}

// created waits until every named service exists and returns when the
// last was created, as the manager recorded it. It lists rather than
// waits for events: the Engine drops events a subscriber does not take
// within 100 ms, and thousands of creates a minute outrun the bench's.
func (e *env) created(ctx context.Context, names []string, timeout time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for {
		services, err := e.cli.ServiceList(ctx, swarm.ServiceListOptions{Filters: filters.NewArgs(filters.Arg("name", e.prefix))})
		if err != nil && ctx.Err() == nil {
			e.log.Warn("services not listed", "err", err) // a busy manager: ask again
		}
		var last time.Time
		found := 0
		for _, s := range services {
			if want[s.Spec.Name] {
				found++
				last = later(last, s.CreatedAt)
			}
		}
		if found == len(want) {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%d of %d services exist after %s", found, len(want), timeout)
		case <-time.After(2 * time.Second):
		}
	}
}

// repoURL is repo's address through the counting git proxy.
func (e *env) repoURL(repo *harness.Repo) string {
	return e.gitProxy.URL + "/" + repo.Name + ".git"
}

func (e *env) startController(dir, appsFile string) *Controller {
	return StartController(e.tb, ControllerOptions{Binary: e.opts.Binary, Dir: dir, AppSet: appsFile,
		ID: e.prefix + "-" + filepath.Base(dir), DockerHost: "unix://" + e.proxy.Socket, LogLevel: e.opts.ControllerLogLevel})
}

// waitDeployed waits until every named service exists and runs a task,
// and returns how long each took from start. Existence is timed by the
// Engine's create events; running by polling the tasks every 100 ms.
func (e *env) waitDeployed(ctx context.Context, services []string, start time.Time) Deploy {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	exist := e.waitExist(ctx, services, start)
	want := map[string]bool{}
	for _, s := range services {
		want[s] = true
	}
	for {
		running, err := e.runningServices(ctx)
		if err != nil {
			e.tb.Fatalf("first deploy: %v", err)
		}
		all := true
		for s := range want {
			all = all && running[s]
		}
		if all {
			return Deploy{Exist: exist, Running: time.Since(start)}
		}
		select {
		case <-ctx.Done():
			e.tb.Fatalf("first deploy: tasks not running within 5 minutes")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitExist waits, up to 5 minutes, for the Engine's create event of
// every named service and returns how long after start the last came.
func (e *env) waitExist(ctx context.Context, services []string, start time.Time) time.Duration {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var exist time.Time
	for _, name := range services {
		ev, err := e.watch.Next(ctx, name, start, Created)
		if err != nil {
			e.tb.Fatalf("first deploy: %v", err)
		}
		exist = later(exist, ev.At)
	}
	return exist.Sub(start)
}

// runningServices returns the names of this run's services with a task
// in state running.
func (e *env) runningServices(ctx context.Context) (map[string]bool, error) {
	services, err := e.cli.ServiceList(ctx, swarm.ServiceListOptions{Filters: filters.NewArgs(filters.Arg("name", e.prefix))})
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for _, s := range services {
		names[s.ID] = s.Spec.Name
	}
	tasks, err := e.cli.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("desired-state", "running"))})
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, t := range tasks {
		if name, ok := names[t.ServiceID]; ok && t.Status.State == swarm.TaskStateRunning {
			out[name] = true
		}
	}
	return out, nil
}

// settle waits until the API reports every application synced, healthy
// and idle, then until the controller made no Engine write for 10 s, and
// then until no tick rendered for an interval, so that an idle window
// starts at rest.
func (e *env) settle(ctx context.Context, ctrl *Controller, n int) {
	// Each phase has its own 10 minutes and says when it ended, so that a
	// slow settle tells what it waited for.
	phase := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 10*time.Minute) }
	start := time.Now()
	ctx1, cancel1 := phase()
	defer cancel1()
	why := "not asked yet"
	for {
		apps, err := ctrl.Applications(ctx1)
		if err != nil {
			why = err.Error()
		} else if why = restless(apps, n); why == "" {
			break
		}
		select {
		case <-ctx1.Done():
			e.tb.Fatalf("applications did not settle: %s", why)
		case <-time.After(time.Second):
		}
	}
	e.log.Info("settle: every application synced, healthy and idle", "after", time.Since(start).Round(time.Second))
	ctx2, cancel2 := phase()
	defer cancel2()
	writes, quietSince := e.proxy.Counts().Writes(), time.Now()
	for time.Since(quietSince) < 10*time.Second {
		select {
		case <-ctx2.Done():
			e.tb.Fatalf("the controller kept writing to the Engine")
		case <-time.After(time.Second):
		}
		if w := e.proxy.Counts().Writes(); w != writes {
			writes, quietSince = w, time.Now()
		}
	}
	e.log.Info("settle: no Engine write for 10 s", "after", time.Since(start).Round(time.Second))
	ctx3, cancel3 := phase()
	defer cancel3()
	// At rest every tick is quiet. The tick after a deploy renders still:
	// it is the first to find nothing to do, which the next one then
	// reuses. A whole interval without a render means every application
	// has been there; the idle window measures what follows.
	//
	// A scrape taken while ticks end may count some in
	// skep_reconcile_total and not yet in skep_reconcile_quiet_total, or
	// the other way round: at 1,000 applications, 30 ticks a second, most
	// scrapes did, and the count never held still for an interval. Those
	// ticks move one scrape by a few; renders move every later one, and
	// any that keep coming soon move it by more than that.
	slack := float64(1 + n/250)
	renders, err := ctrl.Renders(ctx3)
	if err != nil {
		e.tb.Fatal(err)
	}
	quietSince = time.Now()
	for time.Since(quietSince) < interval+5*time.Second {
		select {
		case <-ctx3.Done():
			e.tb.Fatalf("ticks kept rendering: %.0f renders", renders)
		case <-time.After(time.Second):
		}
		r, err := ctrl.Renders(ctx3)
		if err != nil {
			e.tb.Fatal(err)
		}
		if math.Abs(r-renders) > slack {
			renders, quietSince = r, time.Now()
		}
	}
	e.log.Info("settle: no tick rendered for an interval", "after", time.Since(start).Round(time.Second))
}

// restless says why apps are not all at rest, or "" when they are.
func restless(apps []wire.Application, n int) string {
	if len(apps) != n {
		return fmt.Sprintf("%d of %d applications loaded", len(apps), n)
	}
	for _, a := range apps {
		if a.Sync != "synced" || a.Health != "healthy" || a.Phase != wire.PhaseIdle {
			return fmt.Sprintf("application %s is %s, %s, %s %s", a.Name, a.Sync, a.Health, a.Phase, a.LastError)
		}
	}
	return ""
}

// idle measures one idle window: nothing changes in git or the swarm, and
// nothing asks the API.
func (e *env) idle(ctrl *Controller, apps int) Idle {
	counts, git, cpu, start := e.proxy.Counts(), e.gitProxy.Counts(), ctrl.CPU(e.tb), time.Now()
	ours, others := e.watch.Counted()
	select {
	case <-e.tb.Context().Done():
		e.tb.Fatal("cancelled")
	case <-time.After(e.opts.Idle):
	}
	out := Idle{Apps: apps, Window: time.Since(start), Requests: e.proxy.Counts().Since(counts),
		Git: e.gitProxy.Counts().Since(git), CPU: ctrl.CPU(e.tb) - cpu, RSS: ctrl.RSS(e.tb)}
	out.RSSAnon, out.RSSFile = ctrl.RSSParts(e.tb)
	out.PeakRSS = ctrl.PeakRSS(e.tb)
	heap, err := ctrl.HeapInUse(e.tb.Context())
	if err != nil {
		e.tb.Fatal(err)
	}
	out.HeapInUse = heap
	ours2, others2 := e.watch.Counted()
	out.Events, out.OtherEvents = ours2.Since(ours), others2.Since(others)
	e.log.Info("idle measured", "applications", apps, "requests", out.Requests.String(), "git", out.Git.String(), "cpu", out.CPU, "rss_mib", out.RSS>>20, "rss_anon_mib", out.RSSAnon>>20, "rss_file_mib", out.RSSFile>>20, "heap_inuse_mib", out.HeapInUse>>20, "peak_rss_mib", out.PeakRSS>>20,
		"events_ours", out.Events.String(), "events_others", out.OtherEvents.String())
	return out
}

// webhook times, samples times each, a commit announced by a generic
// webhook until Skep updated the service, and the same change deployed by
// `docker stack deploy --resolve-image never` to a's twin stack (from
// file) until the Engine updated its service. Both clocks start when the
// change is pushed: Skep's once the commit is in the repository, docker's
// once the file is written; both stop at the Engine's update event, so
// the CLI's start-up counts as Skep's webhook round trip does. Skep checks
// the image on its own (the image gate), so the bare write is docker's
// without the registry. Each side waits for its rollout to end before the
// next sample.
//
// Each sample is logged with the git and Engine requests made between the
// start and the update, as offsets from the start: where the time went.
func (e *env) webhook(ctx context.Context, ctrl *Controller, a app, file string) (skep, docker []time.Duration) {
	e.proxy.Keep(true)
	defer e.proxy.Keep(false)
	for i := range e.opts.Samples {
		e.rev++
		a.repo.Commit(e.tb, "main", map[string]string{"compose.yaml": compose(a, e.image, e.rev)})
		start := time.Now()
		if err := ctrl.Webhook(ctx, a.repoURL, fmt.Sprintf("%s-%d", e.prefix, i)); err != nil {
			e.tb.Fatal(err)
		}
		at := e.updated(ctx, a.release+"_web", start)
		skep = append(skep, at.Sub(start))
		skepRequests := e.timeline(start, at, "/"+a.repo.Name+".git/")

		e.writeFile(file, compose(a, e.image, e.rev))
		start = time.Now()
		e.stackDeploy(ctx, file, a.docker, "--resolve-image", "never")
		at = e.updated(ctx, a.docker+"_web", start)
		docker = append(docker, at.Sub(start))
		e.log.Info("webhook sample", "sample", i+1, "skep", skep[i].Round(time.Millisecond), "docker", docker[i].Round(time.Millisecond),
			"skep_requests", skepRequests, "docker_requests", e.timeline(start, at, ""))
	}
	return skep, docker
}

// timeline lists the git requests under gitPrefix ("" for none) and the
// Engine requests made in [from, to), each as its offset from from.
func (e *env) timeline(from, to time.Time, gitPrefix string) string {
	reqs := e.proxy.Requests("", from, to)
	if gitPrefix != "" {
		for _, r := range e.gitProxy.Requests(gitPrefix, from, to) {
			r.Class = "git " + r.Class
			reqs = append(reqs, r)
		}
	}
	slices.SortFunc(reqs, func(a, b Request) int { return a.At.Compare(b.At) })
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "+%.1fms %s; ", float64(r.At.Sub(from).Microseconds())/1000, r.Class)
	}
	return b.String()
}

// polling makes a's interval the floor and times, samples times, a commit
// made at a random moment until Skep updated the service. The git proxy
// tells when the tick that saw the commit asked for the refs, and whether
// an earlier tick asked and missed it.
func (e *env) polling(ctx context.Context, ctrl *Controller, apps []app, appsFile string) []Poll {
	loaded := ctrl.LogCount(e.tb, "app set loaded")
	changed := append([]app(nil), apps...)
	changed[0].interval = pollInterval.String()
	e.writeFile(appsFile, appSet(changed))
	// The app set is re-read every 30 s (--appset-interval's default).
	deadline := time.Now().Add(2 * time.Minute)
	for ctrl.LogCount(e.tb, "app set loaded") == loaded {
		if time.Now().After(deadline) {
			e.tb.Fatal("the controller did not reload the app set within 2 minutes")
		}
		time.Sleep(500 * time.Millisecond)
	}
	a := changed[0]
	var out []Poll
	// Random phases, stratified and antithetic: one in each of Samples
	// equal slices of the interval, taken in a shuffled order, each
	// slice's draw u mirrored as 1-u in the mirror slice. The median then
	// measures the polling rather than how 10 uniform draws happened to
	// fall (their median's standard error is 1.6 s at a 10 s interval;
	// stratified alone, the two middle draws still moved it by 0.2 s).
	// A phase is counted from a tick of the application, seen as its
	// ls-remote at the git proxy: a wake by the swarm does not move the
	// ticks, so the end of the last rollout says nothing of where they are.
	phases := antitheticPhases(e.opts.Samples, pollInterval)
	for i, phase := range phases {
		tick := e.nextTick(ctx, a)
		select {
		case <-ctx.Done():
			e.tb.Fatal("cancelled")
		case <-time.After(time.Until(tick.Add(phase))):
		}
		e.rev++
		a.repo.Commit(e.tb, "main", map[string]string{"compose.yaml": compose(a, e.image, e.rev)})
		pushed := time.Now()
		at := e.updated(ctx, a.release+"_web", pushed)
		p := pollSample(e.gitProxy.Requests("/"+a.repo.Name+".git/", pushed, at), pushed, at)
		e.log.Info("polled", "sample", i+1, "phase", phase.Round(time.Millisecond), "latency", p.Latency.Round(time.Millisecond),
			"after_tick", p.AfterTick.Round(time.Millisecond), "tick_after_phase_tick", (pushed.Sub(tick) + p.Latency - p.AfterTick).Round(time.Millisecond), "missed", p.Missed)
		out = append(out, p)
	}
	return out
}

// antitheticPhases returns n phases within interval in a shuffled order:
// one drawn in each of n equal slices, the draw u of slice k mirrored as
// 1-u in slice n-1-k, so that each pair of mirror slices averages to half
// the interval (the middle slice of an odd n draws at its centre).
func antitheticPhases(n int, interval time.Duration) []time.Duration {
	u := make([]float64, n)
	for k := range n / 2 {
		u[k] = rand.Float64()
		u[n-1-k] = 1 - u[k]
	}
	if n%2 == 1 {
		u[n/2] = 0.5
	}
	out := make([]time.Duration, n)
	for i, k := range rand.Perm(n) {
		out[i] = time.Duration((float64(k) + u[k]) / float64(n) * float64(interval))
	}
	return out
}

// nextTick waits for the next ref advertisement of a's repository at the
// git proxy, a tick of a at rest, and returns when it came.
func (e *env) nextTick(ctx context.Context, a app) time.Time {
	since := time.Now()
	deadline := since.Add(2 * pollInterval)
	for {
		for _, r := range e.gitProxy.Requests("/"+a.repo.Name+".git/", since, time.Now()) {
			if r.Class == GitRefs {
				return r.At
			}
		}
		if time.Now().After(deadline) {
			e.tb.Fatalf("polling: no tick of %s within %s", a.name, 2*pollInterval)
		}
		select {
		case <-ctx.Done():
			e.tb.Fatal("cancelled")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// pollSample reads one polling sample from the git requests made between
// the push and the updated spec. The deploying tick's ls-remote is the
// last ref advertisement before the upload-pack POST of its fetch, which
// starts from that advertisement rather than asking again (package
// gitsource); any ls-remote before it is a tick that asked and missed the
// commit.
func pollSample(requests []Request, pushed, updated time.Time) Poll {
	var refs []time.Time
	for _, r := range requests {
		if r.Class == GitFetch {
			break
		}
		if r.Class == GitRefs {
			refs = append(refs, r.At)
		}
	}
	p := Poll{Latency: updated.Sub(pushed), Missed: max(len(refs)-1, 0)}
	if len(refs) > 0 {
		p.AfterTick = updated.Sub(refs[len(refs)-1])
	}
	return p
}

// outOfBand scales the web service of apps[i] to 3 replicas with `docker
// service scale`, samples times, and times each change until Skep set it
// back to 1, both by the Engine's clock. It also counts the reconciles
// of the other applications between just before the change and just
// after the correction, and how many of those their own ticks explain.
func (e *env) outOfBand(ctx context.Context, ctrl *Controller, apps []app, i int) (fixes []time.Duration, others, byTicks float64) {
	svc := apps[i].release + "_web"
	for range e.opts.Samples {
		before, err := ctrl.Reconciles(ctx)
		if err != nil {
			e.tb.Fatal(err)
		}
		start := time.Now()
		// The real socket, as an operator's own docker CLI would reach it.
		if out, err := exec.CommandContext(ctx, e.docker, "service", "scale", "--detach", svc+"=3").CombinedOutput(); err != nil {
			e.tb.Fatalf("docker service scale: %v: %s", err, out)
		}
		wait, cancel := context.WithTimeout(ctx, time.Minute)
		change, err := e.watch.Next(wait, svc, start, Replicas("3"))
		if err == nil {
			var fix ServiceEvent
			if fix, err = e.watch.Next(wait, svc, change.At, Replicas("1")); err == nil {
				fixes = append(fixes, fix.At.Sub(change.At))
			}
		}
		cancel()
		if err != nil {
			e.tb.Fatalf("out-of-band change not corrected: %v", err)
		}
		// A wake the change caused elsewhere has run by now.
		time.Sleep(500 * time.Millisecond)
		after, err := ctrl.Reconciles(ctx)
		if err != nil {
			e.tb.Fatal(err)
		}
		window := time.Since(start)
		for _, a := range apps {
			if a.name != apps[i].name {
				others += after[a.name] - before[a.name]
			}
		}
		byTicks += float64(len(apps)-1) * window.Seconds() / interval.Seconds()
		// The two extra tasks drain before the next sample.
		time.Sleep(2 * time.Second)
	}
	n := float64(e.opts.Samples)
	return fixes, others / n, byTicks / n
}

// updated waits for the first spec update of service after start and
// returns when the Engine made it; then it waits for the rollout it
// started to end, so samples do not overlap.
func (e *env) updated(ctx context.Context, service string, start time.Time) time.Time {
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ev, err := e.watch.Next(wait, service, start, ServiceEvent.SpecUpdate)
	if err != nil {
		e.tb.Fatalf("spec update: %v", err)
	}
	settle, cancel2 := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel2()
	if _, err := e.watch.Next(settle, service, ev.At, Settled); err != nil {
		e.log.Warn("rollout did not end", "service", service, "err", err)
	}
	return ev.At
}

// stackDeploy runs `docker stack deploy` of file as stack through the
// counting proxy, detached as the CLI's default is, with its defaults
// (resolve-image always) unless flags say otherwise.
func (e *env) stackDeploy(ctx context.Context, file, stack string, flags ...string) {
	args := append([]string{"stack", "deploy", "--detach=true"}, flags...)
	cmd := exec.CommandContext(ctx, e.docker, append(args, "-c", file, stack)...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix://"+e.proxy.Socket)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.tb.Fatalf("docker stack deploy %s: %v: %s", stack, err, out)
	}
	e.log.Debug("docker stack deploy", "stack", stack, "took", time.Since(start))
}

// removeStacks removes stacks now, four at a time: each waits for its
// tasks to drain before its network can go.
func (e *env) removeStacks(ctx context.Context, stacks ...string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, stack := range stacks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := harness.RemoveStack(ctx, e.cli, stack); err != nil {
				e.tb.Errorf("remove stack %s: %v", stack, err)
			}
		})
	}
	wg.Wait()
}

func (e *env) writeFile(path, data string) {
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		e.tb.Fatal(err)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

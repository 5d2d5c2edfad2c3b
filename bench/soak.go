package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	skepclient "github.com/skep-cd/skep/client"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/wire"
)

// SoakOptions configure Soak. The zero value means all defaults, except
// Binary.
type SoakOptions struct {
	// Binary is the skep binary under load; required.
	Binary string
	// Apps is the number of applications, one service each. Default 100.
	Apps int
	// Duration is how long the load runs, after the first deploy settled.
	// Default 10m.
	Duration time.Duration
	// CommitEvery is the pause between two commits, each to a random
	// application and announced by a webhook. Default 3s.
	CommitEvery time.Duration
	// DriftEvery is the pause between two out-of-band changes of a random
	// application's service, through the Engine API. Default 20s.
	DriftEvery time.Duration
	// Subscribers is the number of event-stream clients. Default 200.
	Subscribers int
	// Readers is the number of API clients that list the applications and
	// read one, in a loop, ReadEvery apart. Default 4 and 250ms.
	Readers   int
	ReadEvery time.Duration
	// MemoryEvery is how often the controller's RSS is sampled. Default
	// Duration/20, at most 30s.
	MemoryEvery time.Duration
	// Warmup is the start of the load left out of the memory verdict.
	// Default Duration/5.
	Warmup time.Duration
	// Log receives progress. Default slog.Default().
	Log *slog.Logger
}

func (o SoakOptions) withDefaults() SoakOptions {
	if o.Apps <= 0 {
		o.Apps = 100
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Minute
	}
	if o.CommitEvery <= 0 {
		o.CommitEvery = 3 * time.Second
	}
	if o.DriftEvery <= 0 {
		o.DriftEvery = 20 * time.Second
	}
	if o.Subscribers <= 0 {
		o.Subscribers = 200
	}
	if o.Readers <= 0 {
		o.Readers = 4
	}
	if o.ReadEvery <= 0 {
		o.ReadEvery = 250 * time.Millisecond
	}
	if o.MemoryEvery <= 0 {
		o.MemoryEvery = min(o.Duration/20, 30*time.Second)
	}
	if o.Warmup <= 0 {
		o.Warmup = o.Duration / 5
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o
}

// soakSettle bounds the wait for one commit to reach the swarm, or for one
// out-of-band change to be put back; past it the change counts as an
// error. The first deploy and the final check have their own bounds.
const soakSettle = 3 * time.Minute

// oobEnv is the environment variable an out-of-band change adds; the
// controller must take it away again.
const oobEnv = "SOAK_OOB"

// soak is one Soak run's state. The main goroutine pushes commits and
// makes out-of-band changes; one goroutine per change waits for its
// outcome, and subscribers and readers run beside them.
type soak struct {
	*env
	opts SoakOptions
	ctrl *Controller
	api  *skepclient.Client

	mu   sync.Mutex // guards apps' rev and busy, and r
	apps []soakApp
	r    *SoakReport
}

// soakApp is one application and what was done to it.
type soakApp struct {
	app
	rev  int  // the last revision committed
	busy bool // a commit or an out-of-band change is on its way
}

// Soak deploys opts.Apps applications on cli's swarm, then loads the
// controller for opts.Duration: commits, out-of-band changes, event-stream
// subscribers and API readers at once. It then waits for every change to
// land and checks the swarm, the streams and the controller's log, and
// returns what it saw; the caller decides what fails (SoakReport.Errors,
// SoakReport.Memory). It fails tb only when a part cannot be set up.
// Everything it creates is removed by the time tb ends.
func Soak(tb testing.TB, cli *client.Client, opts SoakOptions) *SoakReport {
	tb.Helper()
	opts = opts.withDefaults()
	if opts.Binary == "" {
		tb.Fatal("soak: no skep binary given")
	}
	prefix := harness.Name(tb, "sks")
	e := &env{
		tb: tb, cli: cli, opts: Options{Binary: opts.Binary}, log: opts.Log,
		image:  harness.TestImage(tb, cli, harness.ImageOptions{}),
		git:    harness.StartGitServer(tb, harness.GitServerOptions{}),
		proxy:  StartProxy(tb, EngineSocket(tb)),
		watch:  WatchServices(tb, cli, prefix),
		prefix: prefix,
	}
	s := &soak{env: e, opts: opts, apps: make([]soakApp, opts.Apps),
		r: &SoakReport{Apps: opts.Apps, Subscribers: opts.Subscribers, Readers: opts.Readers, CPUs: runtime.NumCPU(),
			CommitEvery: opts.CommitEvery, DriftEvery: opts.DriftEvery, Warmup: opts.Warmup}}
	s.deploy()
	// Registered after the controller's own clean-up, so it runs first:
	// the controller stops before its stacks go, or it would put them
	// back. The caller reads the report before this runs.
	tb.Cleanup(func() {
		s.ctrl.Stop(tb)
		stacks := make([]string, len(s.apps))
		for i, a := range s.apps {
			stacks[i] = a.release
		}
		e.removeStacks(context.WithoutCancel(tb.Context()), stacks...)
	})
	s.load()
	return s.r
}

// deploy creates one repository per application, starts the controller
// and waits until every application is deployed and at rest.
func (s *soak) deploy() {
	tb, ctx := s.tb, s.tb.Context()
	apps := make([]app, len(s.apps))
	for i := range s.apps {
		a := app{name: fmt.Sprintf("soak%03d", i+1), release: fmt.Sprintf("%s-%03d", s.prefix, i+1),
			services: []string{"web"}, replicas: 1, interval: interval.String(), resolveNever: true, noHealthcheck: true}
		harness.CleanupStack(tb, s.cli, a.release)
		a.repo = s.git.CreateRepo(tb, a.name)
		a.repo.Commit(tb, "main", map[string]string{"compose.yaml": compose(a, s.image, 0)})
		a.repoURL = a.repo.URL
		s.apps[i], apps[i] = soakApp{app: a}, a
	}
	dir := tb.TempDir()
	appsFile := filepath.Join(dir, "apps.yaml")
	s.writeFile(appsFile, appSet(apps))
	s.log.Info("soak: first deploy", "applications", len(apps))
	s.ctrl = s.startController(dir, appsFile)
	api, err := skepclient.New(skepclient.Options{Server: s.ctrl.URL, Token: wire.NewToken(s.ctrl.token)})
	if err != nil {
		tb.Fatal(err)
	}
	s.api = api
	wait, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for _, name := range serviceNames(apps, false) {
		if _, err := s.watch.Next(wait, name, s.ctrl.Started, Created); err != nil {
			tb.Fatalf("soak: first deploy: %v", err)
		}
	}
	s.settle(ctx, s.ctrl, len(apps))
	s.log.Info("soak: deployed and at rest", "took", time.Since(s.ctrl.Started).Round(time.Second))
}

// load runs the load for opts.Duration, waits for what it started to
// land, and fills s.r.
func (s *soak) load() {
	tb, ctx := s.tb, s.tb.Context()
	base := s.newestEvent(ctx)
	streamCtx, stopStreams := context.WithCancel(ctx)
	defer stopStreams()
	streams := s.subscribe(streamCtx, base)
	readCtx, stopReads := context.WithCancel(ctx)
	var readers sync.WaitGroup
	for range s.opts.Readers {
		readers.Go(func() { s.read(readCtx) })
	}
	var changes sync.WaitGroup
	requests, cpu := s.proxy.Counts(), s.ctrl.CPU(tb)
	s.r.LoadStart = loadAverage()
	start := time.Now()
	s.log.Info("soak: load", "duration", s.opts.Duration, "subscribers", s.opts.Subscribers, "readers", s.opts.Readers)
	commits, drifts, memory := time.NewTicker(s.opts.CommitEvery), time.NewTicker(s.opts.DriftEvery), time.NewTicker(s.opts.MemoryEvery)
	defer commits.Stop()
	defer drifts.Stop()
	defer memory.Stop()
	end := time.After(s.opts.Duration)
	s.r.RSS = append(s.r.RSS, MemorySample{At: 0, RSS: s.ctrl.RSS(tb)})
	for running := true; running; {
		select {
		case <-ctx.Done():
			tb.Fatal("soak: cancelled")
		case <-end:
			running = false
		case <-commits.C:
			s.commit(ctx, &changes)
		case <-drifts.C:
			s.drift(ctx, &changes)
		case <-memory.C:
			s.sampleMemory(start)
		}
	}
	s.r.Duration = time.Since(start)
	s.r.CPU, s.r.Requests = s.ctrl.CPU(tb)-cpu, s.proxy.Counts().Since(requests)
	stopReads()
	readers.Wait()
	s.log.Info("soak: load ended; waiting for the last changes", "commits", s.r.Commits, "drifts", s.r.Drifts)
	changes.Wait()
	s.finalCheck(ctx)
	s.closeStreams(ctx, streams, base, stopStreams)
	s.countEvents(ctx, base)
	s.r.ErrorLines = s.ctrl.LogErrors(tb)
	s.r.LoadEnd = loadAverage()
}

// sampleMemory records the controller's RSS and logs the progress.
func (s *soak) sampleMemory(start time.Time) {
	sample := MemorySample{At: time.Since(start), RSS: s.ctrl.RSS(s.tb)}
	s.r.RSS = append(s.r.RSS, sample)
	s.mu.Lock()
	applied, corrected, problems := s.r.Applied, s.r.corrected(), len(s.r.Problems)
	s.mu.Unlock()
	s.log.Info("soak: progress", "elapsed", sample.At.Round(time.Second), "rss_mib", sample.RSS>>20, "commits", s.r.Commits,
		"applied", applied, "drifts", s.r.Drifts, "corrected", corrected, "problems", problems, "load", loadAverage())
}

// pick marks a random application that no change is on its way to as
// busy and returns its index, or -1 when every application is busy.
func (s *soak) pick() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var free []int
	for i, a := range s.apps {
		if !a.busy {
			free = append(free, i)
		}
	}
	if len(free) == 0 {
		return -1
	}
	i := free[rand.N(len(free))]
	s.apps[i].busy = true
	return i
}

func (s *soak) release(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apps[i].busy = false
}

// problem records one error of the run and logs it.
func (s *soak) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.log.Warn("soak: error", "problem", msg)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.r.Problems = append(s.r.Problems, msg)
}

// commit pushes the next revision of a random application, announces it
// by webhook as a forge would, and waits (in a goroutine of changes) for
// its service to carry it.
func (s *soak) commit(ctx context.Context, changes *sync.WaitGroup) {
	i := s.pick()
	if i < 0 {
		s.r.Skipped++
		return
	}
	a := &s.apps[i]
	s.mu.Lock()
	a.rev++
	rev := a.rev
	s.mu.Unlock()
	s.r.Commits++
	service := a.release + "_web"
	// A commit that lands while the service still rolls out the last one
	// waits for that rollout (the controller's gate): its latency is told
	// apart.
	current, _, err := s.cli.ServiceInspectWithRaw(ctx, service, swarm.ServiceInspectOptions{})
	rolling := err == nil && current.UpdateStatus != nil &&
		(current.UpdateStatus.State == swarm.UpdateStateUpdating || current.UpdateStatus.State == swarm.UpdateStateRollbackStarted)
	a.repo.Commit(s.tb, "main", map[string]string{"compose.yaml": compose(a.app, s.image, rev)})
	pushed := time.Now()
	if err := s.ctrl.Webhook(ctx, a.repoURL, fmt.Sprintf("%s-%s-%d", s.prefix, a.name, rev)); err != nil {
		// Polling still finds the commit; the refused webhook is an error.
		s.r.WebhookErrors++
		s.problem("webhook for %s at %d: %v", a.name, rev, err)
	}
	changes.Go(func() {
		defer s.release(i)
		at, err := s.await(ctx, service, pushed, func(st serviceState) bool { return st.rev >= rev })
		if err != nil {
			s.problem("commit %d of %s not in the swarm within %s: %v", rev, a.name, soakSettle, err)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.r.Applied++
		s.r.Apply = append(s.r.Apply, at.Sub(pushed))
		if rolling {
			s.r.DuringRollout++
		} else {
			s.r.ApplyQuiet = append(s.r.ApplyQuiet, at.Sub(pushed))
		}
	})
}

// drift changes a random application's service behind the controller's
// back, as an operator's `docker service scale` or `docker service update
// --env-add` would, and waits (in a goroutine of changes) for the
// controller to put it back.
func (s *soak) drift(ctx context.Context, changes *sync.WaitGroup) {
	i := s.pick()
	if i < 0 {
		s.r.Skipped++
		return
	}
	s.r.Drifts++
	n := s.r.Drifts
	service := s.apps[i].release + "_web"
	current, _, err := s.cli.ServiceInspectWithRaw(ctx, service, swarm.ServiceInspectOptions{})
	if err != nil {
		s.release(i)
		s.problem("out-of-band change %d: inspect %s: %v", n, service, err)
		return
	}
	spec := current.Spec
	scale := n%2 == 0
	if scale {
		replicas := uint64(2)
		spec.Mode.Replicated = &swarm.ReplicatedService{Replicas: &replicas}
	} else {
		container := *spec.TaskTemplate.ContainerSpec
		container.Env = append(slices.Clone(container.Env), fmt.Sprintf("%s=%d", oobEnv, n))
		spec.TaskTemplate.ContainerSpec = &container
	}
	start := time.Now()
	if _, err := s.cli.ServiceUpdate(ctx, current.ID, current.Version, spec, swarm.ServiceUpdateOptions{}); err != nil {
		s.release(i)
		s.problem("out-of-band change %d of %s: %v", n, service, err)
		return
	}
	changes.Go(func() {
		defer s.release(i)
		wait, cancel := context.WithTimeout(ctx, soakSettle)
		defer cancel()
		change, err := s.watch.Next(wait, service, start, ServiceEvent.SpecUpdate)
		if err != nil {
			s.problem("out-of-band change %d of %s: no update event: %v", n, service, err)
			return
		}
		fixed, err := s.await(ctx, service, change.At, serviceState.declared)
		if err != nil {
			s.problem("out-of-band change %d of %s not put back within %s: %v", n, service, soakSettle, err)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if scale {
			s.r.CorrectScale = append(s.r.CorrectScale, fixed.Sub(change.At))
		} else {
			s.r.CorrectEnv = append(s.r.CorrectEnv, fixed.Sub(change.At))
		}
	})
}

// serviceState is what the soak changes of a service: the revision in
// its environment, its replicas, and whether it carries oobEnv.
type serviceState struct {
	rev      int
	replicas uint64
	oob      bool
}

// declared reports whether st is what git declares, up to the revision.
func (st serviceState) declared() bool { return st.replicas == 1 && !st.oob }

func stateOf(spec swarm.ServiceSpec) serviceState {
	var st serviceState
	if spec.Mode.Replicated != nil && spec.Mode.Replicated.Replicas != nil {
		st.replicas = *spec.Mode.Replicated.Replicas
	}
	if spec.TaskTemplate.ContainerSpec != nil {
		for _, kv := range spec.TaskTemplate.ContainerSpec.Env {
			name, value, _ := strings.Cut(kv, "=")
			switch name {
			case "BENCH_REV":
				st.rev, _ = strconv.Atoi(value)
			case oobEnv:
				st.oob = true
			}
		}
	}
	return st
}

// await waits, up to soakSettle, for a spec update of service after
// after that leaves its spec as want accepts, and returns when the Engine
// made it. Each update is checked against the spec read right after it:
// a change of the same service in between would be another of the
// soak's, which busy rules out.
func (s *soak) await(ctx context.Context, service string, after time.Time, want func(serviceState) bool) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, soakSettle)
	defer cancel()
	for {
		ev, err := s.watch.Next(ctx, service, after, ServiceEvent.SpecUpdate)
		if err != nil {
			return time.Time{}, err
		}
		current, _, err := s.cli.ServiceInspectWithRaw(ctx, service, swarm.ServiceInspectOptions{})
		if err != nil {
			return time.Time{}, err
		}
		if want(stateOf(current.Spec)) {
			return ev.At, nil
		}
		after = ev.At
	}
}

// finalCheck reads every service once the load is over: each must carry
// its application's last commit and nothing of an out-of-band change.
func (s *soak) finalCheck(ctx context.Context) {
	for _, a := range s.apps {
		service := a.release + "_web"
		current, _, err := s.cli.ServiceInspectWithRaw(ctx, service, swarm.ServiceInspectOptions{})
		if err != nil {
			s.r.Unconverged++
			s.problem("final check: %v", err)
			continue
		}
		if st := stateOf(current.Spec); st.rev != a.rev || !st.declared() {
			s.r.Unconverged++
			s.problem("final check: %s at revision %d with %d replicas (out-of-band env %t), want revision %d with 1",
				service, st.rev, st.replicas, st.oob, a.rev)
		}
	}
}

// stream is one event-stream subscriber's record. Its goroutine alone
// writes it until done is closed, but for last, which closeStreams reads
// while the stream runs.
type stream struct {
	last     atomic.Int64 // the highest id received
	received int
	gaps     int // events skipped between two received ones
	repeats  int // events received twice or out of order
	delivery []time.Duration
	ended    error // why the stream ended before it was closed
	done     chan struct{}
}

// newestEvent returns the newest kept event's id, 0 when none is kept.
func (s *soak) newestEvent(ctx context.Context) int64 {
	list, err := s.api.Events(ctx, skepclient.EventQuery{Limit: 1})
	if err != nil {
		s.tb.Fatalf("soak: events: %v", err)
	}
	if len(list.Events) == 0 {
		return 0
	}
	return list.Events[0].ID
}

// subscribe opens opts.Subscribers event streams until ctx ends, each
// resuming after base, so that every one must see the same events, each
// once and in order, however late it connected.
func (s *soak) subscribe(ctx context.Context, base int64) []*stream {
	streams := make([]*stream, s.opts.Subscribers)
	for i := range streams {
		st := &stream{done: make(chan struct{})}
		st.last.Store(base)
		streams[i] = st
		go func() {
			defer close(st.done)
			err := s.api.Stream(ctx, skepclient.EventQuery{}, strconv.FormatInt(base, 10), st.receive)
			if ctx.Err() == nil {
				st.ended = fmt.Errorf("stream ended: %v", err)
			}
		}()
	}
	return streams
}

// receive records one event of the stream.
func (st *stream) receive(e skepclient.StreamEvent) error {
	received := time.Now()
	id, err := strconv.ParseInt(e.ID, 10, 64)
	if err != nil {
		return fmt.Errorf("event id %q: %w", e.ID, err)
	}
	last := st.last.Load()
	if id <= last {
		st.repeats++
		return nil
	}
	st.gaps += int(id - last - 1)
	st.last.Store(id)
	st.received++
	var ev wire.Event
	if err := json.Unmarshal(e.Data, &ev); err != nil {
		return fmt.Errorf("event %d: %w", id, err)
	}
	st.delivery = append(st.delivery, received.Sub(ev.At))
	return nil
}

// closeStreams waits up to 30 s for every open stream to reach the newest
// event, then ends them all with stop and records what each saw: an event
// it never got, one it got twice, or its end before stop is an error.
func (s *soak) closeStreams(ctx context.Context, streams []*stream, base int64, stop context.CancelFunc) {
	newest := s.newestEvent(ctx)
	deadline := time.After(30 * time.Second)
	for _, st := range streams {
	wait:
		for st.last.Load() < newest {
			select {
			case <-st.done:
				break wait
			case <-deadline:
				break wait
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	stop()
	s.r.Events = int(newest - base)
	for i, st := range streams {
		<-st.done
		result := StreamResult{Received: st.received, Missed: st.gaps + int(newest-st.last.Load()), Repeats: st.repeats}
		if st.ended != nil {
			result.Ended = st.ended.Error()
		}
		if result.Broken() {
			s.problem("event stream %d: %d received, %d missed, %d repeated, %s", i, result.Received, result.Missed, result.Repeats, result.Ended)
		}
		s.r.Streams = append(s.r.Streams, result)
		s.r.Delivery = append(s.r.Delivery, st.delivery...)
	}
}

// countEvents counts the run's kept events by type.
func (s *soak) countEvents(ctx context.Context, base int64) {
	list, err := s.api.Events(ctx, skepclient.EventQuery{Limit: 10000})
	if err != nil {
		s.r.ReadErrors++
		s.problem("events: %v", err)
		return
	}
	s.r.ByType = Counts{}
	for _, e := range list.Events {
		if e.ID > base {
			s.r.ByType[e.Type]++
		}
	}
}

// read lists the applications and reads one, ReadEvery apart, until ctx
// ends. Every answer but a 2xx is an error.
func (s *soak) read(ctx context.Context) {
	for {
		start := time.Now()
		_, listErr := s.api.ListApplications(ctx)
		listed := time.Since(start)
		start = time.Now()
		_, readErr := s.api.Application(ctx, s.apps[rand.N(len(s.apps))].name)
		read := time.Since(start)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		s.r.Reads += 2
		s.r.List, s.r.Read = append(s.r.List, listed), append(s.r.Read, read)
		s.mu.Unlock()
		for _, err := range []error{listErr, readErr} {
			if err != nil {
				s.mu.Lock()
				s.r.ReadErrors++
				s.mu.Unlock()
				s.problem("API read: %v", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.opts.ReadEvery):
		}
	}
}

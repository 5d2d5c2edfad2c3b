package cli_test

// The fault suite (docs/reliability.md, "Faults"): each TestFault* case runs
// the real skep binary against a real swarm, git server and registry,
// breaks one of them in the middle of the work, and checks the end state of
// the swarm (nothing duplicated, lost, or deleted that is not provably
// owned), the store (history and events) and convergence once the fault
// clears. This file holds what the cases share.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/wire"
)

// envFaults names the variable that runs the whole fault suite (make
// faults). Without it only the fast cases run, as part of make test; the
// slow ones skip and say how to run them.
const envFaults = "SKEP_FAULTS"

// slowFault skips t unless the whole fault suite was asked for.
func slowFault(t *testing.T) {
	t.Helper()
	if os.Getenv(envFaults) != "1" {
		t.Skipf("a slow fault case: run the whole suite with make faults (%s=1)", envFaults)
	}
}

// faultEnv is one fault case: a swarm reached through an engineProxy, a git
// repository holding a release of several services, and the files and
// environment a controller process and the CLI need.
type faultEnv struct {
	docker *client.Client // the swarm, directly (not through the proxy)
	proxy  *engineProxy   // what the controller talks to
	git    *harness.GitServer
	repo   *harness.Repo
	ns     string // the release (stack namespace)
	ctlID  string
	v1, v2 string
	dir    string
	apps   string // the app-set file
	token  string // the admin token file
	cli    *cliEnv
	// current is the controller started last.
	current *ctlProc
	// top is the case's own test: controllers outlive its subtests.
	top *testing.T
	// wait sets syncPolicy.wait: a sync ends once its services are healthy.
	wait bool
	// artifacts, when set, is the app set's artifacts block of the
	// application (its lines, indented under it).
	artifacts string
	// anyHealth lets waitConverged accept any health: after an Engine
	// restart, the task failures the stop caused read as degraded
	// (restarting) for minutes, though everything runs.
	anyHealth bool
	// dest is the application's destination: "" is the controller's own
	// swarm (DOCKER_HOST, the proxy); any other name is defined in a
	// destinations file whose one manager is the proxy.
	dest string
}

// faultServices is how many services the release has: enough that an
// apply through a slowed proxy takes seconds.
const faultServices = 6

// newFaultEnv sets up a case on the swarm docker answers at sock (a unix
// socket path): images, the proxy, the repository at v1 and the app set.
// The controller reaches that swarm as its own.
func newFaultEnv(t *testing.T, docker *client.Client, sock string) *faultEnv {
	return newFaultEnvAt(t, docker, sock, "")
}

// newFaultEnvAt is newFaultEnv with the swarm reached as the destination
// dest ("" for the controller's own).
func newFaultEnvAt(t *testing.T, docker *client.Client, sock, dest string) *faultEnv {
	t.Helper()
	if skepBinary == "" {
		t.Skip("no skep binary in -short mode")
	}
	e := &faultEnv{docker: docker, git: harness.StartGitServer(t, harness.GitServerOptions{}),
		ns: harness.Name(t, "flt"), ctlID: harness.Name(t, "ctl"), dir: shortTempDir(t), cli: &cliEnv{}, top: t, dest: dest}
	e.v1 = harness.TestImage(t, docker, harness.ImageOptions{Version: "v1"})
	e.v2 = harness.TestImage(t, docker, harness.ImageOptions{Version: "v2"})
	harness.CleanupStack(t, docker, e.ns)
	harness.CleanupStack(t, docker, e.ns+"-hm")
	e.proxy = startEngineProxy(t, sock, filepath.Join(e.dir, "engine.sock"))
	if dest != "" {
		writeTestFile(t, filepath.Join(e.dir, "destinations.yaml"), fmt.Sprintf(
			"apiVersion: skep/v1\nkind: Destinations\ndestinations:\n  - name: %s\n    managers:\n      - host: unix://%s\n", dest, e.proxy.sock))
	}
	e.repo = e.git.CreateRepo(t, "stack")
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": faultCompose("IMAGE"), ".env": "IMAGE=" + e.v1 + "\n", "settings.txt": "one\n"})
	e.apps = filepath.Join(e.dir, "apps.yaml")
	e.writeApps(t, "main")
	e.token = filepath.Join(e.dir, "admin.token")
	writeTestFile(t, e.token, "fault-suite-admin-token\n")
	return e
}

// shortTempDir is a temporary directory with a short path: a unix socket's
// path may not exceed 107 bytes, and t.TempDir's carry the test's name.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "skep-fault-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// faultCompose is the release: faultServices services on one network, each
// with a config, so an apply writes every kind of object. Their image is
// the variable imageVar.
func faultCompose(imageVar string) string {
	var b strings.Builder
	b.WriteString("services:\n")
	for i := 1; i <= faultServices; i++ {
		fmt.Fprintf(&b, `  s%d:
    image: ${`+imageVar+`}
    deploy: {endpoint_mode: dnsrr, replicas: 1, update_config: {order: start-first}}
    networks: [back]
    configs: [{source: settings, target: /settings.txt}]
`, i)
	}
	b.WriteString("networks:\n  back: {}\nconfigs:\n  settings: {file: ./settings.txt}\n")
	return b.String()
}

// writeApps writes the app set: one automated application "stack" with
// every prune switch on and live drift detection, tracking revision; no
// application at all when revision is "".
func (e *faultEnv) writeApps(t *testing.T, revision string) {
	t.Helper()
	if revision == "" {
		writeTestFile(t, e.apps, "apiVersion: skep/v1\napplications: []\n")
		return
	}
	writeTestFile(t, e.apps, fmt.Sprintf(`apiVersion: skep/v1
applications:
  - name: stack
    release: %s
    source: {repo: %s, revision: %s}
    destination: {swarm: %q}
    syncPolicy: {automated: true, interval: 10s, resolveImage: never, prune: true, pruneResources: true, wait: %t}
    driftDetection: live
%s`, e.ns, e.repo.URL, revision, e.dest, e.wait, e.artifacts))
}

// reloadApps writes the app set as writeApps does and waits until the
// running controller loaded it.
func (e *faultEnv) reloadApps(t *testing.T, revision string) {
	t.Helper()
	before := e.status(t).AppSet.Revision
	e.writeApps(t, revision)
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		st := e.status(t).AppSet
		return st.Revision != before && st.Loaded, fmt.Sprintf("app set %s (%s)", st.Revision, st.Error)
	})
}

// status reads `skep status -o json`.
func (e *faultEnv) status(t *testing.T) wire.ControllerStatus {
	t.Helper()
	var st wire.ControllerStatus
	out := e.cli.ok(t, "status", "-o", "json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	return st
}

// ctlProc is one `skep controller` process.
type ctlProc struct {
	cmd    *exec.Cmd
	done   chan struct{} // closed once the process exited
	err    error         // Wait's result, set before done closes
	output *syncBuffer   // stdout and stderr, also copied to the test's output
}

// syncBuffer is a bytes.Buffer safe for the writer goroutines of exec.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startController starts a controller on data with the app set, every
// prune switch and extra flags, talking to the swarm through the proxy,
// and waits until it is ready. A process still running when the test ends
// is killed.
func (e *faultEnv) startController(t *testing.T, data string, extra ...string) *ctlProc {
	t.Helper()
	p := e.spawn(t, data, extra...)
	harness.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		select {
		case <-p.done:
			t.Fatalf("controller exited before it was ready: %v\n%s", p.err, p.output)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", e.cli.server+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
	return p
}

// spawn starts the controller process without waiting for it to be ready.
func (e *faultEnv) spawn(t *testing.T, data string, extra ...string) *ctlProc {
	t.Helper()
	addr := freeAddr(t)
	e.cli.server = "http://" + addr
	args := append([]string{"controller", "--config", e.apps, "--listen", addr, "--data", data,
		"--controller-id", e.ctlID, "--log-level", "debug", "--prune", "--appset-interval", "2s"}, extra...)
	p := &ctlProc{cmd: exec.Command(skepBinary, args...), done: make(chan struct{}), output: &syncBuffer{}}
	p.cmd.Env = append(os.Environ(), "SKEP_ADMIN_TOKEN_FILE="+e.token)
	if e.dest == "" {
		p.cmd.Env = append(p.cmd.Env, "DOCKER_HOST=unix://"+e.proxy.sock)
	} else {
		p.cmd.Args = append(p.cmd.Args, "--destinations", filepath.Join(e.dir, "destinations.yaml"))
	}
	out := io.MultiWriter(e.top.Output(), p.output)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	e.current = p
	e.top.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	e.cli.env = append(os.Environ(), "SKEP_SERVER="+e.cli.server, "SKEP_TOKEN_FILE="+e.token, "HOME="+e.dir, "SKEP_TOKEN=", "SKEP_CONFIG=")
	return p
}

// kill ends the process with SIGKILL and waits for it.
func (p *ctlProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// stop sends sig and waits up to within for the process to exit; it
// returns how long that took and fails the test when it did not exit.
func (p *ctlProc) stop(t *testing.T, sig os.Signal, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		return time.Since(start)
	case <-time.After(within):
		t.Fatalf("controller still running %s after %v", within, sig)
		return 0
	}
}

// followEvents follows the controller's event stream with `skep events
// --follow -o json` until the test ends.
func (e *faultEnv) followEvents(t *testing.T) *follower {
	t.Helper()
	before := e.sseSubscribers(t)
	// The stream reconnects, noisily, when a controller dies.
	f := followStream(t, e.cli.env, io.Discard)
	// What a test does next may raise its events within milliseconds (an
	// out-of-band change is corrected in about 50 ms): they must not come
	// before the follower's stream is open.
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		n := e.sseSubscribers(t)
		return n > before, fmt.Sprintf("%v event-stream subscribers, %v before the follower started", n, before)
	})
	return f
}

// sseSubscribers reads the controller's skep_sse_subscribers gauge.
func (e *faultEnv) sseSubscribers(t *testing.T) float64 {
	t.Helper()
	token, err := os.ReadFile(e.token)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), "GET", e.cli.server+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s %v", resp.Status, err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, "skep_sse_subscribers "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("skep_sse_subscribers %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatalf("no skep_sse_subscribers in /metrics:\n%s", body)
	return 0
}

// waitEvent waits until f saw an event of typ whose revision is commit
// (any revision when commit is "").
func waitEvent(t *testing.T, f *follower, typ, commit string, timeout time.Duration) map[string]any {
	t.Helper()
	var got map[string]any
	harness.Eventually(t, timeout, func(context.Context) (bool, string) {
		for _, ev := range f.events() {
			if ev["type"] == typ && (commit == "" || ev["revision"] == commit) {
				got = ev
				return true, ""
			}
		}
		return false, fmt.Sprintf("no %s event for %q among %d", typ, commit, len(f.events()))
	})
	return got
}

// app reads the application from `skep app get stack -o json`.
func (e *faultEnv) app(t *testing.T) wire.ApplicationDetail {
	t.Helper()
	var d wire.ApplicationDetail
	out := e.cli.ok(t, "app", "get", "stack", "-o", "json")
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("app get -o json: %v\n%s", err, out)
	}
	return d
}

// history reads `skep app history stack -o json`.
func (e *faultEnv) history(t *testing.T) wire.History {
	t.Helper()
	var h wire.History
	out := e.cli.ok(t, "app", "history", "stack", "-o", "json")
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatalf("app history -o json: %v\n%s", err, out)
	}
	return h
}

// events lists the kept events of typ (all types when typ is "").
func (e *faultEnv) events(t *testing.T, typ string) []wire.EventItem {
	t.Helper()
	args := []string{"events", "-o", "json", "--limit", "1000"}
	if typ != "" {
		args = append(args, "--type", typ)
	}
	var list wire.EventList
	out := e.cli.ok(t, args...)
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("events -o json: %v\n%s", err, out)
	}
	return list.Events
}

// waitConverged waits until the application is synced and healthy at
// commit and every service of the release runs image (a prefix: a tag
// whose digest the test does not know) with its rollout settled, then
// returns the release's objects.
func (e *faultEnv) waitConverged(t *testing.T, commit, image string, timeout time.Duration) objects {
	t.Helper()
	var objs objects
	harness.Eventually(t, timeout, func(ctx context.Context) (bool, string) {
		a := e.app(t).Application
		if a.Sync != "synced" || a.DeployedRevision != commit || a.Health != "healthy" && !e.anyHealth {
			return false, fmt.Sprintf("application %s, %s (%s) at %.12s (want %.12s), last error %q", a.Sync, a.Health, a.HealthMessage, a.DeployedRevision, commit, a.LastError)
		}
		var err error
		if objs, err = listObjects(ctx, e.docker, e.ns); err != nil {
			return false, err.Error()
		}
		for i := 1; i <= faultServices; i++ {
			s, ok := objs.services[fmt.Sprintf("%s_s%d", e.ns, i)]
			switch {
			case !ok:
				return false, fmt.Sprintf("service s%d missing", i)
			case !strings.HasPrefix(s.Spec.TaskTemplate.ContainerSpec.Image, image):
				return false, fmt.Sprintf("service s%d runs %s", i, s.Spec.TaskTemplate.ContainerSpec.Image)
			case s.UpdateStatus != nil && s.UpdateStatus.State != swarm.UpdateStateCompleted:
				return false, fmt.Sprintf("service s%d rollout %s", i, s.UpdateStatus.State)
			}
		}
		return true, ""
	})
	return objs
}

// objects are the swarm objects of one release, by name: what carries the
// release's namespace or ownership label, or is named under it.
type objects struct {
	services  map[string]swarm.Service
	networks  map[string][]network.Summary // a name may repeat: Docker allows it
	configs   map[string]swarm.Config
	revisions []int // the numbers of the release's revision configs, sorted
}

// listObjects reads the release ns's objects from the swarm.
func listObjects(ctx context.Context, docker *client.Client, ns string) (objects, error) {
	o := objects{services: map[string]swarm.Service{}, networks: map[string][]network.Summary{}, configs: map[string]swarm.Config{}}
	mine := func(name string, labels map[string]string) bool {
		return labels[stack.LabelNamespace] == ns || labels[stack.LabelRelease] == ns || strings.HasPrefix(name, ns+"_")
	}
	services, err := docker.ServiceList(ctx, swarm.ServiceListOptions{})
	if err != nil {
		return o, err
	}
	for _, s := range services {
		if mine(s.Spec.Name, s.Spec.Labels) {
			o.services[s.Spec.Name] = s
		}
	}
	nets, err := docker.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("scope", "swarm"))})
	if err != nil {
		return o, err
	}
	for _, n := range nets {
		if mine(n.Name, n.Labels) {
			o.networks[n.Name] = append(o.networks[n.Name], n)
		}
	}
	configs, err := docker.ConfigList(ctx, swarm.ConfigListOptions{})
	if err != nil {
		return o, err
	}
	for _, c := range configs {
		if !mine(c.Spec.Name, c.Spec.Labels) {
			continue
		}
		if c.Spec.Labels[stack.LabelKind] == stack.KindRevision {
			var n int
			if _, err := fmt.Sscanf(c.Spec.Labels[stack.LabelRevision], "%d", &n); err != nil {
				return o, fmt.Errorf("revision config %s: label %q", c.Spec.Name, c.Spec.Labels[stack.LabelRevision])
			}
			o.revisions = append(o.revisions, n)
			continue
		}
		o.configs[c.Spec.Name] = c
	}
	slices.Sort(o.revisions)
	return o, nil
}

// checkObjects fails t unless objs hold exactly the release's services
// (plus the hand-made ones in extra), one network, one config and the
// revisions 1..revisions.
func (e *faultEnv) checkObjects(t *testing.T, objs objects, revisions int, extra ...string) {
	t.Helper()
	want := slices.Clone(extra)
	for i := 1; i <= faultServices; i++ {
		want = append(want, fmt.Sprintf("%s_s%d", e.ns, i))
	}
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(objs.services)); !slices.Equal(got, want) {
		t.Errorf("services %v, want %v", got, want)
	}
	if len(objs.networks) != 1 || len(objs.networks[e.ns+"_back"]) != 1 {
		t.Errorf("networks %v, want one %s_back", networkNames(objs), e.ns)
	}
	if len(objs.configs) != 1 {
		t.Errorf("configs %v, want one settings config", slices.Sorted(maps.Keys(objs.configs)))
	}
	var wantRevs []int
	for n := 1; n <= revisions; n++ {
		wantRevs = append(wantRevs, n)
	}
	if !slices.Equal(objs.revisions, wantRevs) {
		t.Errorf("revision configs %v, want %v", objs.revisions, wantRevs)
	}
}

func networkNames(o objects) []string {
	var out []string
	for name, list := range o.networks {
		for range list {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// versions maps each service to its writeMark.
func versions(o objects) map[string]string {
	out := map[string]string{}
	for name, s := range o.services {
		out[name] = writeMark(s)
	}
	return out
}

// writeMark is a digest of what a write to s changes: its spec or, when
// the spec is the same, its previous spec. The version index is no
// measure: Swarm moves it itself as a service's status settles.
func writeMark(s swarm.Service) string {
	b, err := json.Marshal([]any{s.ID, s.Spec, s.PreviousSpec})
	if err != nil {
		return "unencodable: " + err.Error()
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// handMade creates a service nobody declared, labelled into namespace ns
// (the release's own, or another), that no prune may ever delete.
func (e *faultEnv) handMade(t *testing.T, ns, name string) string {
	t.Helper()
	one := uint64(1)
	full := ns + "_" + name
	_, err := e.docker.ServiceCreate(t.Context(), swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: full, Labels: map[string]string{stack.LabelNamespace: ns}},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: e.v1,
			Labels: map[string]string{stack.LabelNamespace: ns}}},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &one}},
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR},
	}, swarm.ServiceCreateOptions{})
	if err != nil {
		t.Fatalf("create hand-made service %s: %v", full, err)
	}
	return full
}

// syncsOf returns the outcomes of the history's syncs, oldest first.
func syncsOf(h wire.History) []string {
	var out []string
	for i := len(h.Syncs) - 1; i >= 0; i-- {
		out = append(out, h.Syncs[i].Outcome)
	}
	return out
}

// engineProxy is a unix-socket proxy in front of a Docker Engine that can
// slow service writes down, so that a test acts while an apply is half
// done. Every other request, the events stream included, passes at once.
type engineProxy struct {
	sock   string
	delay  atomic.Int64 // nanoseconds each service create or update waits
	writes atomic.Int64 // service creates and updates forwarded
}

// startEngineProxy serves sock, forwarding to the Engine socket target,
// until the test ends.
func startEngineProxy(t *testing.T, target, sock string) *engineProxy {
	t.Helper()
	p := &engineProxy{sock: sock}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: "docker"})
			r.Out.Host = "docker"
		},
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", target)
		}},
		FlushInterval: -1, // the events stream must pass line by line
		// An Engine that is away answers 502: what the controller sees.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/services/") &&
			(strings.HasSuffix(r.URL.Path, "/create") || strings.HasSuffix(r.URL.Path, "/update")) {
			select {
			case <-time.After(time.Duration(p.delay.Load())):
			case <-r.Context().Done():
				// The client gave up before the write reached the Engine.
				return
			}
			p.writes.Add(1)
		}
		rp.ServeHTTP(w, r)
	})
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return p
}

// slow makes every later service write wait d before it reaches the Engine.
func (p *engineProxy) slow(d time.Duration) { p.delay.Store(int64(d)) }

// waitWrites waits until n more service writes than base passed the proxy.
func (p *engineProxy) waitWrites(t *testing.T, base, n int64) {
	t.Helper()
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		got := p.writes.Load() - base
		return got >= n, fmt.Sprintf("%d service writes, want %d", got, n)
	})
}

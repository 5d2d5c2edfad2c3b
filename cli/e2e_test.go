package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/wire"
)

// skepBinary is the skep binary TestMain builds once for the end-to-end
// tests, which run it as people do: as subprocesses.
var skepBinary string

func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		dir, err := os.MkdirTemp("", "skep-cli-e2e")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		skepBinary = filepath.Join(dir, "skep")
		build := exec.Command("go", "build", "-o", skepBinary, "../cmd/skep")
		// Static, so that the self-management test can package it FROM
		// scratch as the controller's image.
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build skep:", err)
			os.Exit(1)
		}
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// cliEnv is a running `skep controller` subprocess and the environment
// the CLI needs to reach it.
type cliEnv struct {
	env    []string
	server string
	ns     string
	repo   *harness.Repo
	v1, v2 string
	apps   string         // the app-set file the controller reads
	docker *client.Client // the swarm the controller deploys to
	// id is the controller id launch gives, the same for each launch: a
	// restart on the same data is the same controller.
	id string
	// stop stops the controller launched last, as the end of the test
	// would; calls after the first do nothing. kill ends it with SIGKILL
	// instead, as a crash would, and waits until it is gone.
	stop, kill func()
}

// Secrets the controller of the end-to-end tests holds; its output must
// never show them.
const (
	adminTokenValue    = "cli-e2e-admin-token"
	webhookSecretValue = "cli-e2e-webhook-secret"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startController(t *testing.T) *cliEnv {
	t.Helper()
	if skepBinary == "" {
		t.Skip("no skep binary in -short mode")
	}
	cli := harness.RequireSwarm(t)
	git := harness.StartGitServer(t, harness.GitServerOptions{})
	e := &cliEnv{
		docker: cli,
		ns:     harness.Name(t, "cli"),
		v1:     harness.TestImage(t, cli, harness.ImageOptions{Version: "v1"}),
		v2:     harness.TestImage(t, cli, harness.ImageOptions{Version: "v2"}),
	}
	harness.CleanupStack(t, cli, e.ns)
	e.repo = git.CreateRepo(t, "app")
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": fmt.Sprintf(`services:
  web:
    image: ${IMAGE}
    deploy: {endpoint_mode: dnsrr, replicas: 1}
    ports: [{target: 8080, published: %d, mode: host}]
`, harness.FreePort(t)), ".env": "IMAGE=" + e.v1 + "\n"})
	dir := t.TempDir()
	apps := filepath.Join(dir, "apps.yaml")
	if err := os.WriteFile(apps, []byte(fmt.Sprintf(`apiVersion: skep/v1
applications:
  - name: web
    release: %s
    source: {repo: %s, revision: main}
    syncPolicy: {automated: false, interval: 1h, resolveImage: never}
`, e.ns, e.repo.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	e.apps = apps
	// The app set is re-read every two seconds, so a test can empty it
	// and see the controller take that in.
	launch(t, e, dir, apps, "--appset-interval", "2s")
	return e
}

// launch starts `skep controller` on the app-set file apps with an admin
// token and a generic webhook secret, extra flags added, sets e's server
// and environment for the CLI, and waits until the controller is ready.
// The controller is stopped with SIGINT when the test ends and must exit
// cleanly, and its output must hold neither secret.
func launch(t *testing.T, e *cliEnv, dir, apps string, extra ...string) {
	t.Helper()
	launchLogging(t, e, dir, apps, t.Output(), extra...)
}

// launchLogging is launch with the controller's stdout and stderr (its log)
// written to logs.
func launchLogging(t *testing.T, e *cliEnv, dir, apps string, logs io.Writer, extra ...string) {
	t.Helper()
	tokenFile := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(tokenFile, []byte(adminTokenValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hooks := filepath.Join(dir, "webhooks.yaml")
	if err := os.WriteFile(filepath.Join(dir, "hook.key"), []byte(webhookSecretValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hooks, []byte("webhooks:\n  - provider: generic\n    secretFile: hook.key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	e.server = "http://" + addr
	if e.id == "" {
		e.id = harness.Name(t, "ctl")
	}
	args := append([]string{"controller", "--config", apps, "--listen", addr, "--data", filepath.Join(dir, "data"),
		"--controller-id", e.id, "--log-level", "debug", "--webhooks-file", hooks}, extra...)
	ctrl := exec.Command(skepBinary, args...)
	ctrl.Env = append(os.Environ(), "SKEP_ADMIN_TOKEN_FILE="+tokenFile)
	// The output is kept to check, when the controller has stopped, that
	// it printed no secret.
	output := &lockedBuffer{out: logs}
	ctrl.Stdout, ctrl.Stderr = output, output
	if err := ctrl.Start(); err != nil {
		t.Fatal(err)
	}
	// Registered before the stop below, so it runs after the controller
	// has exited and written everything: a debug log of a whole session of
	// requests, webhooks and syncs holds neither secret.
	t.Cleanup(func() {
		log := output.String()
		if !strings.Contains(log, "level=DEBUG") {
			t.Errorf("the controller's output lacks its debug lines; was it captured?\n%s", log)
		}
		for _, secret := range []string{adminTokenValue, webhookSecretValue} {
			if strings.Contains(log, secret) {
				t.Errorf("the controller printed a secret (%s...)", secret[:8])
			}
		}
	})
	exited := make(chan error, 1)
	go func() { exited <- ctrl.Wait() }()
	var killed atomic.Bool
	e.stop = sync.OnceFunc(func() {
		_ = ctrl.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			if err != nil && !killed.Load() {
				t.Errorf("controller exited with %v after SIGINT", err)
			}
		case <-time.After(30 * time.Second):
			_ = ctrl.Process.Kill()
			<-exited
			t.Error("controller did not stop within 30s of SIGINT")
		}
	})
	t.Cleanup(e.stop)
	e.kill = func() {
		killed.Store(true)
		_ = ctrl.Process.Kill()
		e.stop()
	}
	e.env = append(os.Environ(), "SKEP_SERVER="+e.server, "SKEP_TOKEN_FILE="+tokenFile, "HOME="+dir, "SKEP_TOKEN=", "SKEP_CONFIG=")
	harness.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		req, _ := http.NewRequestWithContext(ctx, "GET", e.server+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
}

// run runs skep with args and returns stdout, stderr and the exit code.
func (e *cliEnv) run(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, skepBinary, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("run skep %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// ok runs skep and fails the test unless it exits 0.
func (e *cliEnv) ok(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := e.run(t, e.env, args...)
	if code != 0 {
		t.Fatalf("skep %s exited %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func (e *cliEnv) appJSON(t *testing.T) wire.ApplicationDetail {
	t.Helper()
	var d wire.ApplicationDetail
	if err := json.Unmarshal([]byte(e.ok(t, "app", "get", "web", "-o", "json")), &d); err != nil {
		t.Fatalf("skep app get -o json is not the API's JSON: %v", err)
	}
	return d
}

func liveImage(d wire.ApplicationDetail) string {
	for _, r := range d.Releases {
		for _, s := range r.Services {
			return s.Image
		}
	}
	return ""
}

// follower runs `skep events --follow -o json` and collects its lines.
type follower struct {
	mu    sync.Mutex
	lines []string
}

func (f *follower) events() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []map[string]any
	for _, l := range f.lines {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func (e *cliEnv) follow(t *testing.T) *follower {
	t.Helper()
	return followStream(t, e.env, t.Output(), "--app", "web")
}

// followStream runs `skep events --follow -o json` with env and the extra
// filter args, its stderr to stderr, and collects its lines until the
// test ends.
func followStream(t *testing.T, env []string, stderr io.Writer, args ...string) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cmd := exec.CommandContext(ctx, skepBinary, append([]string{"events", "--follow", "-o", "json"}, args...)...)
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &follower{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			f.mu.Lock()
			f.lines = append(f.lines, sc.Text())
			f.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = cmd.Wait()
	})
	return f
}

func TestCLIEndToEnd(t *testing.T) {
	e := startController(t)
	first := e.repo.Head(t, "main")
	events := e.follow(t)

	t.Run("list shows the application out of sync", func(t *testing.T) {
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			out := e.ok(t, "app", "list")
			return strings.Contains(out, "web") && strings.Contains(out, "out-of-sync"), out
		})
		var list wire.ApplicationList
		if err := json.Unmarshal([]byte(e.ok(t, "app", "list", "-o", "json")), &list); err != nil || len(list.Applications) != 1 {
			t.Errorf("app list -o json = %+v, %v", list, err)
		}
		if out := e.ok(t, "app", "list", "-o", "yaml"); !strings.Contains(out, "applications:\n  - name: web") {
			t.Errorf("app list -o yaml:\n%s", out)
		}
	})

	t.Run("diff shows the install", func(t *testing.T) {
		if out := e.ok(t, "app", "diff", "web"); !strings.Contains(out, "install") || !strings.Contains(out, e.ns+"_web") && !strings.Contains(out, "web") {
			t.Errorf("app diff:\n%s", out)
		}
	})

	t.Run("sync --wait deploys, shows progress and exits with the outcome", func(t *testing.T) {
		out := e.ok(t, "app", "sync", "web", "--wait")
		for _, want := range []string{"queued", "succeeded", "services 1/1 converged"} {
			if !strings.Contains(out, want) {
				t.Errorf("sync --wait output lacks %q:\n%s", want, out)
			}
		}
		if img := liveImage(e.appJSON(t)); img != e.v1 {
			t.Errorf("image after sync = %q, want %q", img, e.v1)
		}
	})

	t.Run("get shows the release and its task", func(t *testing.T) {
		out := e.ok(t, "app", "get", "web")
		for _, want := range []string{"Release " + e.ns + ": revision 1", e.ns + "_web", "running/running", "Last sync:"} {
			if !strings.Contains(out, want) {
				t.Errorf("app get lacks %q:\n%s", want, out)
			}
		}
	})

	second := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
	t.Run("refresh then sync deploys the new commit", func(t *testing.T) {
		e.ok(t, "app", "refresh", "web")
		harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
			a := e.appJSON(t).Application
			return a.Revision == second, "revision " + a.Revision
		})
		e.ok(t, "app", "sync", "web", "--wait")
		if img := liveImage(e.appJSON(t)); img != e.v2 {
			t.Errorf("image after second sync = %q, want %q", img, e.v2)
		}
	})

	t.Run("history lists both revisions by admin", func(t *testing.T) {
		out := e.ok(t, "app", "history", "web")
		if !strings.Contains(out, first[:12]) || !strings.Contains(out, second[:12]) || !strings.Contains(out, "admin") {
			t.Errorf("app history:\n%s", out)
		}
		var h wire.History
		if err := json.Unmarshal([]byte(e.ok(t, "app", "history", "web", "-o", "json")), &h); err != nil || len(h.Releases[0].Revisions) != 2 {
			t.Errorf("app history -o json = %+v, %v", h, err)
		}
	})

	t.Run("rollback --wait redeploys revision 1 and holds", func(t *testing.T) {
		out := e.ok(t, "app", "rollback", "web", "1", "--wait")
		if !strings.Contains(out, "held there") || !strings.Contains(out, "succeeded") {
			t.Errorf("rollback output:\n%s", out)
		}
		d := e.appJSON(t)
		if img := liveImage(d); img != e.v1 || d.Application.Held == nil || d.Application.Held.Revision != first {
			t.Errorf("after rollback: image %q held %+v, want %q held at %s", img, d.Application.Held, e.v1, first)
		}
		if out := e.ok(t, "app", "list"); !strings.Contains(out, "(held)") {
			t.Errorf("app list does not show the hold:\n%s", out)
		}
	})

	t.Run("events --follow streamed the syncs with the actor", func(t *testing.T) {
		harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
			n := 0
			for _, ev := range events.events() {
				if ev["type"] == "sync-succeeded" && ev["actor"] == "admin" && ev["application"] == "web" {
					n++
				}
			}
			return n == 3, fmt.Sprintf("%d sync-succeeded by admin in %v", n, events.events())
		})
		if out := e.ok(t, "events", "--app", "web", "--type", "sync-started"); strings.Count(out, "sync-started") != 3 {
			t.Errorf("events --type sync-started:\n%s", out)
		}
	})

	t.Run("status reports a ready controller", func(t *testing.T) {
		if out := e.ok(t, "status"); !strings.Contains(out, "Ready:         true") && !strings.Contains(out, "true") {
			t.Errorf("status:\n%s", out)
		}
	})

	t.Run("failures exit non-zero with a clear message", func(t *testing.T) {
		env := append(append([]string(nil), e.env...), "SKEP_TOKEN_FILE=", "SKEP_TOKEN=wrong")
		for _, tc := range []struct {
			name string
			env  []string
			args []string
			want string
		}{
			{"unknown token", env, []string{"app", "list"}, "unauthorized"},
			{"unknown application", e.env, []string{"app", "get", "nope"}, "not found"},
			{"unreachable server", append(append([]string(nil), e.env...), "SKEP_SERVER=http://"+freeAddr(t)), []string{"status"}, "cannot reach skep"},
			{"bad output format", e.env, []string{"app", "list", "-o", "xml"}, "--output"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, errOut, code := e.run(t, tc.env, tc.args...)
				if code == 0 || !strings.Contains(errOut, tc.want) {
					t.Errorf("skep %v exited %d with %q, want non-zero naming %q", tc.args, code, errOut, tc.want)
				}
				if strings.Contains(errOut, adminTokenValue) {
					t.Error("an error printed the token")
				}
			})
		}
	})

	t.Run("a webhook signed with the secret is taken and a forged one refused", func(t *testing.T) {
		body := []byte(fmt.Sprintf(`{"repository":%q,"ref":"refs/heads/main"}`, e.repo.URL))
		for _, tc := range []struct {
			secret string
			want   int
		}{{"not-the-secret", http.StatusUnauthorized}, {webhookSecretValue, http.StatusAccepted}} {
			req, _ := http.NewRequestWithContext(t.Context(), "POST", e.server+"/api/v1/webhooks/generic", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Skep-Signature", "sha256="+hex.EncodeToString(api.Sign(body, wire.NewToken(tc.secret))))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want || strings.Contains(string(answer), webhookSecretValue) {
				t.Errorf("webhook signed with %q = %d %s, want %d without the secret", tc.secret[:3], resp.StatusCode, answer, tc.want)
			}
		}
	})

	// Last, as it empties the app set: the release keeps running, the
	// API lists no application, and the status shows the release left in
	// place and why nothing was pruned.
	t.Run("an emptied app set lists the release it leaves running as orphaned", func(t *testing.T) {
		if err := os.WriteFile(e.apps, []byte("apiVersion: skep/v1\napplications: []\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var st wire.ControllerStatus
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			out := e.ok(t, "status", "-o", "json")
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				return false, err.Error()
			}
			return st.Applications == 0 && len(st.OrphanedReleases) > 0, out
		})
		want := wire.OrphanedRelease{Application: "web", Release: e.ns, Swarm: "", Reason: "app set is empty; pruning held"}
		if len(st.OrphanedReleases) != 1 || st.OrphanedReleases[0] != want || !slices.Equal(st.Orphaned, []string{"web"}) {
			t.Errorf("status orphans = %+v, names %v; want [%+v], [web]", st.OrphanedReleases, st.Orphaned, want)
		}
		if out := e.ok(t, "status"); !strings.Contains(out, e.ns+" (web):") || !strings.Contains(out, "app set is empty; pruning held") {
			t.Errorf("skep status does not show the orphaned release and why:\n%s", out)
		}
		var list wire.ApplicationList
		if err := json.Unmarshal([]byte(e.ok(t, "app", "list", "-o", "json")), &list); err != nil || len(list.Applications) != 0 {
			t.Errorf("app list with an empty app set = %+v, %v; want none", list.Applications, err)
		}
		services, err := e.docker.ServiceList(t.Context(), swarm.ServiceListOptions{Filters: filters.NewArgs(filters.Arg("name", e.ns+"_web"))})
		if err != nil || len(services) != 1 {
			t.Errorf("the release's service after emptying the app set: %d found, %v; want it still running", len(services), err)
		}
	})
}

package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/skep-cd/skep/wire"
)

// Controller is a running `skep controller` subprocess and the API it
// serves.
type Controller struct {
	// URL is the API's base address, "http://127.0.0.1:<port>".
	URL string
	// Started is when the process was started, just before exec.
	Started time.Time

	token   string
	secret  string // the generic webhook's secret
	logPath string
	cmd     *exec.Cmd
	exited  chan error
	stopped atomic.Bool
}

// ControllerOptions say how to start a controller.
type ControllerOptions struct {
	Binary     string // the skep binary
	Dir        string // holds the data directory, the token, webhook and log files
	AppSet     string // the app-set file
	ID         string // the controller id, unique to the run
	DockerHost string // DOCKER_HOST, normally the counting proxy
	LogLevel   string // --log-level; "" is the controller's default
	// Addr is the API's address; "" picks a free loopback port. A replica
	// restarted on its data keeps its address.
	Addr string
	// Args are more flags, Env more environment variables (NAME=value).
	Args, Env []string
	// Log appends to the log file of an earlier run in Dir, rather than
	// starting it anew.
	Log bool
}

// StartController starts `skep controller` and waits until /readyz
// answers 200. It is stopped with SIGINT when tb ends, if Stop was not
// called before.
func StartController(tb testing.TB, opts ControllerOptions) *Controller {
	tb.Helper()
	c := &Controller{token: "bench-admin-token", secret: "bench-webhook-secret", logPath: filepath.Join(opts.Dir, "controller.log")}
	tokenFile := filepath.Join(opts.Dir, "admin.token")
	secretFile := filepath.Join(opts.Dir, "webhook.secret")
	webhooks := filepath.Join(opts.Dir, "webhooks.yaml")
	for path, data := range map[string]string{
		tokenFile:  c.token + "\n",
		secretFile: c.secret + "\n",
		webhooks:   "webhooks:\n  - provider: generic\n    secretFile: " + secretFile + "\n",
	} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	flag := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if opts.Log {
		flag = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	logFile, err := os.OpenFile(c.logPath, flag, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	defer logFile.Close() // the child holds its own descriptor
	addr := opts.Addr
	if addr == "" {
		addr = freeAddr(tb)
	}
	c.URL = "http://" + addr
	c.cmd = exec.Command(opts.Binary, "controller", "--config", opts.AppSet, "--listen", addr,
		"--data", filepath.Join(opts.Dir, "data"), "--controller-id", opts.ID, "--webhooks-file", webhooks,
		"--log-format", "json")
	if opts.LogLevel != "" {
		c.cmd.Args = append(c.cmd.Args, "--log-level", opts.LogLevel)
	}
	c.cmd.Args = append(c.cmd.Args, opts.Args...)
	c.cmd.Env = append(os.Environ(), "DOCKER_HOST="+opts.DockerHost, "SKEP_ADMIN_TOKEN_FILE="+tokenFile)
	c.cmd.Env = append(c.cmd.Env, opts.Env...)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	c.Started = time.Now()
	if err := c.cmd.Start(); err != nil {
		tb.Fatalf("start controller: %v", err)
	}
	c.exited = make(chan error, 1)
	go func() { c.exited <- c.cmd.Wait() }()
	tb.Cleanup(func() { c.Stop(tb) })
	c.waitReady(tb)
	return c
}

func (c *Controller) waitReady(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-c.exited:
			c.stopped.Store(true)
			tb.Fatalf("controller exited before it was ready: %v\n%s", err, c.logTail())
		default:
		}
		resp, err := http.Get(c.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatalf("controller not ready within a minute\n%s", c.logTail())
}

// Stop ends the controller with SIGINT, as an operator would, and waits
// up to 30 s before it kills it. A second call does nothing.
func (c *Controller) Stop(tb testing.TB) {
	tb.Helper()
	if c.stopped.Load() {
		return
	}
	c.stopped.Store(true)
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-c.exited:
		if err != nil {
			tb.Errorf("controller exited with %v after SIGINT\n%s", err, c.logTail())
		}
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
		tb.Errorf("controller did not stop within 30s of SIGINT")
	}
}

// Signal sends sig to the controller process.
func (c *Controller) Signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("signal %v to the controller: %v", sig, err)
	}
}

// Kill ends the controller with SIGKILL and waits for it to be gone.
func (c *Controller) Kill(tb testing.TB) {
	tb.Helper()
	c.Signal(tb, syscall.SIGKILL)
	<-c.exited
	c.stopped.Store(true)
}

// Terminate sends sig (SIGTERM: Swarm stopping the task) and returns once
// the controller exited, failing tb when it did not within a minute or
// exited with an error.
func (c *Controller) Terminate(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	c.Signal(tb, sig)
	c.stopped.Store(true)
	select {
	case err := <-c.exited:
		if err != nil {
			tb.Errorf("controller exited with %v after %v\n%s", err, sig, c.logTail())
		}
	case <-time.After(time.Minute):
		_ = c.cmd.Process.Kill()
		<-c.exited
		tb.Errorf("controller did not stop within a minute of %v", sig)
	}
}

// Exited reports whether the process ended.
func (c *Controller) Exited() bool { return c.stopped.Load() }

// clockTick is the kernel's USER_HZ, the unit of /proc/PID/stat's times:
// 100 on every Linux architecture Skep runs on.
const clockTick = 10 * time.Millisecond

// CPU is the CPU time the controller has used so far, user and system,
// from /proc/PID/stat (10 ms resolution).
func (c *Controller) CPU(tb testing.TB) time.Duration {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		tb.Fatalf("controller CPU: %v", err)
	}
	// The command name, in parentheses, may hold spaces: fields are
	// counted after its closing parenthesis, where field 3 (state) starts.
	_, rest, _ := strings.Cut(string(data), ") ")
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		tb.Fatalf("controller CPU: short /proc stat %q", data)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("controller CPU: /proc stat %q", data)
	}
	return time.Duration(utime+stime) * clockTick
}

// RSS is the controller's resident set size in bytes (VmRSS).
func (c *Controller) RSS(tb testing.TB) int64 { return c.status(tb, "VmRSS") }

// PeakRSS is the most the controller held resident since it started
// (VmHWM).
func (c *Controller) PeakRSS(tb testing.TB) int64 { return c.status(tb, "VmHWM") }

// RSSParts splits RSS: anonymous memory (the Go heap, stacks, SQLite's
// cache) and file-backed pages (mostly the binary's code and read-only
// data, as far as it was touched).
func (c *Controller) RSSParts(tb testing.TB) (anon, file int64) {
	return c.status(tb, "RssAnon"), c.status(tb, "RssFile")
}

// status reads one "kB" field of the controller's /proc status, in bytes.
func (c *Controller) status(tb testing.TB, field string) int64 {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		tb.Fatalf("controller %s: %v", field, err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				tb.Fatalf("controller %s: %q", field, line)
			}
			return kb << 10
		}
	}
	tb.Fatalf("controller %s: not in /proc status", field)
	return 0
}

// HeapInUse is the Go heap's in-use bytes (go_memstats_heap_inuse_bytes).
func (c *Controller) HeapInUse(ctx context.Context) (int64, error) {
	v, err := c.gauge(ctx, "go_memstats_heap_inuse_bytes")
	return int64(v), err
}

// Renders counts the reconciles that rendered and compared: every one
// (skep_reconcile_total, all applications and outcomes) but the quiet
// ones (skep_reconcile_quiet_total), both from one scrape. A tick that
// ends while the scrape gathers may still count in the one and not yet
// in the other: see settle.
func (c *Controller) Renders(ctx context.Context) (float64, error) {
	var all, quiet float64
	found := false
	err := c.samples(ctx, func(name, labels string, v float64) {
		switch {
		case name == "skep_reconcile_total":
			all += v
		case name == "skep_reconcile_quiet_total" && labels == "":
			quiet, found = v, true
		}
	})
	if err == nil && !found {
		err = errors.New("no skep_reconcile_quiet_total in /metrics")
	}
	return all - quiet, err
}

// gauge reads the value of the unlabelled series name from /metrics.
func (c *Controller) gauge(ctx context.Context, name string) (float64, error) {
	out, found := 0.0, false
	err := c.samples(ctx, func(n, labels string, v float64) {
		if n == name && labels == "" {
			out, found = v, true
		}
	})
	if err == nil && !found {
		err = fmt.Errorf("no %s in /metrics", name)
	}
	return out, err
}

// samples scrapes /metrics once and calls each with every sample: its
// metric name, its label list as written between the braces ("" for
// none) and its value.
func (c *Controller) samples(ctx context.Context, each func(name, labels string, value float64)) error {
	return c.get(ctx, "/metrics", func(r io.Reader) error {
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			cut := strings.LastIndexByte(line, ' ')
			if line == "" || line[0] == '#' || cut < 0 {
				continue
			}
			series := line[:cut]
			v, err := strconv.ParseFloat(line[cut+1:], 64)
			if err != nil {
				return fmt.Errorf("metric line %q: %w", line, err)
			}
			name, labels, _ := strings.Cut(series, "{")
			each(name, strings.TrimSuffix(labels, "}"), v)
		}
		return sc.Err()
	})
}

// Applications lists the applications as the API reports them.
func (c *Controller) Applications(ctx context.Context) ([]wire.Application, error) {
	var list wire.ApplicationList
	if err := c.get(ctx, "/api/v1/applications", func(r io.Reader) error { return json.NewDecoder(r).Decode(&list) }); err != nil {
		return nil, err
	}
	return list.Applications, nil
}

// Reconciles returns skep_reconcile_total per application, every outcome
// summed, from /metrics.
func (c *Controller) Reconciles(ctx context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	err := c.samples(ctx, func(name, labels string, v float64) {
		if name == "skep_reconcile_total" {
			out[labelValue(labels, "application")] += v
		}
	})
	return out, err
}

// labelValue returns the value of label name in a Prometheus label list.
func labelValue(labels, name string) string {
	_, rest, ok := strings.Cut(labels, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

func (c *Controller) get(ctx context.Context, path string, decode func(io.Reader) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	return decode(resp.Body)
}

// Webhook posts a generic push of repo's main branch, signed as
// docs/api.md says: X-Skep-Signature is sha256= and the hex HMAC-SHA256
// of the body under the secret. delivery must be unique per call. It
// returns once the controller answered 202.
func (c *Controller) Webhook(ctx context.Context, repo, delivery string) error {
	body, err := json.Marshal(map[string]string{"repository": repo, "ref": "refs/heads/main"})
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, []byte(c.secret))
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+"/api/v1/webhooks/generic", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Skep-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("X-Skep-Delivery", delivery)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("webhook: %s: %s", resp.Status, bytes.TrimSpace(answer))
	}
	return nil
}

// LogCount counts the controller's log lines whose message is msg.
func (c *Controller) LogCount(tb testing.TB, msg string) int {
	tb.Helper()
	n := 0
	for _, entry := range c.logEntries(tb) {
		if entry.Msg == msg {
			n++
		}
	}
	return n
}

// LogErrors returns the controller's log lines at level ERROR so far, each
// as "message: app: err".
func (c *Controller) LogErrors(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, entry := range c.logEntries(tb) {
		if entry.Level == "ERROR" {
			out = append(out, fmt.Sprintf("%s: %s: %s", entry.Msg, entry.App, entry.Err))
		}
	}
	return out
}

// logEntry is the part of a JSON log line the benchmarks read.
type logEntry struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
	App   string `json:"app"`
	Err   string `json:"err"`
}

// logEntries reads the controller's log; lines that are not JSON (a
// panic's stack) are left out.
func (c *Controller) logEntries(tb testing.TB) []logEntry {
	tb.Helper()
	data, err := os.ReadFile(c.logPath)
	if err != nil {
		tb.Fatal(err)
	}
	var out []logEntry
	for line := range strings.Lines(string(data)) {
		var entry logEntry
		if json.Unmarshal([]byte(line), &entry) == nil {
			out = append(out, entry)
		}
	}
	return out
}

// LogTail returns the last lines of the controller's log, for a failure.
func (c *Controller) LogTail() string { return c.logTail() }

// logTail returns the last lines of the controller's log, for a failure.
func (c *Controller) logTail() string {
	data, _ := os.ReadFile(c.logPath)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

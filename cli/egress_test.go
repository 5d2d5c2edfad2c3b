package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
)

// A repository on an internal address is refused unless
// --allow-private-hosts lists it: the git server on 127.0.0.1 is read under
// the default (which allows loopback) and refused, before any request,
// when only another network is allowed.
func TestDeployRefusesAGitHostOnAnInternalAddressUnlessAllowed(t *testing.T) {
	harness.RequireSwarm(t)
	git := harness.StartGitServer(t, harness.GitServerOptions{})
	repo := git.CreateRepo(t, "egress")
	repo.Commit(t, "main", map[string]string{"compose.yaml": "services:\n  web:\n    image: example.org/web:v1\n    deploy: {endpoint_mode: dnsrr}\n"})
	if !strings.Contains(repo.URL, "127.0.0.1") {
		t.Fatalf("the test git server is at %s; the test needs it on 127.0.0.1", repo.URL)
	}
	apps := writeTemp(t, "apps.yaml", fmt.Sprintf("apiVersion: skep/v1\napplications:\n  - name: web\n    release: %s\n    source: {repo: %s, revision: main}\n    syncPolicy: {resolveImage: never}\n",
		harness.Name(t, "egress"), repo.URL))
	for _, tc := range []struct {
		name  string
		allow []string
		want  string // in the output; "" for success
	}{
		{name: "the default allows loopback", want: ""},
		{name: "another network only", allow: []string{"--allow-private-hosts", "10.0.0.0/8"},
			want: "127.0.0.1 is an internal address; allow it with --allow-private-hosts"},
		{name: "no internal address", allow: []string{"--allow-private-hosts", ""}, want: "host refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"deploy", "--dry-run", "--config", apps, "--data", t.TempDir()}, tc.allow...)
			code := Main(t.Context(), args, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			switch {
			case tc.want == "" && code != ExitOK:
				t.Errorf("skep deploy --dry-run = exit %d, want success:\n%s", code, out)
			case tc.want != "" && (code == ExitOK || !strings.Contains(out, tc.want)):
				t.Errorf("skep deploy --dry-run %v = exit %d, want a failure saying %q:\n%s", tc.allow, code, tc.want, out)
			}
		})
	}
}

// refusedServer serves h on 127.0.0.2, an address a policy allowing
// only 127.0.0.1/32 refuses, and counts the requests it receives.
func refusedServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.2 (all of 127.0.0.0/8 is loopback on Linux): %v", err)
	}
	var asked atomic.Int64
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		h.ServeHTTP(w, r)
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &asked
}

// redirectTo answers every request on 127.0.0.1 with a 302 to the same
// path and query under to.
func redirectTo(t *testing.T, to string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, to+r.URL.RequestURI(), http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A git host the policy allows that redirects to one it refuses gains
// nothing: the redirect is followed by a dial the policy refuses, and the
// refused address is never asked. The repository behind 127.0.0.2 is a
// real one, so a controller that followed the redirect would deploy it.
func TestDeployRefusesAGitRedirectToARefusedAddress(t *testing.T) {
	harness.RequireSwarm(t)
	git := harness.StartGitServer(t, harness.GitServerOptions{})
	repo := git.CreateRepo(t, "moved")
	repo.Commit(t, "main", map[string]string{"compose.yaml": "services:\n  web:\n    image: example.org/web:v1\n    deploy: {endpoint_mode: dnsrr}\n"})
	target, err := url.Parse(git.URL)
	if err != nil {
		t.Fatal(err)
	}
	internal, asked := refusedServer(t, httputil.NewSingleHostReverseProxy(target))
	allowed := redirectTo(t, internal.URL)
	apps := writeTemp(t, "apps.yaml", fmt.Sprintf("apiVersion: skep/v1\napplications:\n  - name: web\n    release: %s\n    source: {repo: %s, revision: main}\n    syncPolicy: {resolveImage: never}\n",
		harness.Name(t, "egress-redirect"), allowed.URL+"/"+repo.Name+".git"))
	var stdout, stderr bytes.Buffer
	code := Main(t.Context(), []string{"deploy", "--dry-run", "--config", apps, "--data", t.TempDir(), "--allow-private-hosts", "127.0.0.1/32"}, &stdout, &stderr)
	out := stdout.String() + stderr.String()
	want := "address refused: 127.0.0.2 is an internal address"
	if code == ExitOK || !strings.Contains(out, want) {
		t.Errorf("skep deploy --dry-run of a repository redirecting to 127.0.0.2 = exit %d, want a failure saying %q:\n%s", code, want, out)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the refused address was asked %d times, want 0", n)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
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

// The controller's webhook and forge notifiers dial through the egress
// policy: a receiver on an allowed address that redirects to a refused
// one has its event fail, naming the refusal, and the refused address is
// never asked.
func TestOutboundNotifiersRefuseARedirectToARefusedAddress(t *testing.T) {
	internal, asked := refusedServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("{}"))
	}))
	allowed := redirectTo(t, internal.URL)
	secrets := t.TempDir()
	hook := filepath.Join(secrets, "hook-url")
	token := filepath.Join(secrets, "token")
	for file, data := range map[string]string{hook: allowed.URL + "/hook", token: "t0ken"} {
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, notifier string
	}{
		{"webhook", "webhook: {url: {file: " + hook + "}}"},
		{"forge", "forge: {provider: gitea, url: " + allowed.URL + "/api/v1, token: {file: " + token + "}, repositories: {web: team/web}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := asked.Load()
			file := writeTemp(t, "notifications.yaml", "apiVersion: skep/v1\nkind: Notifications\nnotifiers:\n  - name: n\n    retries: 0\n    "+tc.notifier+"\n")
			flags := controllerFlags{notifications: file, allowPrivateHosts: "127.0.0.1/32"}
			var log syncBuffer
			outbound, err := flags.outbound(slog.New(slog.NewTextHandler(&log, nil)), nil)
			if err != nil || len(outbound) != 1 {
				t.Fatalf("outbound notifiers of %s = %v, %v; want one", file, outbound, err)
			}
			n := outbound[0]
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			wg.Go(func() { _ = n.(notify.Runner).Run(ctx) })
			t.Cleanup(func() { cancel(); wg.Wait() })
			n.Notify(ctx, notify.Event{Application: "web", Type: notify.SyncSucceeded, Revision: strings.Repeat("a", 40), At: time.Now()})
			counted := n.(notify.Counted)
			for st := counted.Stats(); st.Delivered+st.Failed == 0; st = counted.Stats() {
				select {
				case <-ctx.Done():
					t.Fatalf("the event was neither delivered nor failed: %+v", st)
				case <-time.After(10 * time.Millisecond):
				}
			}
			if st := counted.Stats(); st.Failed != 1 || !strings.Contains(log.String(), "address refused: 127.0.0.2 is an internal address") {
				t.Errorf("an event to a receiver redirecting to 127.0.0.2: %+v, log:\n%s\nwant it failed, naming the refusal", st, log.String())
			}
			if got := asked.Load() - before; got != 0 {
				t.Errorf("the refused address was asked %d times, want 0", got)
			}
		})
	}
}

func TestAllowPrivateHostsNamesABadEntry(t *testing.T) {
	apps := filepath.Join(t.TempDir(), "apps.yaml")
	if err := os.WriteFile(apps, []byte("apiVersion: skep/v1\napplications: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main(t.Context(), []string{"deploy", "--config", apps, "--data", t.TempDir(), "--allow-private-hosts", "10.0.0.0/8,intranet"}, &stdout, &stderr)
	if want := `--allow-private-hosts: entry 2 "intranet": want a CIDR prefix`; code != ExitUsage || !strings.Contains(stderr.String(), want) {
		t.Errorf("skep deploy with a bad --allow-private-hosts = exit %d, stderr %q; want a usage error naming %q", code, stderr.String(), want)
	}
}

package cli

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/skep-cd/skep/harness"
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

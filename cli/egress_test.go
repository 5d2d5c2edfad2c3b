package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestControllerRefusesToStartWithoutAnAPIToken(t *testing.T) {
	t.Setenv("SKEP_ADMIN_TOKEN", "")
	t.Setenv("SKEP_ADMIN_TOKEN_FILE", "")
	apps := filepath.Join(t.TempDir(), "apps.yaml")
	if err := os.WriteFile(apps, []byte("apiVersion: skep/v1\napplications: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no token at all", nil, "no API token configured: set SKEP_ADMIN_TOKEN_FILE (a file holding the admin token) or SKEP_ADMIN_TOKEN, or give --tokens-file or --oidc-file"},
		{"a tokens file with a problem", []string{"--tokens-file", writeTemp(t, "tokens.yaml", "tokens:\n  - name: a\n    role: boss\n    tokenEnv: X\n")}, "tokens.yaml:3:11: tokens[0].role"},
		{"a certificate without its key", []string{"--tls-cert", "x.pem"}, "--tls-cert and --tls-key go together"},
		{"an OIDC file with a problem", []string{"--oidc-file", writeTemp(t, "oidc.yaml", "ci:\n  - issuer: https://ci.example.org\n    audience: skep\n")}, "oidc.yaml:2:5: ci[0].rules: missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"controller", "--config", apps, "--listen", "127.0.0.1:0", "--data", t.TempDir()}, tc.args...)
			code := Main(t.Context(), args, &stdout, &stderr)
			if code == ExitOK || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("skep controller %v = exit %d, stderr %q; want a failure naming %q", tc.args, code, stderr.String(), tc.want)
			}
		})
	}
}

func writeTemp(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestYAMLOutputKeepsTheServersKeysAndOrder(t *testing.T) {
	var buf bytes.Buffer
	if err := output("yaml").print(&buf, []byte(`{"zeta":1,"alpha":{"b":[1,2],"a":"x y"},"empty":[]}`)); err != nil {
		t.Fatal(err)
	}
	want := "zeta: 1\nalpha:\n  b:\n    - 1\n    - 2\n  a: x y\nempty: []\n"
	if buf.String() != want {
		t.Errorf("yaml output:\n%s\nwant:\n%s", buf.String(), want)
	}
	buf.Reset()
	if err := output("json").print(&buf, []byte(`{"a":1}`)); err != nil || buf.String() != "{\"a\":1}\n" {
		t.Errorf("json output %q, %v; want the body unmodified with a newline", buf.String(), err)
	}
}

func TestParallelWritesMustBePositive(t *testing.T) {
	apps := filepath.Join(t.TempDir(), "apps.yaml")
	if err := os.WriteFile(apps, []byte("apiVersion: skep/v1\napplications: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"0", "-2"} {
		var stdout, stderr bytes.Buffer
		code := Main(t.Context(), []string{"deploy", "--config", apps, "--data", t.TempDir(), "--parallel-writes", n}, &stdout, &stderr)
		if want := "--parallel-writes: want a positive number, got " + n; code != ExitUsage || !strings.Contains(stderr.String(), want) {
			t.Errorf("skep deploy --parallel-writes %s = exit %d, stderr %q; want a usage error saying %q", n, code, stderr.String(), want)
		}
	}
}

func TestLocalManagersMustBeUnixOrTCPWithTLS(t *testing.T) {
	apps := writeTemp(t, "apps.yaml", "apiVersion: skep/v1\napplications: []\n")
	t.Setenv("DOCKER_CERT_PATH", "")
	for _, tc := range []struct {
		name, managers, want string
	}{
		{"an address without a scheme", "10.0.0.2:2376", `--local-managers: the local swarm's managers: local manager 1: want unix:///path or tcp://host:port, got "10.0.0.2:2376"`},
		{"tcp without TLS files", "unix:///run/m2.sock,tcp://10.0.0.3:2376", "local manager 2: host \"tcp://10.0.0.3:2376\": a tcp manager needs TLS: set DOCKER_CERT_PATH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(t.Context(), []string{"deploy", "--config", apps, "--data", t.TempDir(), "--local-managers", tc.managers}, &stdout, &stderr)
			if code != ExitUsage || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("skep deploy --local-managers %s = exit %d, stderr %q; want a usage error saying %q", tc.managers, code, stderr.String(), tc.want)
			}
		})
	}
}

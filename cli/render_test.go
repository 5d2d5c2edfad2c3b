package cli

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/skep-cd/skep/golden"
	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/sops"
	"github.com/skep-cd/skep/stack"
)

const (
	renderTestInput = "testdata/render/input/"
	renderFixtures  = "../testdata/compose/"
	imageEnv        = renderTestInput + "image.env"
)

// chartInput holds the chart package's test charts.
const chartInput = "../chart/testdata/"

func TestRenderGolden(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
	}{
		{name: "directory-as-yaml", args: []string{renderFixtures + "configs", "--env-file", imageEnv}, wantCode: ExitOK},
		{name: "file-as-json", args: []string{"-o", "json", renderFixtures + "networks/compose.yaml", "--env-file", imageEnv}, wantCode: ExitOK},
		{name: "secrets-redacted", args: []string{"-o", "json", renderFixtures + "secrets", "--env-file", imageEnv}, wantCode: ExitOK},
		{name: "extra-file-merged-after", args: []string{renderFixtures + "multi-file", "-f", renderFixtures + "multi-file/compose.prod.yaml", "--env-file", imageEnv, "--release", "shop"}, wantCode: ExitOK},
		{name: "env-files-in-order", args: []string{renderFixtures + "interpolation", "--env-file", renderFixtures + "interpolation/.env", "--env-file", imageEnv, "--controller-id", "ci"}, wantCode: ExitOK},
		{name: "warnings-on-stderr", args: []string{renderTestInput + "unsupported"}, wantCode: ExitOK},
		{name: "invalid-yaml-names-file-and-line", args: []string{renderTestInput + "bad-yaml"}, wantCode: ExitFailure},
		{name: "no-image-names-file-and-line", args: []string{renderFixtures + "basic"}, wantCode: ExitFailure},
		{name: "unset-required-variable-names-file-and-line", args: []string{renderFixtures + "interpolation", "--env-file", imageEnv}, wantCode: ExitFailure},
		{name: "host-path-refused", args: []string{renderTestInput + "host-path"}, wantCode: ExitFailure},
		{name: "host-path-allowed-by-flag", args: []string{renderTestInput + "host-path", "--allow-host-path", "/var/run/docker.sock"}, wantCode: ExitOK},
		{name: "hostile-commit-refused", args: []string{renderTestInput + "hostile", "--release", "web"}, wantCode: ExitFailure},
		{name: "hostile-commit-allowed-by-flags", args: []string{renderTestInput + "hostile", "--release", "web", "--allow-host-path", "/", "--allow-volume", "billing_db-data", "--allow-private-hosts", "169.254.169.254"}, wantCode: ExitOK},
		{name: "forged-labels-name-file-and-line", args: []string{renderTestInput + "forged-labels"}, wantCode: ExitFailure},
		{name: "chart-forged-labels-refused", args: []string{renderTestInput + "hostile-chart"}, wantCode: ExitFailure},
		{name: "missing-path", args: []string{renderTestInput + "missing"}, wantCode: ExitFailure},
		{name: "no-arguments-is-usage", args: nil, wantCode: ExitUsage},
		{name: "bad-output-is-usage", args: []string{"-o", "xml", renderTestInput + "host-path"}, wantCode: ExitUsage},
		{name: "chart-with-values-and-set", args: []string{chartInput + "web", "--values", chartInput + "values/staging.yaml", "--set", "replicas=4", "--allow-network", "traefik-public", "--release", "web"}, wantCode: ExitOK},
		{name: "chart-published-requirements-show-their-descriptions", args: []string{chartInput + "edge-whoami", "--values", chartInput + "edge-whoami/ci/extra-network-values.yaml", "--allow-network", "traefik-public", "--allow-network", "metrics", "--allow-network", "backoffice", "--release", "whoami"}, wantCode: ExitOK},
		{name: "chart-schema-error-names-the-value", args: []string{chartInput + "web", "--set", "replicas=many"}, wantCode: ExitFailure},
		{name: "chart-template-error-names-template-and-line", args: []string{chartInput + "index-error"}, wantCode: ExitFailure},
		{name: "chart-set-without-value-is-usage", args: []string{chartInput + "web", "--set", "replicas"}, wantCode: ExitUsage},
		{name: "chart-env-file-is-usage", args: []string{chartInput + "web", "--env-file", imageEnv}, wantCode: ExitUsage},
		{name: "compose-values-is-usage", args: []string{renderTestInput + "host-path", "--values", imageEnv}, wantCode: ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, append([]string{"render"}, tt.args...)...)
			if code != tt.wantCode {
				t.Errorf("skep render %s exit = %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(tt.args, " "), code, tt.wantCode, stdout, stderr)
			}
			got := fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", code, stdout, stderr)
			golden.Check(t, filepath.Join("testdata", "render", tt.name+".golden"), []byte(got))
		})
	}
}

func TestRenderNeverPrintsSecretValues(t *testing.T) {
	for _, format := range []string{"json", "yaml"} {
		code, stdout, stderr := run(t, "render", "-o", format, renderFixtures+"secrets", "--env-file", imageEnv)
		if code != ExitOK {
			t.Fatalf("skep render -o %s exit = %d: %s", format, code, stderr)
		}
		for _, file := range []string{"db_password.txt", "api_key.txt"} {
			value, err := os.ReadFile(renderFixtures + "secrets/" + file)
			if err != nil {
				t.Fatal(err)
			}
			for _, leak := range []string{strings.TrimSpace(string(value)), encodeBase64(value)} {
				if strings.Contains(stdout, leak) {
					t.Errorf("skep render -o %s prints the value of %s (%q)", format, file, leak)
				}
			}
		}
		if !strings.Contains(stdout, "<redacted sha256:") {
			t.Errorf("skep render -o %s shows no redaction marker:\n%s", format, stdout)
		}
	}
}

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func TestRenderDecryptsSopsFilesWithTheAgeIdentityAndMasksThem(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "..", filepath.Base(dir)+".agekey")
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	encrypt := func(name, plain string) []byte {
		t.Helper()
		data, err := sops.Encrypt(name, []byte(plain), id.Recipient().String())
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	write(keyFile, []byte(id.String()+"\n"))
	t.Cleanup(func() { os.Remove(keyFile) })
	write(filepath.Join(dir, "compose.yaml"), []byte("services:\n  api:\n    image: api:1\n    env_file: api.enc.env\n    secrets: [db]\nsecrets:\n  db:\n    file: ./db.enc.json\n"))
	write(filepath.Join(dir, "api.enc.env"), encrypt("api.enc.env", "API_TOKEN=tok-from-sops\n"))
	write(filepath.Join(dir, "db.enc.json"), encrypt("db.enc.json", `{"password": "pw-from-sops"}`))

	t.Setenv(EnvAgeIdentityFile, "")
	code, stdout, stderr := run(t, "render", "-o", "json", dir, "--age-identity", keyFile)
	if code != ExitOK {
		t.Fatalf("skep render --age-identity exit = %d: %s", code, stderr)
	}
	for _, leak := range []string{"tok-from-sops", "pw-from-sops", encodeBase64([]byte("pw-from-sops"))} {
		if strings.Contains(stdout+stderr, leak) {
			t.Errorf("skep render prints %q:\n%s", leak, stdout)
		}
	}
	if want := "API_TOKEN=" + sops.Mask("tok-from-sops", []string{"tok-from-sops"}); !strings.Contains(stdout, want) {
		t.Errorf("skep render shows no %q:\n%s", want, stdout)
	}

	// The variable names the file as the flag does; without either the
	// encrypted file is refused by name.
	t.Setenv(EnvAgeIdentityFile, keyFile)
	if code, _, stderr := run(t, "render", dir); code != ExitOK {
		t.Errorf("skep render with $%s exit = %d: %s", EnvAgeIdentityFile, code, stderr)
	}
	t.Setenv(EnvAgeIdentityFile, "")
	code, _, stderr = run(t, "render", dir)
	if code != ExitFailure || !strings.Contains(stderr, "api.enc.env") || !strings.Contains(stderr, "no age identity") {
		t.Errorf("skep render without an identity exit = %d, stderr %q; want 1 naming api.enc.env", code, stderr)
	}
}

// sopsRepo writes a compose directory whose .env is encrypted to a new
// age identity, and the identity's key file; it returns both paths.
func sopsRepo(t *testing.T, compose, dotenv string) (dir, keyFile string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	keyFile = filepath.Join(t.TempDir(), "key.txt")
	enc, err := sops.Encrypt(".env", []byte(dotenv), id.Recipient().String())
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		filepath.Join(dir, "compose.yaml"): []byte(compose),
		filepath.Join(dir, ".env"):         enc,
		keyFile:                            []byte(id.String() + "\n"),
	} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, keyFile
}

// revCompose takes REV from the encrypted .env; its image, labels and
// arguments hold the same digits in plain.
const revCompose = `services:
  web:
    image: nginx:1.27
    command: ["--workers", "1"]
    labels: {tier: "1", build: "rev-${REV}"}
    environment: {REV: "${REV}", PLAIN: "1"}
`

func TestRenderMasksOnlyFieldsThatCameFromAnEncryptedInput(t *testing.T) {
	dir, keyFile := sopsRepo(t, revCompose, "REV=1\n")
	t.Setenv(EnvAgeIdentityFile, "")
	code, stdout, stderr := run(t, "render", "-o", "json", dir, "--age-identity", keyFile)
	if code != ExitOK {
		t.Fatalf("skep render exit = %d: %s", code, stderr)
	}
	m := sops.Mask("1", []string{"1"})
	for _, want := range []string{`"Image": "nginx:1.27"`, `"REV=` + m + `"`, `"PLAIN=1"`, `"tier": "1"`, `"build": "rev-` + m + `"`, `"1"`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("skep render shows no %s:\n%s", want, stdout)
		}
	}
	for _, leak := range []string{`"REV=1"`, `"rev-1"`} {
		if strings.Contains(stdout, leak) {
			t.Errorf("skep render shows the decrypted %s:\n%s", leak, stdout)
		}
	}
	if n := strings.Count(stdout, "(sops:"); n != 2 {
		t.Errorf("skep render shows %d masks, want 2 (REV and the label made from it):\n%s", n, stdout)
	}
}

// A chart of the published layout: what requirements.yaml says of each
// external object reaches the reader of render and of validate.
func TestRenderAndValidateShowRequirementDescriptions(t *testing.T) {
	for _, args := range [][]string{
		{"render", chartInput + "edge-whoami", "--allow-network", "traefik-public"},
		{"render", "-o", "json", chartInput + "edge-whoami", "--allow-network", "traefik-public"},
		{"validate", chartInput + "edge-whoami"},
		{"validate", "-o", "json", chartInput + "edge-whoami"},
	} {
		code, stdout, stderr := run(t, args...)
		if code != ExitOK {
			t.Errorf("skep %s exit = %d, want 0\n%s", strings.Join(args, " "), code, stderr)
		}
		for _, want := range []string{"Overlay network shared with Traefik", "htpasswd line for the basic-auth middleware"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("skep %s does not show the description %q:\n%s", strings.Join(args, " "), want, stdout)
			}
		}
	}
}

// render refuses, with a line, the labels stack reserves; both must name
// one namespace.
func TestRenderReservesTheStackLabelNamespace(t *testing.T) {
	if render.ReservedLabelPrefix != stack.LabelPrefix {
		t.Errorf("render.ReservedLabelPrefix = %q, stack.LabelPrefix = %q; want one namespace", render.ReservedLabelPrefix, stack.LabelPrefix)
	}
}

func TestRenderAndValidateRefuseARunawayChartOffline(t *testing.T) {
	for _, tc := range []struct {
		name, shape, want string
	}{
		{"an indent of three billion", "indent", "templates/x.yaml:1:8: executing \"templates/x.yaml\" at <indent 3000000000 \"x\">: error calling indent: would build 3000000001 bytes, past the 64 MiB a render may build"},
		{"a dict doubled 25 times through toYaml", "dict-doubled", "templates/x.yaml:2:8: executing \"templates/x.yaml\" at <toYaml $d>: error calling toYaml: would build more than 64 MiB"},
		{"three nested ranges of until 10000", "ranges-nested", "templates/x.yaml:1:55: executing \"templates/x.yaml\" at <until 10000>: ranging over 10000 items: more than 1000000 steps"},
		{"a dict that holds itself, printed", "cycle", "templates/x.yaml:2:8: executing \"templates/x.yaml\" at <$d>: printing the value: nested deeper than 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shape, err := os.ReadFile(filepath.Join(chartInput, "runaway", tc.shape+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "runaway")
			writeChart(t, dir, map[string]string{
				"Chart.yaml":       "name: runaway\nversion: 1.0.0\n",
				"templates/x.yaml": string(shape),
			})
			for _, cmd := range []string{"render", "validate"} {
				code, stdout, stderr := run(t, cmd, dir)
				if code != ExitFailure {
					t.Errorf("skep %s exit = %d, want %d", cmd, code, ExitFailure)
				}
				if out := stdout + stderr; !strings.Contains(out, filepath.Join(dir, tc.want)) {
					t.Errorf("skep %s printed\n%s\nwant the problem %s", cmd, out, filepath.Join(dir, tc.want))
				}
			}
		})
	}
}

// writeChart writes files, keyed by their path below dir.
func writeChart(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

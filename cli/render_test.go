package cli

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skep-cd/skep/golden"
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
		{name: "missing-path", args: []string{renderTestInput + "missing"}, wantCode: ExitFailure},
		{name: "no-arguments-is-usage", args: nil, wantCode: ExitUsage},
		{name: "bad-output-is-usage", args: []string{"-o", "xml", renderTestInput + "host-path"}, wantCode: ExitUsage},
		{name: "chart-with-values-and-set", args: []string{chartInput + "web", "--values", chartInput + "values/staging.yaml", "--set", "replicas=4", "--allow-network", "traefik-public", "--release", "web"}, wantCode: ExitOK},
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

package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/golden"
)

const (
	validateInput = "testdata/validate/input/"
	artifactInput = "../artifact/testdata/"
)

func TestValidateGolden(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
	}{
		{name: "valid-file", args: []string{validateInput + "valid.yaml"}, wantCode: ExitOK},
		{name: "valid-example", args: []string{"../examples/appset/applications.yaml"}, wantCode: ExitOK},
		{name: "generators-without-applications", args: []string{validateInput + "generators-only.yaml"}, wantCode: ExitOK},
		{name: "invalid-file-lists-every-problem", args: []string{validateInput + "invalid.yaml"}, wantCode: ExitFailure},
		{name: "directory-is-one-set", args: []string{validateInput + "dir"}, wantCode: ExitFailure},
		{name: "each-path-reported-in-order", args: []string{validateInput + "valid.yaml", validateInput + "missing.yaml", validateInput + "invalid.yaml"}, wantCode: ExitFailure},
		{name: "named-swarms-unchecked-without-destinations", args: []string{validateInput + "two-swarms.yaml"}, wantCode: ExitOK},
		{name: "unknown-swarm-named-with-its-line", args: []string{"--destinations", validateInput + "destinations.yaml", validateInput + "two-swarms.yaml"}, wantCode: ExitFailure},
		{name: "json-valid", args: []string{"-o", "json", validateInput + "valid.yaml"}, wantCode: ExitOK},
		{name: "json-invalid", args: []string{"-o", "json", validateInput + "invalid.yaml", validateInput + "valid.yaml"}, wantCode: ExitFailure},
		{name: "no-arguments-is-usage", args: nil, wantCode: ExitUsage},
		{name: "bad-output-is-usage", args: []string{"-o", "xml", validateInput + "valid.yaml"}, wantCode: ExitUsage},
		{name: "unknown-flag-is-usage", args: []string{"--strict", validateInput + "valid.yaml"}, wantCode: ExitUsage},
		{name: "artifact-release-repository-without-flags-checks-the-names", args: []string{artifactInput + "release-repo/testing", artifactInput + "release-repo/production"}, wantCode: ExitOK},
		{name: "artifact-release-repository-with-prefixes", args: []string{"--registry", "registry.example.org/team", "--git-base", "https://github.com/team", artifactInput + "release-repo/staging"}, wantCode: ExitOK},
		{name: "artifact-native-directory-lists-every-problem", args: []string{artifactInput + "invalid/native-rules"}, wantCode: ExitFailure},
		{name: "artifact-release-repository-lists-every-problem", args: []string{artifactInput + "invalid/release-rules", validateInput + "valid.yaml"}, wantCode: ExitFailure},
		{name: "artifact-json", args: []string{"-o", "json", artifactInput + "native/production", artifactInput + "invalid/release-no-infrastructure"}, wantCode: ExitFailure},
		{name: "chart-renders-every-ci-values-file", args: []string{"../chart/testdata/web"}, wantCode: ExitOK},
		{name: "chart-lists-every-problem", args: []string{"../chart/testdata/bad-metadata", "../chart/testdata/uses-env", "../chart/testdata/unstable"}, wantCode: ExitFailure},
		{name: "chart-lists-its-requirements-with-descriptions", args: []string{"../chart/testdata/edge-whoami"}, wantCode: ExitOK},
		{name: "chart-requirements-json", args: []string{"-o", "json", "../chart/testdata/edge-whoami"}, wantCode: ExitOK},
		{name: "chart-forging-skep-labels-is-refused", args: []string{"testdata/render/input/hostile-chart"}, wantCode: ExitFailure},
		{name: "chart-json", args: []string{"-o", "json", "../chart/testdata/web", "../chart/testdata/required-missing"}, wantCode: ExitFailure},
		{name: "artifact-bad-registry-is-usage", args: []string{"--registry", "Registry.Example.org", artifactInput + "release-repo/testing"}, wantCode: ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, append([]string{"validate"}, tt.args...)...)
			if code != tt.wantCode {
				t.Errorf("skep validate %s exit = %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(tt.args, " "), code, tt.wantCode, stdout, stderr)
			}
			got := fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", code, stdout, stderr)
			golden.Check(t, filepath.Join("testdata", "validate", tt.name+".golden"), []byte(got))
		})
	}
}

func TestValidateJSONMatchesTextProblems(t *testing.T) {
	path := validateInput + "invalid.yaml"
	_, text, _ := run(t, "validate", path)
	code, out, _ := run(t, "validate", "-o", "json", path)
	var report struct {
		Valid    bool `json:"valid"`
		Problems []struct {
			File    string `json:"file"`
			Line    int    `json:"line"`
			Column  int    `json:"column"`
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("skep validate -o json printed %q: %v", out, err)
	}
	if code != ExitFailure || report.Valid {
		t.Errorf("exit %d, valid %t; want %d, false", code, report.Valid, ExitFailure)
	}
	var fromJSON []string
	for _, p := range report.Problems {
		fromJSON = append(fromJSON, fmt.Sprintf("%s:%d:%d: %s: %s", p.File, p.Line, p.Column, p.Field, p.Message))
	}
	if diff := cmp.Diff(strings.Split(strings.TrimSpace(text), "\n"), fromJSON); diff != "" {
		t.Errorf("json problems differ from text (-text +json):\n%s", diff)
	}
}

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/skep-cd/skep/version"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestVersionPrintsStampedValues(t *testing.T) {
	oldV, oldC := version.Version, version.Commit
	t.Cleanup(func() { version.Version, version.Commit = oldV, oldC })
	version.Version, version.Commit = "v1.2.3", "abc1234"

	code, out, _ := run(t, "version")
	want := "skep v1.2.3 (abc1234, " + runtime.Version() + ")\n"
	if code != 0 || out != want {
		t.Fatalf("skep version = %d %q, want 0 %q", code, out, want)
	}
	code, out, _ = run(t, "version", "-o", "json")
	var got version.Info
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 {
		t.Fatalf("skep version -o json = %d %q: %v", code, out, err)
	}
	if got.Version != "v1.2.3" || got.Commit != "abc1234" || got.GoVersion != runtime.Version() {
		t.Errorf("json = %+v", got)
	}
}

func TestVersionFallsBackToBuildInfoWhenUnstamped(t *testing.T) {
	oldV, oldC := version.Version, version.Commit
	t.Cleanup(func() { version.Version, version.Commit = oldV, oldC })
	version.Version, version.Commit = "", ""
	_, out, _ := run(t, "version")
	if !regexp.MustCompile(`^skep \S+ \(\S+, go\S+\)\n$`).MatchString(out) {
		t.Fatalf("unstamped version line %q does not match skep <version> (<commit>, <go>)", out)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "unknown command", args: []string{"frobnicate"}},
		{name: "unknown flag", args: []string{"version", "--nope"}},
		{name: "bad output format", args: []string{"version", "-o", "xml"}},
		{name: "extra argument", args: []string{"version", "now"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(t, tc.args...)
			if code != ExitUsage {
				t.Errorf("skep %s exit = %d, want %d", strings.Join(tc.args, " "), code, ExitUsage)
			}
			if !strings.HasPrefix(stderr, "skep: ") {
				t.Errorf("stderr %q does not start with 'skep: '", stderr)
			}
		})
	}
}

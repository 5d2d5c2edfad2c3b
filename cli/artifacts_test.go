package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/skep-cd/skep/golden"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/wire"
)

// artifactsRig is a git server with a service repository (web: tags
// v0.4.0 and v0.5.0, branch main) and an infrastructure one (stack), and
// an in-process registry holding web:v0.4.0 and web:<short main head>.
type artifactsRig struct {
	registry, web, stack string
	// head is web's main head; stackHead stack's.
	head, stackHead string
	// digests of the pushed images, by tag.
	digests map[string]string
}

func startArtifactsRig(t *testing.T) *artifactsRig {
	t.Helper()
	// The registry answers anonymously; no credential of the machine's user
	// may take part.
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	t.Setenv(EnvGitCredentialsFile, "")
	git := harness.StartGitServer(t, harness.GitServerOptions{})
	web := git.CreateRepo(t, "web")
	first := web.Commit(t, "main", map[string]string{"VERSION": "0.4.0\n"})
	web.Tag(t, "v0.4.0", first, "release v0.4.0")
	second := web.Commit(t, "main", map[string]string{"VERSION": "0.5.0\n"})
	web.Tag(t, "v0.5.0", second, "")
	head := web.Commit(t, "main", map[string]string{"VERSION": "0.6.0-dev\n"})
	stack := git.CreateRepo(t, "stack")
	stackHead := stack.Commit(t, "main", map[string]string{"compose.yaml": "services: {}\n"})

	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	rig := &artifactsRig{
		registry: strings.TrimPrefix(srv.URL, "http://"), web: web.URL, stack: stack.URL,
		head: head, stackHead: stackHead, digests: map[string]string{},
	}
	for _, tag := range []string{"v0.4.0", head[:12]} {
		rig.digests[tag] = rig.push(t, "team/web", tag)
	}
	return rig
}

// push writes a random image as repo:tag and returns its digest.
func (r *artifactsRig) push(t *testing.T, repo, tag string) string {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(fmt.Sprintf("%s/%s:%s", r.registry, repo, tag))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// service is a native-shape entry for web with the given deploy block.
func (r *artifactsRig) service(name, deploy string) string {
	return fmt.Sprintf("- name: %s\n  image: %s/team/web\n  source: %s\n  deploy: %s\n", name, r.registry, r.web, deploy)
}

// infrastructure is a native-shape infrastructure entry tracking stack's main.
func (r *artifactsRig) infrastructure() string {
	return fmt.Sprintf("- kind: infrastructure\n  name: stack\n  source: %s\n  deploy: {branch: main}\n", r.stack)
}

// artifactDir writes entries as one native-shape file and returns its directory.
func artifactDir(t *testing.T, entries ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "artifacts.yaml"), []byte(strings.Join(entries, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// artifactRow is one table row past its name.
type artifactRow struct {
	Kind, Strategy, Desired, Condition, Digest, Version, Drift string
}

// parseArtifactTable reads the rows of skep artifacts' table by name. The
// columns are separated by two spaces or more, which no cell holds.
func parseArtifactTable(t *testing.T, out string) map[string]artifactRow {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	columns := regexp.MustCompile(`\s{2,}`)
	if want := "NAME KIND STRATEGY DESIRED CONDITION DIGEST VERSION DRIFT"; strings.Join(columns.Split(lines[0], -1), " ") != want {
		t.Fatalf("header = %q, want the columns %s", lines[0], want)
	}
	rows := map[string]artifactRow{}
	for _, line := range lines[1:] {
		c := columns.Split(strings.TrimSpace(line), -1)
		if len(c) != 8 {
			t.Fatalf("row %q has %d columns, want 8", line, len(c))
		}
		rows[c[0]] = artifactRow{Kind: c[1], Strategy: c[2], Desired: c[3], Condition: c[4], Digest: c[5], Version: c[6], Drift: c[7]}
	}
	return rows
}

// shortDigest is the DIGEST column of a digest.
func shortDigest(d string) string {
	_, hex, _ := strings.Cut(d, ":")
	return hex[:12]
}

func TestArtifactsTableShowsWhatARenderWouldUse(t *testing.T) {
	rig := startArtifactsRig(t)
	short := rig.head[:12]
	tests := []struct {
		name     string
		entries  []string
		args     []string
		wantCode int
		want     map[string]artifactRow
		// wantReason is a part of the web row's condition past its first
		// word, which is all the want rows hold of a varying reason.
		wantReason string
	}{
		{
			name:    "pinned-version-whose-image-is-pushed-shows-pushed-and-its-digest",
			entries: []string{rig.service("web", "{release: v0.4.0}")},
			want: map[string]artifactRow{"web": {Kind: "service", Strategy: "release", Desired: "v0.4.0", Condition: "pushed",
				Digest: shortDigest(rig.digests["v0.4.0"]), Version: "v0.4.0", Drift: "ready"}},
		},
		{
			name:    "pinned-version-not-pushed-waits-and-nothing-runs",
			entries: []string{rig.service("web", "{release: v0.5.0}")},
			want: map[string]artifactRow{"web": {Kind: "service", Strategy: "release", Desired: "v0.5.0", Condition: "waiting",
				Digest: "-", Version: "-", Drift: "waiting"}},
			wantReason: "is not in the registry yet",
		},
		{
			name:    "pinned-version-not-pushed-keeps-the-current-version",
			entries: []string{rig.service("web", "{release: v0.5.0}")},
			args:    []string{"--current", "web=v0.4.0"},
			want: map[string]artifactRow{"web": {Kind: "service", Strategy: "release", Desired: "v0.5.0", Condition: "waiting",
				Digest: "-", Version: "v0.4.0", Drift: "waiting"}},
		},
		{
			name:    "pushed-version-equal-to-the-current-one-is-no-drift",
			entries: []string{rig.service("web", "{release: v0.4.0}")},
			args:    []string{"--current", "web=v0.4.0"},
			want: map[string]artifactRow{"web": {Kind: "service", Strategy: "release", Desired: "v0.4.0", Condition: "pushed",
				Digest: shortDigest(rig.digests["v0.4.0"]), Version: "v0.4.0", Drift: "none"}},
		},
		{
			name:    "branch-shows-the-head-commit-as-the-tag-template-makes-it",
			entries: []string{rig.service("web", "{branch: main}")},
			args:    []string{"--tag-template", "{short}"},
			want: map[string]artifactRow{"web": {Kind: "service", Strategy: "branch", Desired: short, Condition: "pushed",
				Digest: shortDigest(rig.digests[short]), Version: short, Drift: "ready"}},
		},
		{
			name:    "infrastructure-resolves-to-its-branch-head-commit",
			entries: []string{rig.infrastructure(), rig.service("web", "{release: v0.4.0}")},
			want: map[string]artifactRow{
				"stack": {Kind: "infrastructure", Strategy: "branch", Desired: rig.stackHead[:12], Condition: "pushed",
					Digest: "-", Version: rig.stackHead[:12], Drift: "ready"},
				"web": {Kind: "service", Strategy: "release", Desired: "v0.4.0", Condition: "pushed",
					Digest: shortDigest(rig.digests["v0.4.0"]), Version: "v0.4.0", Drift: "ready"},
			},
		},
		{
			name:    "no-registry-uses-every-desired-version",
			entries: []string{rig.service("web", "{release: v0.5.0}"), rig.service("api", "{branch: main}")},
			args:    []string{"--no-registry"},
			want: map[string]artifactRow{
				"web": {Kind: "service", Strategy: "release", Desired: "v0.5.0", Condition: "pushed: registry look-ups are off",
					Digest: "-", Version: "v0.5.0", Drift: "ready"},
				"api": {Kind: "service", Strategy: "branch", Desired: rig.head[:12], Condition: "pushed: registry look-ups are off",
					Digest: "-", Version: rig.head[:12], Drift: "ready"},
			},
		},
		{
			name:    "suspended-artifact-keeps-the-current-version-and-asks-nothing",
			entries: []string{rig.service("web", "{suspend: true}")},
			args:    []string{"--current", "web=v0.4.0"},
			want: map[string]artifactRow{"web": {Kind: "service", Strategy: "suspend", Desired: "-", Condition: "-",
				Digest: "-", Version: "v0.4.0", Drift: "none"}},
		},
		{
			name:     "tag-missing-from-git-is-an-error-and-exits-1",
			entries:  []string{rig.service("web", "{release: v9.9.9}"), rig.service("api", "{release: v0.4.0}")},
			wantCode: ExitFailure,
			want: map[string]artifactRow{
				"web": {Kind: "service", Strategy: "release", Desired: "-", Condition: "error", Digest: "-", Version: "-", Drift: "none"},
				"api": {Kind: "service", Strategy: "release", Desired: "v0.4.0", Condition: "pushed",
					Digest: shortDigest(rig.digests["v0.4.0"]), Version: "v0.4.0", Drift: "ready"},
			},
			wantReason: "resolve v9.9.9 of web",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := artifactDir(t, tt.entries...)
			args := append(append([]string{"artifacts"}, tt.args...), dir)
			code, stdout, stderr := run(t, args...)
			if code != tt.wantCode {
				t.Fatalf("skep %s exit = %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, tt.wantCode, stdout, stderr)
			}
			rows := parseArtifactTable(t, stdout)
			if web := rows["web"]; tt.wantReason != "" && !strings.Contains(web.Condition, tt.wantReason) {
				t.Errorf("web condition = %q, want it to say %q", web.Condition, tt.wantReason)
			}
			for name, row := range rows {
				// A reason that names the rig's addresses is compared by its
				// first word, where the case wants no more.
				if want, ok := tt.want[name]; ok && !strings.Contains(want.Condition, ":") {
					row.Condition, _, _ = strings.Cut(row.Condition, ":")
					rows[name] = row
				}
			}
			if diff := cmp.Diff(tt.want, rows); diff != "" {
				t.Errorf("skep %s rows differ (-want +got):\n%s\nstdout:\n%s", strings.Join(args, " "), diff, stdout)
			}
		})
	}
}

func TestArtifactsTableWithoutRegistryGolden(t *testing.T) {
	rig := startArtifactsRig(t)
	dir := artifactDir(t, rig.service("web", "{release: v0.5.0}"), rig.service("api", "{suspend: true}"),
		rig.service("worker", "{release: v0.4.0}"))
	code, stdout, stderr := run(t, "artifacts", "--no-registry", "--current", "api=v0.3.1@sha256:0123456789abcdef",
		"--current", "worker=v0.4.0", dir)
	got := fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", code, stdout, stderr)
	golden.Check(t, filepath.Join("testdata", "artifacts", "no-registry.golden"), []byte(got))
}

func TestArtifactsJSONIsAListOfArtifacts(t *testing.T) {
	rig := startArtifactsRig(t)
	dir := artifactDir(t, rig.infrastructure(), rig.service("web", "{release: v0.5.0}"))
	code, stdout, stderr := run(t, "artifacts", "-o", "json", "--current", "web=v0.4.0", dir)
	if code != ExitOK {
		t.Fatalf("exit %d, want %d\nstderr:\n%s", code, ExitOK, stderr)
	}
	var got []wire.Artifact
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("skep artifacts -o json printed %q: %v", stdout, err)
	}
	if len(got) == 2 && strings.Contains(got[1].Reason, "not in the registry yet") {
		got[1].Reason = "not in the registry yet"
	}
	want := []wire.Artifact{
		{Name: "stack", Kind: "infrastructure", Strategy: "branch", Desired: rig.stackHead, Version: rig.stackHead,
			Condition: "pushed", Drift: wire.ArtifactReady},
		{Name: "web", Kind: "service", Strategy: "release", Image: rig.registry + "/team/web", Desired: "v0.5.0",
			Current: "v0.4.0", Version: "v0.4.0", Condition: "waiting", Reason: "not in the registry yet", Drift: wire.ArtifactWaiting},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("skep artifacts -o json differs (-want +got):\n%s", diff)
	}
}

func TestArtifactsRefusesWhatCannotBeResolved(t *testing.T) {
	_, validateOut, _ := run(t, "validate", artifactInput+"invalid/native-rules")
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "invalid-directory-prints-every-problem-and-exits-1", args: []string{artifactInput + "invalid/native-rules"},
			wantCode: ExitFailure, wantStdout: validateOut, wantStderr: "skep: artifacts: "},
		{name: "invalid-directory-with-json-prints-the-problems-on-stderr", args: []string{"-o", "json", artifactInput + "invalid/native-rules"},
			wantCode: ExitFailure, wantStderr: validateOut},
		{name: "directory-of-no-artifacts-exits-1", args: []string{validateInput + "dir"},
			wantCode: ExitFailure, wantStderr: "is not an artifact directory"},
		{name: "missing-directory-exits-1", args: []string{validateInput + "missing"},
			wantCode: ExitFailure, wantStderr: "skep: artifacts: "},
		{name: "release-repository-without-prefixes-names-the-options", args: []string{artifactInput + "release-repo/testing"},
			wantCode: ExitFailure, wantStdout: "--registry"},
		{name: "no-directory-is-usage", args: nil, wantCode: ExitUsage},
		{name: "two-directories-is-usage", args: []string{artifactInput + "native/production", artifactInput + "native/production"}, wantCode: ExitUsage},
		{name: "bad-output-is-usage", args: []string{"-o", "yaml", artifactInput + "native/production"}, wantCode: ExitUsage},
		{name: "current-without-version-is-usage", args: []string{"--current", "web", artifactInput + "native/production"}, wantCode: ExitUsage},
		{name: "current-of-an-unknown-artifact-is-usage", args: []string{"--current", "nothing=v1.0.0", artifactInput + "native/production"},
			wantCode: ExitUsage, wantStderr: "no artifact named nothing"},
		{name: "tag-template-without-the-commit-is-usage", args: []string{"--tag-template", "{branch}", artifactInput + "native/production"}, wantCode: ExitUsage},
		{name: "tag-template-with-an-unknown-placeholder-is-usage", args: []string{"--tag-template", "{sha}", artifactInput + "native/production"}, wantCode: ExitUsage},
		{name: "bad-registry-is-usage", args: []string{"--registry", "Registry.Example.org", artifactInput + "release-repo/testing"}, wantCode: ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, append([]string{"artifacts"}, tt.args...)...)
			if code != tt.wantCode {
				t.Fatalf("skep artifacts %s exit = %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(tt.args, " "), code, tt.wantCode, stdout, stderr)
			}
			if tt.wantStdout == validateOut || tt.wantStdout == "" {
				if stdout != tt.wantStdout {
					t.Errorf("stdout = %q, want %q", stdout, tt.wantStdout)
				}
			} else if !strings.Contains(stdout, tt.wantStdout) {
				t.Errorf("stdout = %q, want it to hold %q", stdout, tt.wantStdout)
			}
			if !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("stderr = %q, want it to hold %q", stderr, tt.wantStderr)
			}
		})
	}
}

package artifact

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/golden"
)

var testOptions = LoadOptions{Registry: "registry.example.org/team", GitBase: "https://github.com/team"}

// describe renders what Load returned for a golden file: the entries of a
// valid set, or every problem.
func describe(set *Set, err error) string {
	if err != nil {
		return "error:\n" + err.Error() + "\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "shape %s, %d entries\n", set.Shape(), set.Len())
	for _, e := range set.Entries() {
		fmt.Fprintf(&b, "%s:%d %s %s image=%q source=%q provider=%q deploy=%s%s", e.File, e.Line, e.Kind, e.Name, e.Image, e.Source, e.Provider, e.Deploy.Strategy(), map[bool]string{true: "+preview"}[e.Deploy.Preview])
		switch e.Deploy.Strategy() {
		case Release:
			b.WriteString(" " + e.Deploy.Release)
		case Branch:
			b.WriteString(" " + e.Deploy.Branch)
		}
		if len(e.Labels) > 0 {
			fmt.Fprintf(&b, " labels=%v", e.Labels)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestLoadFixtures(t *testing.T) {
	tests := []struct {
		name string
		dir  string
		opts LoadOptions
	}{
		{name: "release-repository-testing-tracks-main-with-previews", dir: "release-repo/testing", opts: testOptions},
		{name: "release-repository-staging-pins-releases", dir: "release-repo/staging", opts: testOptions},
		{name: "release-repository-production-suspends-specta", dir: "release-repo/production", opts: testOptions},
		{name: "release-repository-without-prefixes-names-the-options", dir: "release-repo/testing"},
		{name: "release-repository-names-only-checks-the-names", dir: "release-repo/testing", opts: LoadOptions{NamesOnly: true}},
		{name: "native-shape-ignores-the-options", dir: "native/production"},
		{name: "native-every-rule-at-once", dir: "invalid/native-rules"},
		{name: "release-every-rule-at-once", dir: "invalid/release-rules", opts: testOptions},
		{name: "release-shape-requires-an-infrastructure-entry", dir: "invalid/release-no-infrastructure", opts: testOptions},
		{name: "syntax-and-shape-of-files", dir: "invalid/syntax"},
		{name: "not-an-artifact-directory", dir: "release-repo"},
		{name: "missing-directory", dir: "nowhere"},
		{name: "bad-registry-option", dir: "release-repo/testing", opts: LoadOptions{Registry: "Registry.Example.org"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Load(os.DirFS("testdata"), tt.dir, tt.opts)
			if (set == nil) == (err == nil) {
				t.Fatalf("Load(%s) = %v, %v; want exactly one of a set and an error", tt.dir, set, err)
			}
			golden.Check(t, filepath.Join("testdata", "golden", tt.name+".golden"), []byte(describe(set, err)))
		})
	}
}

func TestLoadReturnsProblemsFoundWithErrorsAs(t *testing.T) {
	_, err := Load(os.DirFS("testdata"), "invalid/native-rules", LoadOptions{})
	var problems configfile.Problems
	if !errors.As(err, &problems) || len(problems) < 20 {
		t.Fatalf("Load error %v: want configfile.Problems listing every problem", err)
	}
	for _, p := range problems {
		if p.File == "" || strings.HasPrefix(p.File, "invalid/") || p.Line == 0 {
			t.Errorf("problem %q: want a file relative to the directory and a line", p)
		}
	}
}

func TestLoadRules(t *testing.T) {
	const infra = "- {github: infrastructure, provider: cloudformation, deploy: {branch: main}}\n"
	tests := []struct {
		name    string
		service string
		want    []string
	}{
		{name: "a pin is one strategy", service: "- {docker: web, github: web, deploy: {release: v1.2.3}}"},
		{name: "a short release tag is accepted", service: "- {docker: web, github: web, deploy: {release: v1}}"},
		{name: "a pre-release tag is accepted", service: "- {docker: web, github: web, deploy: {release: v1.3.0-rc.1}}"},
		{name: "preview combines with a strategy", service: "- {docker: web, github: web, deploy: {branch: feature/x, preview: true}}"},
		{name: "suspend false is no strategy", service: "- {docker: web, github: web, deploy: {suspend: false}}",
			want: []string{"service/web.yaml:1:38: [0].deploy: no strategy; want exactly one of release, branch, suspend (preview is not a strategy)"}},
		{name: "preview alone is no strategy", service: "- {docker: web, github: web, deploy: {preview: true}}",
			want: []string{"service/web.yaml:1:38: [0].deploy: no strategy; want exactly one of release, branch, suspend (preview is not a strategy)"}},
		{name: "two strategies are refused", service: "- {docker: web, github: web, deploy: {release: v1.0.0, branch: main}}",
			want: []string{"service/web.yaml:1:38: [0].deploy: two strategies (release and branch); want exactly one of release, branch, suspend"}},
		{name: "an empty deploy is refused", service: "- {docker: web, github: web, deploy: }",
			want: []string{"service/web.yaml:1:38: [0].deploy: empty; want exactly one of release, branch, suspend"}},
		{name: "build metadata is refused", service: "- {docker: web, github: web, deploy: {release: v1.0.0+42}}",
			want: []string{`service/web.yaml:1:48: [0].deploy.release: build metadata ("+42") cannot be part of a Docker tag; drop it`}},
		{name: "a tag without v is refused", service: "- {docker: web, github: web, deploy: {release: 1.0.0}}",
			want: []string{`service/web.yaml:1:48: [0].deploy.release: missing the v prefix; write "v1.0.0"`}},
		{name: "a branch ending in .lock is refused", service: "- {docker: web, github: web, deploy: {branch: x.lock}}",
			want: []string{`service/web.yaml:1:47: [0].deploy.branch: want a git branch name whose parts between '/' are not empty, do not start with '.' and do not end with .lock, got "x.lock"`}},
		{name: "a docker name with a path cannot become a variable", service: "- {docker: team/web, github: web, deploy: {suspend: true}}",
			want: []string{`service/web.yaml:1:12: [0].docker: cannot become a variable name: want lower-case letters and digits starting with a letter, words joined by single '-', '_' or '.' (web-api becomes WEB_API and WebApiVersion); got "team/web"`}},
		{name: "an unknown key is refused", service: "- {docker: web, github: web, deploy: {webhook: [x], suspend: true}}",
			want: []string{"service/web.yaml:1:39: [0].deploy.webhook: unknown key; want one of release, branch, suspend, preview"}},
		{name: "a file of the wrong kind of document is refused", service: "docker: web\n",
			want: []string{"service/web.yaml:1:1: want a list of entries, got a mapping; for example:\n- docker: web\n  github: web\n  deploy: {release: v1.2.3}"}},
		{name: "an empty file holds no entries", service: ""},
		{name: "a service named like the infrastructure collides", service: "- {docker: infrastructure, github: web, deploy: {suspend: true}}",
			want: []string{`service/web.yaml:1:12: [0].docker: duplicate name "infrastructure"; first at infrastructure/i.yaml:1`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{
				"env/infrastructure/i.yaml": {Data: []byte(infra)},
				"env/service/web.yaml":      {Data: []byte(tt.service)},
			}
			_, err := Load(fsys, "env", testOptions)
			var got []string
			var problems configfile.Problems
			if errors.As(err, &problems) {
				for _, p := range problems {
					got = append(got, p.String())
				}
			} else if err != nil {
				t.Fatalf("Load: %v, want problems or none", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Load(%q) problems (-want +got):\n%s", tt.service, diff)
			}
		})
	}
}

func TestLoadRefusesAFileOverTheSizeCap(t *testing.T) {
	big := strings.Repeat("# padding\n", MaxFileSize/10+1)
	fsys := fstest.MapFS{"env/a.yaml": {Data: []byte("- {name: a, image: r.example.org/a, source: s, deploy: {suspend: true}}\n" + big)}}
	_, err := Load(fsys, "env", LoadOptions{})
	want := fmt.Sprintf("a.yaml: larger than %d bytes (1 MiB); split the file", MaxFileSize)
	if err == nil || err.Error() != want {
		t.Fatalf("Load of a %d-byte file: %v, want %q", len(big), err, want)
	}
}

func TestLoadRefusesMoreThanMaxEntries(t *testing.T) {
	var b strings.Builder
	for i := range MaxEntries + 1 {
		fmt.Fprintf(&b, "- {name: s%d, image: r.example.org/s, source: s, deploy: {suspend: true}}\n", i)
	}
	_, err := Load(fstest.MapFS{"env/a.yaml": {Data: []byte(b.String())}}, "env", LoadOptions{})
	want := fmt.Sprintf("a.yaml:%d:3: [%d]: more than %d entries in the environment; split it", MaxEntries+1, MaxEntries, MaxEntries)
	if err == nil || err.Error() != want {
		t.Fatalf("Load of %d entries: %v, want %q", MaxEntries+1, err, want)
	}
}

func TestDetect(t *testing.T) {
	fsys := os.DirFS("testdata")
	tests := []struct {
		name  string
		dir   string
		want  Shape
		found bool
	}{
		{name: "service and infrastructure folders are the release-repository shape", dir: "release-repo/testing", want: ReleaseShape, found: true},
		{name: "files holding lists are the native shape", dir: "native/production", want: NativeShape, found: true},
		{name: "a parent of environments is no artifact directory", dir: "release-repo"},
		{name: "a missing directory is no artifact directory", dir: "nowhere"},
		{name: "files holding mappings are no artifact directory", dir: "golden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found := Detect(fsys, tt.dir)
			if got != tt.want || found != tt.found {
				t.Errorf("Detect(%s) = %q, %t; want %q, %t", tt.dir, got, found, tt.want, tt.found)
			}
		})
	}
	appSet := fstest.MapFS{"apps/applications.yaml": {Data: []byte("apiVersion: skep.dev/v1\napplications: []\n")}}
	if shape, ok := Detect(appSet, "apps"); ok {
		t.Errorf("Detect(app-set directory) = %q, true; want false", shape)
	}
}

func TestSetHandsOutCopies(t *testing.T) {
	set, err := Load(os.DirFS("testdata"), "native/production", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, ok := set.Lookup("web-api")
	if !ok || e.Labels["team"] != "payments" {
		t.Fatalf("Lookup(web-api) = %+v, %t", e, ok)
	}
	e.Labels["team"] = "changed"
	set.Services()[0].Labels["team"] = "changed"
	set.Entries()[1].Name = "changed"
	if again, _ := set.Lookup("web-api"); again.Labels["team"] != "payments" {
		t.Errorf("a caller's change reached the set: labels %v", again.Labels)
	}
	if infra, ok := set.Infrastructure(); !ok || infra.Name != "stack" || infra.Kind != Infrastructure {
		t.Errorf("Infrastructure() = %+v, %t; want stack", infra, ok)
	}
	if _, ok := set.Lookup("web_api"); ok {
		t.Errorf("Lookup(web_api) found an entry; names match exactly")
	}
	var nilSet *Set
	if nilSet.Len() != 0 || nilSet.Services() != nil {
		t.Errorf("a nil set is not empty")
	}
}

// The reconciler hands Load an os.Root of the checkout: an artifact file,
// or the environment directory itself, that is a symlink out of the
// checkout is refused, naming the escape, and what lies outside is never
// read as artifacts.
func TestLoadThroughARootRefusesSymlinksLeavingTheCheckout(t *testing.T) {
	outside := t.TempDir()
	entry := "- {name: %s, image: r.example.org/%[1]s, source: s, deploy: {suspend: true}}\n"
	if err := os.WriteFile(filepath.Join(outside, "web.yaml"), []byte(fmt.Sprintf(entry, "web")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		link  string // the symlink made in the checkout, pointing outside
		to    string
		files map[string]string // regular files beside it
	}{
		{name: "an artifact file beside another", link: "env/web.yaml", to: filepath.Join(outside, "web.yaml"),
			files: map[string]string{"env/api.yaml": fmt.Sprintf(entry, "api")}},
		{name: "the environment directory", link: "env", to: outside},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkout := t.TempDir()
			for name, content := range tc.files {
				p := filepath.Join(checkout, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			link := filepath.Join(checkout, filepath.FromSlash(tc.link))
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(tc.to, link); err != nil {
				t.Fatal(err)
			}
			root, err := os.OpenRoot(checkout)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			set, err := Load(root.FS(), "env", LoadOptions{})
			if err == nil || !strings.Contains(err.Error(), "path escapes from parent") {
				t.Errorf("Load through a symlink out of the checkout = %v, want the escape named", err)
			}
			if set != nil {
				t.Errorf("Load returned a set despite a symlink out of the checkout: %+v", set.Entries())
			}
		})
	}
}

package appset

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/configfile"
)

// located formats p without its file, as the tables below write problems.
func located(p configfile.Problem) string {
	return fmt.Sprintf("%d:%d %s: %s", p.Line, p.Column, p.Field, p.Message)
}

// problemsOf returns the problems in err, failing the test when err is not
// (or does not wrap) configfile.Problems.
func problemsOf(t *testing.T, err error) []string {
	t.Helper()
	var problems configfile.Problems
	if !errors.As(err, &problems) {
		t.Fatalf("error %v (%T) is not configfile.Problems", err, err)
	}
	out := make([]string, len(problems))
	for i, p := range problems {
		out[i] = located(p)
	}
	return out
}

// app returns an application with every default, for the tables to adjust.
func app(name, repo string) Application {
	return Application{
		Name:           name,
		Source:         AppSource{Repo: repo, Revision: DefaultRevision, Path: DefaultPath},
		Release:        name,
		SyncPolicy:     SyncPolicy{Interval: DefaultInterval, ResolveImage: ResolveAlways, Timeout: DefaultTimeout},
		DriftDetection: DriftManifest,
	}
}

func TestParseFixtures(t *testing.T) {
	full := app("web", "ssh://git@git.example.org:2222/acme/web.git")
	full.Source.Revision = "v1.8.2"
	full.Source.Path = "deploy"
	full.Source.Files = []string{"compose.yaml", "compose.prod.yaml"}
	full.Source.EnvFiles = []string{"prod.env"}
	full.Source.Variables = map[string]string{"DOMAIN": "web.example.org", "REPLICAS": "3"}
	full.Release = "web_prod"
	full.SyncPolicy = SyncPolicy{Automated: true, Interval: 90 * time.Second, Prune: true, ResolveImage: ResolveNever, Timeout: DefaultTimeout}
	full.Allow = Allow{
		HostPaths:    []string{"/", "/var/run/docker.sock"},
		Networks:     []string{"traefik-public"},
		Configs:      []string{"ldap.conf"},
		Secrets:      []string{"db-password"},
		Volumes:      []string{"shared-data"},
		Capabilities: []string{"NET_ADMIN", "cap_sys_time"},
		Unplaceable:  []string{"resources", "platform"},
	}
	on := true
	full.Rebalance = &on
	api := app("api", "../repos/api")
	api.SyncPolicy.Interval = 10 * time.Minute
	worker := app("worker", "file:///srv/git/worker")
	worker.Source.Revision = "0123456789abcdef0123456789abcdef01234567"
	worker.SyncPolicy.Interval = 30 * time.Second

	tests := []struct {
		name     string
		file     string
		want     []Application
		problems []string
	}{
		{
			name: "minimal application takes every default",
			file: "valid/minimal.yaml",
			want: []Application{app("web", "https://git.example.org/acme/web.git")},
		},
		{
			name: "every field is decoded and paths are cleaned",
			file: "valid/full.yaml",
			want: []Application{full},
		},
		{
			name: "empty application list is a valid set",
			file: "valid/empty.yaml",
			want: []Application{},
		},
		{
			name: "anchors, merge keys and x- extension fields are understood",
			file: "valid/anchors.yaml",
			want: []Application{api, worker},
		},
		{
			name: "scp-like, local path and http repositories are accepted",
			file: "valid/scp-and-local.yaml",
			want: []Application{
				app("a", "git@github.com:acme/a.git"),
				app("b", "/srv/git/b"),
				app("c", "http://localhost:8080/c.git"),
			},
		},
		{
			name: "unknown keys are reported at the key with the keys that are known",
			file: "invalid/unknown-key.yaml",
			problems: []string{
				"6:7 applications[0].source.branch: unknown key; want one of repo, revision, path, files, envFiles, variables",
				"8:7 applications[0].syncPolicy.intervall: unknown key; want one of automated, interval, prune, pruneResources, pruneVolumes, resolveImage, wait, timeout, keepHookJobs, rollback, preemptFailingRollout",
			},
		},
		{
			name:     "a duration that does not parse is reported with its value",
			file:     "invalid/bad-duration.yaml",
			problems: []string{`6:17 applications[0].syncPolicy.interval: want a duration like 3m or 90s, got "often"`},
		},
		{
			name:     "an interval below the floor is an error, not raised silently",
			file:     "invalid/interval-below-floor.yaml",
			problems: []string{"6:17 applications[0].syncPolicy.interval: 5s is below the floor of 10s"},
		},
		{
			name:     "resolveImage outside its enum is an error",
			file:     "invalid/bad-enum.yaml",
			problems: []string{`6:21 applications[0].syncPolicy.resolveImage: want always, changed or never, got "sometimes"`},
		},
		{
			name:     "a duplicate name names the first application and its line",
			file:     "invalid/duplicate-name.yaml",
			problems: []string{`6:11 applications[1].name: name "web" is already used by applications[0] at line 3`},
		},
		{
			name: "a duplicate release names both lines, defaulted releases included",
			file: "invalid/duplicate-release.yaml",
			problems: []string{
				`7:14 applications[1].release: release "web" is already used by applications[0] at line 3`,
				`11:11 applications[3].name: release "jobs" is already used by applications[2] at line 10; the release defaults to the name, so set release to another stack name`,
			},
		},
		{
			name: "paths leaving the repository or the application's path are refused",
			file: "invalid/escaping-path.yaml",
			problems: []string{
				`6:13 applications[0].source.path: want a path inside the repository, got "../x", which leaves it`,
				`7:15 applications[0].source.files[0]: want a path relative to the application's path, got the absolute path "/abs/compose.yaml"`,
				`7:34 applications[0].source.files[1]: want a path inside the application's path, got "../compose.yaml", which leaves it`,
				`8:18 applications[0].source.envFiles[0]: want a path inside the application's path, got "a/../../.env", which leaves it`,
			},
		},
		{
			name: "a name that is not a DNS label, or none, is an error",
			file: "invalid/bad-name.yaml",
			problems: []string{
				`3:11 applications[0].name: want a DNS label (lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters), got "Web_1"`,
				`5:5 applications[1].name: missing; every application needs a name`,
			},
		},
		{
			name:     "a destination name that cannot be one is refused at parse time",
			file:     "invalid/bad-destination-name.yaml",
			problems: []string{`6:14 applications[0].destination.swarm: want "" (the swarm the controller runs in) or the name of a destination, got "Production_EU"`},
		},
		{
			name: "every problem of a file is reported at once, in line order",
			file: "invalid/many-problems.yaml",
			problems: []string{
				`1:13 apiVersion: want skep/v1, got "skep/v2"`,
				`5:13 applications[0].source.repo: want an https://, http://, ssh:// or file:// URL, an scp-like user@host:path or a local path, got the scheme "ftp"`,
				`6:17 applications[0].source.revision: want a branch, tag or commit, got "main branch"; spaces and any of ~^:?*[\ are not allowed`,
				`8:17 applications[0].syncPolicy.interval: want a duration like 3m or 90s, got "often"`,
				`9:18 applications[0].syncPolicy.automated: want true or false, got "yes"`,
				`11:41 applications[1].source.files: want a list, got "compose.yaml"`,
				`12:5 applications[1].sync: unknown key; want one of name, source, release, destination, syncPolicy, driftDetection, allow, artifacts, chart, dependsOn, self, rebalance`,
				`13:11 applications[2].name: name "api" is already used by applications[1] at line 10`,
				`16:19 applications[2].allow.hostPaths[0]: want an absolute path like /srv/data, got "srv/data"`,
				`16:29 applications[2].allow.hostPaths[1]: want a clean path, got "/srv//data/"; write "/srv/data"`,
				`17:18 applications[2].allow.networks[0]: want a Docker object name (letters, digits, '_', '.' and '-', starting with a letter or digit), got "bad name"`,
				`18:22 applications[2].allow.capabilities[0]: want a Linux capability such as NET_ADMIN (the CAP_ prefix optional) or ALL, got "net admin"`,
				`19:32 applications[2].allow.unplaceable[1]: want one of no-node, constraint, platform, resources, max-replicas-per-node, all, got "cpu"`,
			},
		},
		{
			name:     "a YAML syntax error is reported with its line",
			file:     "invalid/syntax-error.yaml",
			problems: []string{`3:0 : invalid YAML: did not find expected ',' or '}'`},
		},
		{
			name:     "a password in a repository URL is refused without being echoed",
			file:     "invalid/password-in-url.yaml",
			problems: []string{`4:20 applications[0].source.repo: the URL carries a password; give credentials in a file or the environment, never in the app set`},
		},
		{
			name:     "a document that is not a mapping is one problem",
			file:     "invalid/not-a-mapping.yaml",
			problems: []string{`1:1 : want a mapping with apiVersion and applications, got a list`},
		},
		{
			name:     "a second YAML document is refused",
			file:     "invalid/two-documents.yaml",
			problems: []string{`3:1 : a second YAML document; a file holds one`},
		},
		{
			name: "missing apiVersion and applications point at the document",
			file: "invalid/missing-keys.yaml",
			problems: []string{
				"2:1 kind: unknown key; want one of apiVersion, applications, syncWindows, generators",
				"2:1 apiVersion: missing; want skep/v1",
				"2:1 applications: missing; write `applications: []` for an empty set",
			},
		},
		{
			name:     "an empty file is an error",
			file:     "invalid/empty.yaml",
			problems: []string{"0:0 : empty; want apiVersion: skep/v1 and a list of applications"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := filepath.Join("testdata", tt.file)
			set, err := LoadFile(name)
			if tt.problems != nil {
				if diff := cmp.Diff(tt.problems, problemsOf(t, err)); diff != "" {
					t.Errorf("LoadFile(%s) problems (-want +got):\n%s", tt.file, diff)
				}
				var problems configfile.Problems
				errors.As(err, &problems)
				for _, p := range problems {
					if p.File != name {
						t.Errorf("problem %q names file %q, want %q", p, p.File, name)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadFile(%s) = %v, want a valid set", tt.file, err)
			}
			if diff := cmp.Diff(tt.want, set.Applications(), cmp.Comparer(func(a, b []Application) bool {
				return len(a) == 0 && len(b) == 0 || reflect.DeepEqual(a, b)
			})); diff != "" {
				t.Errorf("LoadFile(%s) applications (-want +got):\n%s", tt.file, diff)
			}
		})
	}
}

// TestParseRules covers the rules the fixtures don't, one small document each.
func TestParseRules(t *testing.T) {
	const head = "apiVersion: skep/v1\napplications:\n"
	tests := []struct {
		name     string
		apps     string // YAML of the applications list, indented by two
		want     Application
		problems []string
	}{
		{
			name: "an explicit release must be a stack name",
			apps: "  - {name: web, release: Web.Prod, source: {repo: /r}}\n",
			problems: []string{
				`3:26 applications[0].release: want a stack name (lower-case letters, digits, '_' and '-', starting with a letter or digit, at most 63 characters), got "Web.Prod"`,
			},
		},
		{
			name: "a name longer than 63 characters is refused",
			apps: "  - {name: " + strings.Repeat("a", 64) + ", source: {repo: /r}}\n",
			problems: []string{
				`3:12 applications[0].name: want a DNS label (lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters), got "` + strings.Repeat("a", 64) + `"`,
			},
		},
		{
			name:     "a missing repository is an error",
			apps:     "  - {name: web, source: {path: deploy}}\n",
			problems: []string{"3:25 applications[0].source.repo: missing; want the URL or local path of a git repository"},
		},
		{
			name:     "a missing source points at the application",
			apps:     "  - name: web\n",
			problems: []string{"3:5 applications[0].source.repo: missing; want the URL or local path of a git repository"},
		},
		{
			name:     "an https URL without a host is refused",
			apps:     "  - {name: web, source: {repo: 'https:///web.git'}}\n",
			problems: []string{"3:32 applications[0].source.repo: want a host after https://"},
		},
		{
			name:     "an scp-like address without a path is refused",
			apps:     "  - {name: web, source: {repo: 'git@host:'}}\n",
			problems: []string{"3:32 applications[0].source.repo: want an scp-like address of the form user@host:path"},
		},
		{
			name:     "a revision git cannot name is refused",
			apps:     "  - {name: web, source: {repo: /r, revision: main..dev}}\n",
			problems: []string{`3:46 applications[0].source.revision: want a branch, tag or commit, got "main..dev", which git does not accept as a ref name`},
		},
		{
			name:     "a revision that looks like a flag is refused",
			apps:     "  - {name: web, source: {repo: /r, revision: --upload-pack=x}}\n",
			problems: []string{`3:46 applications[0].source.revision: want a branch, tag or commit, got "--upload-pack=x", which starts with '-'`},
		},
		{
			name: "a numeric-looking revision keeps its text",
			apps: "  - {name: web, source: {repo: /r, revision: 1.10}}\n",
			want: func() Application { a := app("web", "/r"); a.Source.Revision = "1.10"; return a }(),
		},
		{
			name:     "a revision must be a string",
			apps:     "  - {name: web, source: {repo: /r, revision: [x]}}\n",
			problems: []string{"3:46 applications[0].source.revision: want a string, got a list"},
		},
		{
			name:     "a compose file listed twice is refused",
			apps:     "  - {name: web, source: {repo: /r, files: [a.yml, ./a.yml]}}\n",
			problems: []string{`3:51 applications[0].source.files[1]: "./a.yml" is listed twice; first as applications[0].source.files[0]`},
		},
		{
			name:     "the application's path itself is not a compose file",
			apps:     "  - {name: web, source: {repo: /r, files: [.]}}\n",
			problems: []string{`3:44 applications[0].source.files[0]: want a file, got the directory "."`},
		},
		{
			name:     "variable names must be names compose can interpolate",
			apps:     "  - {name: web, source: {repo: /r, variables: {1X: a, OK_1: b}}}\n",
			problems: []string{`3:52 applications[0].source.variables.1X: want a variable name (letters, digits and '_', not starting with a digit), got "1X"`},
		},
		{
			name:     "a variable value must be a scalar",
			apps:     "  - {name: web, source: {repo: /r, variables: {A: {b: c}}}}\n",
			problems: []string{"3:51 applications[0].source.variables.A: want a string, got a mapping"},
		},
		{
			name:     "a key written twice is refused with the first line",
			apps:     "  - name: web\n    source: {repo: /r}\n    name: api\n",
			problems: []string{"5:5 applications[0].name: key written twice; first at line 3"},
		},
		{
			name:     "a negative interval is refused in UnmarshalYAML",
			apps:     "  - {name: web, source: {repo: /r}, syncPolicy: {interval: -1m}}\n",
			problems: []string{`3:60 applications[0].syncPolicy.interval: want a positive duration, got "-1m"`},
		},
		{
			name:     "a negative number of hook jobs to keep is refused",
			apps:     "  - {name: web, source: {repo: /r}, syncPolicy: {keepHookJobs: -1}}\n",
			problems: []string{"3:64 applications[0].syncPolicy.keepHookJobs: want a number from 1 to 100 (0 or absent: the default), got -1"},
		},
		{
			name:     "a zero interval is below the floor, not the default",
			apps:     "  - {name: web, source: {repo: /r}, syncPolicy: {interval: 0s}}\n",
			problems: []string{"3:60 applications[0].syncPolicy.interval: 0s is below the floor of 10s"},
		},
		{
			name:     "an application that is not a mapping is one problem",
			apps:     "  - web\n",
			problems: []string{`3:5 applications[0]: want a mapping, got "web"`},
		},
		{
			name:     "a merge key must merge mappings",
			apps:     "  - {name: web, source: {repo: /r}, syncPolicy: {<<: 5}}\n",
			problems: []string{`3:54 applications[0].syncPolicy: want a mapping or a list of mappings to merge (<<), got "5"`},
		},
		{
			name: "null values mean the default",
			apps: "  - name: web\n    source: {repo: /r, revision: ~, path: }\n    release:\n    syncPolicy:\n    allow:\n",
			want: app("web", "/r"),
		},
		{
			name: "a release rollback and a failing rollout waited out are read",
			apps: "  - {name: web, source: {repo: /r}, syncPolicy: {rollback: release, preemptFailingRollout: false}}\n",
			want: func() Application {
				a := app("web", "/r")
				a.SyncPolicy.Rollback, a.SyncPolicy.WaitOutFailing = RollbackRelease, true
				return a
			}(),
		},
		{
			name:     "a rollback policy is one of three",
			apps:     "  - {name: web, source: {repo: /r}, syncPolicy: {rollback: everything}}\n",
			problems: []string{`3:60 applications[0].syncPolicy.rollback: want none, service or release, got "everything"`},
		},
		{
			name: "a variable's scalar value is kept as written",
			apps: "  - {name: web, source: {repo: /r, variables: {N: 010, B: true, E: }}}\n",
			want: func() Application {
				a := app("web", "/r")
				a.Source.Variables = map[string]string{"N": "010", "B": "true", "E": ""}
				return a
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Parse("applications.yaml", []byte(head+tt.apps))
			if tt.problems == nil {
				if err != nil {
					t.Fatalf("Parse = %v, want a valid set", err)
				}
				if diff := cmp.Diff([]Application{tt.want}, set.Applications()); diff != "" {
					t.Errorf("Parse applications (-want +got):\n%s", diff)
				}
				return
			}
			if diff := cmp.Diff(tt.problems, problemsOf(t, err)); diff != "" {
				t.Errorf("Parse problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProblemsFormatAsFileLineColumnFieldMessage(t *testing.T) {
	_, err := Parse("applications.yaml", []byte("apiVersion: skep/v1\napplications:\n  - name: web\n    source: {repo: /r}\n    syncPolicy: {interval: often}\n"))
	want := `applications.yaml:5:28: applications[0].syncPolicy.interval: want a duration like 3m or 90s, got "often"`
	if err == nil || err.Error() != want {
		t.Errorf("Parse error = %v, want %s", err, want)
	}
	wrapped := fmt.Errorf("load app set: %w", err)
	var problems configfile.Problems
	if !errors.As(wrapped, &problems) || len(problems) != 1 || problems[0].Line != 5 {
		t.Errorf("errors.As(wrapped) = %v, want the one problem at line 5", problems)
	}
}

func TestParseFilesChecksUniquenessAcrossFiles(t *testing.T) {
	files := []File{
		{Name: "a.yaml", Data: []byte("apiVersion: skep/v1\napplications:\n  - {name: web, source: {repo: /r}}\n")},
		{Name: "b.yaml", Data: []byte("apiVersion: skep/v1\napplications:\n  - {name: api, source: {repo: /r}, syncPolicy: {interval: 1s}}\n  - {name: web, release: api, source: {repo: /r}}\n")},
	}
	_, err := ParseFiles(files)
	var problems configfile.Problems
	if !errors.As(err, &problems) {
		t.Fatalf("ParseFiles = %v, want configfile.Problems", err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		"b.yaml:3:60: applications[0].syncPolicy.interval: 1s is below the floor of 10s",
		`b.yaml:4:12: applications[1].name: name "web" is already used by applications[0] at a.yaml:3:12`,
		`b.yaml:4:26: applications[1].release: release "api" is already used by applications[0] at line 3`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseFiles problems (-want +got):\n%s", diff)
	}
}

func TestParseFilesKeepsFileOrder(t *testing.T) {
	files := []File{
		{Name: "z.yaml", Data: []byte("apiVersion: skep/v1\napplications:\n  - {name: zeta, source: {repo: /r}}\n")},
		{Name: "a.yaml", Data: []byte("apiVersion: skep/v1\napplications:\n  - {name: alpha, source: {repo: /r}}\n  - {name: beta, source: {repo: /r}}\n")},
	}
	set, err := ParseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"zeta", "alpha", "beta"}, set.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
}

// A source loaded every interval gets back the set it already has while
// its files do not change, not a new parse of them; a changed byte parses
// again, and an invalid set is never what a later load gets back.
func TestParseFilesParsesUnchangedFilesOnce(t *testing.T) {
	files := func(name string) []File {
		return []File{{Name: "apps.yaml", Data: []byte("apiVersion: skep/v1\napplications:\n  - {name: " + name + ", source: {repo: /r}}\n")}}
	}
	first, err := ParseFiles(files("web"))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ParseFiles(files("web")); err != nil || again != first {
		t.Errorf("the same files parsed again: %p, %v; want the set %p", again, err, first)
	}
	other, err := ParseFiles(files("api"))
	if err != nil || other == first || !slices.Equal(other.Names(), []string{"api"}) {
		t.Errorf("changed files gave %v, %v; want a new set of api", other.Names(), err)
	}
	for range 2 {
		if set, err := ParseFiles(files("-bad")); err == nil {
			t.Errorf("an invalid set loaded: %v", set.Names())
		}
	}
	if again, err := ParseFiles(files("api")); err != nil || again != other {
		t.Errorf("after an invalid load, the last valid files parsed again: %p, %v; want %p", again, err, other)
	}
}

func TestParseStopsAliasExpansionAtTheBudget(t *testing.T) {
	// Each level multiplies the nodes visited by ten: 10^7 without a budget.
	var b strings.Builder
	b.WriteString("apiVersion: skep/v1\nx-0: &a0 {repo: /r}\n")
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&b, "x-%d: &a%d {<<: [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]}\n")
	}
	b.WriteString("applications:\n")
	for i := range 3 {
		fmt.Fprintf(&b, "  - {name: a%d, source: *a6}\n", i)
	}
	_, err := Parse("bomb.yaml", []byte(b.String()))
	var problems configfile.Problems
	if !errors.As(err, &problems) || !strings.Contains(problems.Error(), "document too large or too deeply aliased") {
		t.Fatalf("Parse = %v, want the budget problem", err)
	}
}

func TestSetHandsOutCopies(t *testing.T) {
	set, err := LoadFile("testdata/valid/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	apps := set.Applications()
	apps[0].Source.Files[0] = "changed.yaml"
	apps[0].Source.Variables["DOMAIN"] = "changed"
	apps[0].Allow.HostPaths[0] = "/changed"
	looked, _ := set.Lookup("web")
	looked.Allow.Networks[0] = "changed"

	again, ok := set.Lookup("web")
	if !ok {
		t.Fatal(`Lookup("web") found nothing`)
	}
	if again.Source.Files[0] != "compose.yaml" || again.Source.Variables["DOMAIN"] != "web.example.org" ||
		again.Allow.HostPaths[0] != "/" || again.Allow.Networks[0] != "traefik-public" {
		t.Errorf("set changed through a returned copy: %+v", again)
	}
	if _, ok := set.Lookup("nope"); ok {
		t.Error(`Lookup("nope") found an application`)
	}
	var empty *Set
	if empty.Len() != 0 || empty.Applications() != nil || empty.Names() != nil {
		t.Error("nil *Set is not empty")
	}
}

func TestMarshalledSetParsesToTheSameSet(t *testing.T) {
	for _, name := range fixtures(t, "valid") {
		t.Run(filepath.Base(name), func(t *testing.T) {
			set, err := LoadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			assertRoundTrip(t, set)
		})
	}
}

func assertRoundTrip(t *testing.T, set *Set) {
	t.Helper()
	out, err := yaml.Marshal(set)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	again, err := Parse("marshalled.yaml", out)
	if err != nil {
		t.Fatalf("Parse(Marshal(set)) = %v\n%s", err, out)
	}
	if diff := cmp.Diff(set.Applications(), again.Applications()); diff != "" {
		t.Errorf("Parse(Marshal(set)) differs (-set +again):\n%s\n%s", diff, out)
	}
}

func TestExampleAppSetIsValid(t *testing.T) {
	set, err := LoadFile("../examples/appset/applications.yaml")
	if err != nil {
		t.Fatalf("example app set: %v", err)
	}
	if diff := cmp.Diff([]string{"web", "monitoring"}, set.Names()); diff != "" {
		t.Errorf("example names (-want +got):\n%s", diff)
	}
}

// TestSchemaTypesAreDecodable guards decoder.decode's default case: every
// field of the file form is a kind it handles.
func TestSchemaTypesAreDecodable(t *testing.T) {
	unmarshaler := reflect.TypeFor[yaml.Unmarshaler]()
	var check func(t reflect.Type, path string)
	check = func(typ reflect.Type, path string) {
		if reflect.PointerTo(typ).Implements(unmarshaler) {
			return
		}
		switch typ.Kind() {
		case reflect.String, reflect.Bool, reflect.Int:
		case reflect.Pointer:
			check(typ.Elem(), path)
		case reflect.Slice:
			check(typ.Elem(), path+"[]")
		case reflect.Map:
			if typ.Key().Kind() != reflect.String {
				t.Errorf("%s: map key %s is not a string", path, typ.Key())
			}
			check(typ.Elem(), path+"{}")
		case reflect.Struct:
			for i := range typ.NumField() {
				if f := typ.Field(i); f.IsExported() {
					check(f.Type, path+"."+f.Name)
				}
			}
		default:
			t.Errorf("%s: %s cannot be decoded", path, typ)
		}
	}
	check(reflect.TypeFor[fileDoc](), "fileDoc")
}

// fixtures lists the YAML files under testdata/dir.
func fixtures(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", dir, "*.y*ml"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no fixtures in testdata/%s: %v", dir, err)
	}
	return names
}

func TestReadFiles(t *testing.T) {
	fsys := os.DirFS("testdata")
	tests := []struct {
		name    string
		path    string
		want    []string
		wantErr error
	}{
		{name: "a file is read alone", path: "valid/minimal.yaml", want: []string{"valid/minimal.yaml"}},
		{name: "a directory gives its yaml and yml files in name order, dotfiles skipped", path: "dir-valid", want: []string{"dir-valid/a.yaml", "dir-valid/b.yml"}},
		{name: "a missing path is an error", path: "nope", wantErr: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, err := ReadFiles(fsys, tt.path)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ReadFiles(%s) error = %v, want %s", tt.path, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range files {
				got = append(got, f.Name)
				if len(f.Data) == 0 {
					t.Errorf("%s read empty", f.Name)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ReadFiles(%s) names (-want +got):\n%s", tt.path, diff)
			}
		})
	}
}

func TestReadFilesRefusesADirectoryWithoutAppSetFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFiles(os.DirFS(dir), "."); err == nil || !strings.Contains(err.Error(), "no *.yaml or *.yml files") {
		t.Errorf("ReadFiles(empty dir) = %v, want the no-files error", err)
	}
}

func TestDigestChangesWithNameOrContent(t *testing.T) {
	base := Digest([]File{{Name: "a.yaml", Data: []byte("x")}})
	for _, files := range [][]File{
		{{Name: "b.yaml", Data: []byte("x")}},
		{{Name: "a.yaml", Data: []byte("y")}},
		{{Name: "a.yaml", Data: []byte("x")}, {Name: "b.yaml"}},
		{{Name: "a.yamlx", Data: nil}},
	} {
		if got := Digest(files); got == base {
			t.Errorf("Digest(%q) = Digest of a.yaml", files)
		}
	}
	if again := Digest([]File{{Name: "a.yaml", Data: []byte("x")}}); again != base {
		t.Errorf("Digest is not stable: %s then %s", base, again)
	}
}

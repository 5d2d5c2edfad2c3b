package appset

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

func TestExpandMakesOneApplicationPerDirectory(t *testing.T) {
	set, err := LoadFile(filepath.Join("testdata", "valid", "generators.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Generator{{Name: "stacks", Repo: "https://git.example.org/acme/stacks.git", Revision: "main", Directories: []string{"stacks/*"}}}
	if d := cmp.Diff(want, set.Generators()); d != "" {
		t.Errorf("Generators (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"web"}, set.Names()); d != "" {
		t.Errorf("names before Expand (-want +got):\n%s", d)
	}
	got, err := set.Expand(map[string][]string{"stacks": {"stacks/Shop_API", "stacks/blog"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"web", "shop-api", "blog"}, got.Names()); d != "" {
		t.Errorf("names after Expand (-want +got):\n%s", d)
	}
	shop, _ := got.Lookup("shop-api")
	wantApp := app("shop-api", "https://git.example.org/acme/stacks.git")
	wantApp.Source.Revision, wantApp.Source.Path, wantApp.Source.Files = "main", "stacks/Shop_API", []string{"stack.yml"}
	wantApp.SyncPolicy.Automated, wantApp.SyncPolicy.Prune, wantApp.SyncPolicy.Interval = true, true, time.Minute
	wantApp.DependsOn, wantApp.Generator = []string{"web"}, "stacks"
	if d := cmp.Diff(wantApp, shop); d != "" {
		t.Errorf("generated application (-want +got):\n%s", d)
	}
	if set.Len() != 1 {
		t.Errorf("Expand changed the set it was called on: %v", set.Names())
	}
	// Marshalled, the set keeps its generator and not what it generated.
	assertRoundTrip(t, set)
	again, err := Parse("again.yaml", mustMarshal(t, got))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(set.Generators(), again.Generators()); d != "" || again.Len() != 1 {
		t.Errorf("marshalled expanded set: generators (-want +got) %s, %d applications; want the generator and the one declared", d, again.Len())
	}
}

// applications defaults to []: an app set of generators alone is valid,
// and lists only what they generate.
func TestGeneratorsAloneNeedNoApplications(t *testing.T) {
	set, err := LoadFile(filepath.Join("testdata", "valid", "generators-only.yaml"))
	if err != nil {
		t.Fatalf("LoadFile(generators-only.yaml) = %v, want a valid set", err)
	}
	if set.Len() != 0 || len(set.Generators()) != 1 {
		t.Fatalf("set has %d applications and %d generators, want 0 and 1", set.Len(), len(set.Generators()))
	}
	got, err := set.Expand(map[string][]string{"stacks": {"stacks/blog"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"blog"}, got.Names()); d != "" {
		t.Errorf("names after Expand (-want +got):\n%s", d)
	}
	assertRoundTrip(t, set)
}

func TestExpandRefusesCollisionsAtTheGeneratorsDirectories(t *testing.T) {
	set, err := LoadFile(filepath.Join("testdata", "valid", "generators.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dirs []string
		want []string
	}{
		{"a directory named like a declared application", []string{"stacks/Web"},
			[]string{`8:18 generators[0].directories: directory "stacks/Web" gives the application name web, already used by application web (testdata/valid/generators.yaml:3); rename the directory`}},
		{"two directories giving one name", []string{"stacks/a_b", "stacks/a-b"},
			[]string{`8:18 generators[0].directories: directory "stacks/a_b" gives the application name a-b, already used by directory stacks/a-b of generator stacks; rename the directory`}},
		{"a directory without letters or digits", []string{"stacks/__"},
			[]string{`8:18 generators[0].directories: directory "stacks/__" gives no application name: its last element needs a letter or digit`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := set.Expand(map[string][]string{"stacks": tc.dirs})
			if got != nil {
				t.Errorf("Expand returned a set with an error")
			}
			if d := cmp.Diff(tc.want, problemsOf(t, err)); d != "" {
				t.Errorf("problems (-want +got):\n%s", d)
			}
		})
	}
}

func TestGeneratorProblemsNameTheirField(t *testing.T) {
	const head = "apiVersion: skep/v1\napplications: []\ngenerators:\n"
	for _, tc := range []struct {
		name, generators string
		problems         []string
	}{
		{
			name:       "missing keys are reported at the generator",
			generators: "  - {}\n",
			problems: []string{
				"4:5 generators[0].name: missing; want a name for the generator, shown beside what it generates",
				"4:5 generators[0].repo: missing; want the URL or local path of the git repository whose directories make applications",
				"4:5 generators[0].directories: missing; want globs of directories like stacks/*",
			},
		},
		{
			name: "what the generator sets may not be in the template, and the template is checked like an application",
			generators: "  - name: stacks\n    repo: /r\n    directories: ['../*']\n    template:\n      name: x\n      source: {path: a}\n" +
				"      syncPolicy: {interval: 1s}\n      dependsOn: [db]\n",
			problems: []string{
				`6:19 generators[0].directories[0]: want a path inside the repository, got "../*", which leaves it`,
				"8:13 generators[0].template.name: set by the generator for each directory; leave it out of the template",
				"9:22 generators[0].template.source.path: set by the generator for each directory; leave it out of the template",
				"10:30 generators[0].template.syncPolicy.interval: 1s is below the floor of 10s",
				`11:19 generators[0].template.dependsOn[0]: unknown application "db"; a generated application may depend only on applications the set declares`,
			},
		},
		{
			name:       "a generator name used twice is refused",
			generators: "  - {name: s, repo: /r, directories: ['a/*']}\n  - {name: s, repo: /r, directories: ['b/*']}\n",
			problems:   []string{"5:12 generators[1].name: generator \"s\" is already defined at g.yaml:4:12"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("g.yaml", []byte(head+tc.generators))
			if d := cmp.Diff(tc.problems, problemsOf(t, err)); d != "" {
				t.Errorf("problems (-want +got):\n%s", d)
			}
		})
	}
}

func TestNameOfDerivesADNSLabel(t *testing.T) {
	for dir, want := range map[string]string{
		"stacks/web": "web", "stacks/Shop_API": "shop-api", "a/b/--x--y--": "x-y", "stacks/ü": "", "stacks/日本web": "web",
		"s/" + string(make([]byte, 0)) + "0123456789012345678901234567890123456789012345678901234567890123456789": "012345678901234567890123456789012345678901234567890123456789012",
	} {
		if got := nameOf(dir); got != want || (got != "" && !dnsLabel.MatchString(got)) {
			t.Errorf("nameOf(%q) = %q, want %q", dir, got, want)
		}
	}
}

func mustMarshal(t *testing.T, set *Set) []byte {
	t.Helper()
	out, err := yaml.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

package chart

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/golden"
	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/stack"
)

// load loads the chart testdata/name, failing the test on a problem.
func load(t testing.TB, name string) *Chart {
	t.Helper()
	c, err := Load(os.DirFS("testdata"), name)
	if err != nil {
		t.Fatalf("Load(%s) = %v", name, err)
	}
	return c
}

// valuesFiles reads testdata/values/NAME.yaml for each name.
func valuesFiles(t testing.TB, names ...string) []ValuesFile {
	t.Helper()
	var out []ValuesFile
	for _, n := range names {
		p := filepath.Join("testdata", "values", n+".yaml")
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ValuesFile{Name: "values/" + n + ".yaml", Data: data})
	}
	return out
}

// goldenRender is the shape of the golden files: the manifest, the
// content of every file the document takes content from, and the Swarm
// objects stack.Convert names from it.
type goldenRender struct {
	Chart    string            `yaml:"chart"`
	Values   string            `yaml:"values"`
	Compose  string            `yaml:"compose"`
	Files    map[string]string `yaml:"files"`
	Services []string          `yaml:"services"`
	Configs  []string          `yaml:"configs"`
	Secrets  []string          `yaml:"secrets"`
	Warnings []string          `yaml:"warnings,omitempty"`
}

func marshalRender(t *testing.T, doc *render.Document, m Manifest) []byte {
	t.Helper()
	rel, err := stack.Convert(doc.Config, stack.Options{
		Owner: stack.Owner{Controller: "test", Application: "web", Release: "web"},
		Allow: stack.Allow{Networks: []string{"traefik-public"}},
		Files: doc.Files,
	})
	if err != nil {
		t.Fatalf("stack.Convert() = %v", err)
	}
	g := goldenRender{
		Chart: m.Chart + " " + m.Version + " " + strings.Join(m.ValuesFiles, ","), Values: m.Values, Compose: m.Compose,
		Files:    map[string]string{},
		Services: slices.Sorted(maps.Keys(rel.Services)),
		Configs:  slices.Sorted(maps.Keys(rel.Configs)),
		Secrets:  slices.Sorted(maps.Keys(rel.Secrets)),
		Warnings: doc.Warnings,
	}
	for name, data := range doc.Files {
		if !strings.Contains(name, "secrets/") {
			g.Files[name] = string(data)
		}
	}
	out, err := yaml.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRenderMatchesGolden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		opts   RenderOptions
	}{
		{name: "defaults-render-the-chart-values"},
		{name: "values-files-apply-in-order-later-winning", values: []string{"staging", "staging-eu"}},
		{name: "set-wins-over-values-files-and-is-typed", values: []string{"staging"},
			opts: RenderOptions{Set: map[string]string{"replicas": "5", "redis.enabled": "true", "greeting": "007", "database.host": "null"}}},
		{name: "artifacts-and-preview-reach-the-templates",
			opts: RenderOptions{
				Artifacts: map[string]Artifact{"web": {Version: "v2.5.0", Image: "registry.example.org/web:v2.5.0@sha256:" + strings.Repeat("ab", 32), Digest: "sha256:" + strings.Repeat("ab", 32)}},
				Preview:   Preview{Domain: "example.org", Hash: "1d0fd508", Branch: "feature/x"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := load(t, "web")
			opts := tc.opts
			opts.ReleaseName, opts.Revision = "web", 7
			opts.ValuesFiles = valuesFiles(t, tc.values...)
			doc, m, err := Render(t.Context(), c, opts)
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			golden.Check(t, filepath.Join("testdata", "golden", tc.name+".yaml"), marshalRender(t, doc, m))
		})
	}
}

func TestEveryCIValuesFileRenders(t *testing.T) {
	c := load(t, "web")
	ci := c.CIValues()
	if len(ci) != 2 {
		t.Fatalf("CIValues() = %d files, want 2", len(ci))
	}
	for _, f := range ci {
		t.Run(f.Name, func(t *testing.T) {
			if _, _, err := Render(t.Context(), c, RenderOptions{ReleaseName: "web", ValuesFiles: []ValuesFile{f}}); err != nil {
				t.Fatalf("Render(%s) = %v", f.Name, err)
			}
		})
	}
}

func TestRenderReportsEveryProblemWithItsLocation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chart  string
		values []ValuesFile
		set    map[string]string
		want   []string
	}{
		{
			name: "a template error names the template and line", chart: "index-error",
			want: []string{"index-error/templates/web.yaml:6:11: executing \"templates/web.yaml\" at <index .Values.ports 3>: error calling index: index out of range: 3"},
		},
		{
			name: "a required value that is missing fails with its message", chart: "required-missing",
			want: []string{"required-missing/templates/web.yaml:3:45: executing \"templates/web.yaml\" at <required \"image.tag is required: set it per environment\" .Values.image.tag>: error calling required: image.tag is required: set it per environment"},
		},
		{
			name: "a removed function is refused with the reason", chart: "uses-env",
			want: []string{"uses-env/templates/web.yaml:5:19: executing \"templates/web.yaml\" at <env \"HOME\">: error calling env: function env is not available in Skep charts: it reads the controller's environment; pass the value in values instead"},
		},
		{
			name: "a schema violation names the value's path", chart: "web",
			set: map[string]string{"replicas": "many", "image.tag": "5"},
			want: []string{
				"web/values.schema.json: image.tag: got number, want string",
				"web/values.schema.json: replicas: got string, want integer",
			},
		},
		{
			name: "a schema violation in a list names the index", chart: "web",
			values: []ValuesFile{{Name: "bad.yaml", Data: []byte("workers:\n  - replicas: 2\n")}},
			want:   []string{"web/values.schema.json: workers[0]: missing property 'name'"},
		},
		{
			name: "a values file that is not YAML names its line", chart: "web",
			values: []ValuesFile{{Name: "bad.yaml", Data: []byte("replicas: 2\nimage: [\n")}},
			want:   []string{"bad.yaml:2: invalid YAML: did not find expected node content"},
		},
		{
			name: "a values file over the size cap is refused", chart: "web",
			values: []ValuesFile{{Name: "big.yaml", Data: []byte("x: " + strings.Repeat("y", MaxFileSize))}},
			want:   []string{"big.yaml: larger than 1048576 bytes"},
		},
		{
			name: "a values file that is a list is refused", chart: "web",
			values: []ValuesFile{{Name: "bad.yaml", Data: []byte("- a\n")}},
			want:   []string{"bad.yaml:1:1: want a mapping of values, got a list"},
		},
		{
			name: "a set key with an empty part is refused", chart: "web",
			set:  map[string]string{"image..tag": "1"},
			want: []string{"--set: image..tag: want a dotted key like image.tag; a part is empty"},
		},
		{
			name: "a chart that needs a newer Skep is refused", chart: "too-new",
			want: []string{"chart too-new 0.1.0 needs Skep >=99; this is Skep v1.0.0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := load(t, tc.chart)
			var err error
			if tc.chart == "too-new" {
				err = c.CheckSkepVersion("v1.0.0")
			} else {
				_, _, err = Render(t.Context(), c, RenderOptions{ReleaseName: "r", ValuesFiles: tc.values, Set: tc.set})
			}
			if err == nil {
				t.Fatal("Render() = nil, want an error")
			}
			var got []string
			var ps configfile.Problems
			if errors.As(err, &ps) {
				for _, p := range ps {
					got = append(got, p.String())
				}
			} else {
				got = []string{err.Error()}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Render() problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestManifestMasksSecretsButKeepsTheRest(t *testing.T) {
	c := load(t, "web")
	_, m, err := Render(t.Context(), c, RenderOptions{ReleaseName: "web", ValuesFiles: valuesFiles(t, "staging-eu")})
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"s3cret", "change-me"} {
		if strings.Contains(m.Values, secret) || strings.Contains(m.Compose, secret) {
			t.Errorf("manifest holds the secret %q:\nvalues:\n%s\ncompose:\n%s", secret, m.Values, m.Compose)
		}
	}
	for _, want := range []string{"password: " + Masked, "host: db.internal"} {
		if !strings.Contains(m.Values, want) {
			t.Errorf("manifest values lack %q:\n%s", want, m.Values)
		}
	}
	if !strings.Contains(m.Compose, "DB_PASSWORD: "+Masked) || !strings.Contains(m.Compose, "DB_HOST: db.internal") {
		t.Errorf("manifest compose does not mask DB_PASSWORD alone:\n%s", m.Compose)
	}
}

func TestRenderDoesNotModifyTheSharedChart(t *testing.T) {
	c := load(t, "web")
	before := c.Values()
	if _, _, err := Render(t.Context(), c, RenderOptions{ValuesFiles: valuesFiles(t, "staging", "staging-eu"), Set: map[string]string{"redis.enabled": "true"}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, c.Values()); diff != "" {
		t.Errorf("Render changed the chart's defaults (-before +after):\n%s", diff)
	}
}

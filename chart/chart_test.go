package chart

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/configfile"
)

// problemStrings returns err's problems as strings, or err alone.
func problemStrings(err error) []string {
	var ps configfile.Problems
	if !errors.As(err, &ps) {
		return []string{err.Error()}
	}
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// minimal is the smallest valid chart, as files of an fstest.MapFS.
func minimal(extra map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{
		"c/Chart.yaml":         {Data: []byte("name: c\nversion: 1.0.0\n")},
		"c/templates/web.yaml": {Data: []byte("services:\n  web:\n    image: nginx\n")},
	}
	for k, v := range extra {
		if v == "" {
			delete(fsys, k)
			continue
		}
		fsys[k] = &fstest.MapFile{Data: []byte(v)}
	}
	return fsys
}

func TestLoadReportsEveryProblemOfAChart(t *testing.T) {
	for _, tc := range []struct {
		name string
		fsys fstest.MapFS
		dir  string
		want []string
	}{
		{
			name: "Chart.yaml problems name file and line, all at once",
			fsys: fstest.MapFS(nil), dir: "bad-metadata",
			want: []string{
				`bad-metadata/Chart.yaml:1:7: name: want lower-case letters, digits, '-', '_' and '.', at most 63, got "Bad_Name"`,
				`bad-metadata/Chart.yaml:2:10: version: want a SemVer 2 version like 1.2.3, got "one"`,
				`bad-metadata/Chart.yaml:3:14: skepVersion: want a version range like ">=0.3", got ">= banana": improper constraint: >= banana`,
				`bad-metadata/Chart.yaml:4:1: colour: unknown key; want one of apiVersion, name, version, appVersion, description, skepVersion, type, home, icon, keywords, sources, maintainers, deprecated, annotations, swarmcliVersion`,
			},
		},
		{
			name: "a template that does not parse names the template and line",
			dir:  "parse-error",
			want: []string{`parse-error/templates/web.yaml:4: function "nosuchfunction" not defined`},
		},
		{
			name: "a directory without Chart.yaml is not a chart",
			fsys: minimal(map[string]string{"c/Chart.yaml": ""}), dir: "c",
			want: []string{"c/Chart.yaml: missing; a chart directory holds Chart.yaml"},
		},
		{
			name: "a missing directory is named",
			fsys: minimal(nil), dir: "nope",
			want: []string{"nope: no such chart directory"},
		},
		{
			name: "a chart without fragments is refused",
			fsys: minimal(map[string]string{"c/templates/web.yaml": "", "c/templates/_helpers.tpl": "{{ define \"x\" }}{{ end }}"}), dir: "c",
			want: []string{"c/templates: no templates; want compose fragments in templates/*.yaml"},
		},
		{
			name: "a .tpl file without the underscore is refused",
			fsys: minimal(map[string]string{"c/templates/helpers.tpl": "{{ define \"x\" }}{{ end }}"}), dir: "c",
			want: []string{"c/templates/helpers.tpl: a .tpl file holds named templates only; name it _helpers.tpl"},
		},
		{
			name: "a file over the size cap is refused without being held",
			fsys: minimal(map[string]string{"c/files/big.bin": strings.Repeat("x", MaxFileSize+1)}), dir: "c",
			want: []string{"c/files/big.bin: larger than 1048576 bytes"},
		},
		{
			name: "a values.yaml that is not YAML names its line",
			fsys: minimal(map[string]string{"c/values.yaml": "a: 1\na: 2\n"}), dir: "c",
			want: []string{`c/values.yaml:2: invalid YAML: mapping key "a" already defined at line 1`},
		},
		{
			name: "an invalid schema is refused at Load",
			fsys: minimal(map[string]string{"c/values.schema.json": `{"type": "nonsense"}`}), dir: "c",
			want: []string{"c/values.schema.json: invalid schema: \"values.schema.json#\" is not valid against metaschema: jsonschema validation failed with 'https://json-schema.org/draft/2020-12/schema#'\n- at '': 'allOf' failed\n  - at '/type': 'anyOf' failed\n    - at '/type': value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'\n    - at '/type': got string, want array"},
		},
		{
			name: "a schema reference outside the schema is never fetched",
			fsys: minimal(map[string]string{"c/values.schema.json": `{"$ref": "file:///etc/passwd"}`}), dir: "c",
			want: []string{"c/values.schema.json: invalid schema: failing loading \"file:///etc/passwd\": schema reference file:///etc/passwd: only references within values.schema.json are allowed"},
		},
		{
			name: "requirements.yaml is strict",
			fsys: minimal(map[string]string{"c/requirements.yaml": "networks: [a]\nvolumes: [b]\n"}), dir: "c",
			want: []string{"c/requirements.yaml:2:1: volumes: unknown key; want one of networks, configs, secrets"},
		},
		{
			name: "a ci values file that is not a mapping is refused",
			fsys: minimal(map[string]string{"c/ci/prod-values.yaml": "just text\n"}), dir: "c",
			want: []string{"c/ci/prod-values.yaml:1:1: want a mapping of values, got \"just text\""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.fsys == nil {
				_, err = Load(os.DirFS("testdata"), tc.dir)
			} else {
				_, err = Load(tc.fsys, tc.dir)
			}
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Load() = %v, want a chart", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Load() = nil, want problems")
			}
			if diff := cmp.Diff(tc.want, problemStrings(err)); diff != "" {
				t.Errorf("Load() problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadRefusesMoreFilesThanTheCap(t *testing.T) {
	extra := map[string]string{}
	for i := range MaxFiles {
		extra["c/files/f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+strings.Repeat("y", i/26)] = "x"
	}
	_, err := Load(minimal(extra), "c")
	if err == nil || !strings.Contains(err.Error(), "more than 500 files") {
		t.Fatalf("Load() = %v, want the file cap", err)
	}
}

func TestContentOfConfigsAndSecretsBecomesFiles(t *testing.T) {
	for _, tc := range []struct {
		name, objects string
		want          []string
	}{
		{"content is kept beside the chart files, hashed by stack.Convert", "configs:\n  x:\n    content: hi\n", nil},
		{"content and file together are refused", "configs:\n  x:\n    content: hi\n    file: a.conf\n", []string{"c/templates (merged): configs.x: has both content and file; want one"}},
		{"an environment source is refused", "secrets:\n  x:\n    environment: HOME\n", []string{"c/templates (merged): secrets.x.environment: reads the controller's environment; use content: with a value instead"}},
		{"structured content is refused", "configs:\n  x:\n    content: {a: 1}\n", []string{"c/templates (merged): configs.x.content: want text; write a structure with toYaml or toJson"}},
		{"a chart file in the content directory is refused", "configs:\n  x:\n    content: hi\n", []string{"c/.content/configs/x: a chart may hold no file under .content/; Skep keeps config and secret content there"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := map[string]string{"c/templates/objects.yaml": tc.objects}
			if strings.Contains(tc.name, "content directory") {
				extra["c/.content/configs/x"] = "planted"
			}
			c, err := Load(minimal(extra), "c")
			if err != nil {
				t.Fatal(err)
			}
			doc, _, err := Render(t.Context(), c, RenderOptions{ReleaseName: "r"})
			if tc.want != nil {
				if err == nil {
					t.Fatal("Render() = nil, want problems")
				}
				if diff := cmp.Diff(tc.want, problemStrings(err)); diff != "" {
					t.Errorf("Render() problems (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := string(doc.Files["c/.content/configs/x"]); got != "hi" {
				t.Errorf("Files[c/.content/configs/x] = %q, want hi", got)
			}
		})
	}
}

func TestSetTypesValuesLikeHelm(t *testing.T) {
	got, err := ParseSet(map[string]string{
		"replicas":         "3",
		"negative":         "-2",
		"leadingZero":      "007",
		"huge":             "99999999999999999999",
		"flag":             "true",
		"off":              "false",
		"gone":             "null",
		"list":             "{a,b}",
		"empty":            "{}",
		"image.tag":        "v1.2",
		"a\\.b":            "dotted key",
		"nested.deep.leaf": "x",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"replicas": int64(3), "negative": int64(-2), "leadingZero": "007", "huge": "99999999999999999999",
		"flag": true, "off": false, "gone": nil, "list": []any{"a", "b"}, "empty": []any{},
		"image": map[string]any{"tag": "v1.2"}, "a.b": "dotted key",
		"nested": map[string]any{"deep": map[string]any{"leaf": "x"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseSet() (-want +got):\n%s", diff)
	}
}

func TestValuesMergeMapsDeeplyReplaceListsAndDeleteOnNull(t *testing.T) {
	for _, tc := range []struct {
		name           string
		dst, src, want map[string]any
	}{
		{"mappings merge key by key", map[string]any{"a": map[string]any{"x": 1, "y": 2}}, map[string]any{"a": map[string]any{"y": 3}}, map[string]any{"a": map[string]any{"x": 1, "y": 3}}},
		{"lists are replaced whole", map[string]any{"l": []any{1, 2}}, map[string]any{"l": []any{3}}, map[string]any{"l": []any{3}}},
		{"null deletes the key", map[string]any{"a": 1, "b": 2}, map[string]any{"a": nil}, map[string]any{"b": 2}},
		{"a scalar replaces a mapping", map[string]any{"a": map[string]any{"x": 1}}, map[string]any{"a": "s"}, map[string]any{"a": "s"}},
		{"a mapping replaces a scalar", map[string]any{"a": "s"}, map[string]any{"a": map[string]any{"x": 1}}, map[string]any{"a": map[string]any{"x": 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mergeValues(tc.dst, tc.src)
			if diff := cmp.Diff(tc.want, tc.dst); diff != "" {
				t.Errorf("mergeValues (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFragmentsMergeMapsDeeplyReplaceListsAndIgnoreNull(t *testing.T) {
	for _, tc := range []struct {
		name           string
		dst, src, want map[string]any
	}{
		{"mappings merge key by key", map[string]any{"services": map[string]any{"a": map[string]any{"image": "x"}}}, map[string]any{"services": map[string]any{"b": map[string]any{"image": "y"}}},
			map[string]any{"services": map[string]any{"a": map[string]any{"image": "x"}, "b": map[string]any{"image": "y"}}}},
		{"a later scalar wins", map[string]any{"a": map[string]any{"image": "x"}}, map[string]any{"a": map[string]any{"image": "y"}}, map[string]any{"a": map[string]any{"image": "y"}}},
		{"lists are replaced, not appended", map[string]any{"ports": []any{"80"}}, map[string]any{"ports": []any{"443"}}, map[string]any{"ports": []any{"443"}}},
		{"a null adds nothing to what is there", map[string]any{"services": map[string]any{"a": 1}}, map[string]any{"services": nil}, map[string]any{"services": map[string]any{"a": 1}}},
		{"a null alone is kept", map[string]any{}, map[string]any{"volumes": nil}, map[string]any{"volumes": nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mergeFragment(tc.dst, tc.src)
			if diff := cmp.Diff(tc.want, tc.dst); diff != "" {
				t.Errorf("mergeFragment (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFragmentsMergeInTemplateOrder(t *testing.T) {
	c, err := Load(minimal(map[string]string{
		"c/templates/a.yaml": "services:\n  web:\n    image: a\n    environment: {FROM: a}\n",
		"c/templates/b.yml":  "services:\n  web:\n    image: b\n",
	}), "c")
	if err != nil {
		t.Fatal(err)
	}
	doc, _, err := Render(t.Context(), c, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// a.yaml, b.yml, web.yaml in name order: web.yaml's nginx wins, a's environment stays.
	svc := doc.Config.Services[0]
	if svc.Image != "nginx" || svc.Environment["FROM"] == nil || *svc.Environment["FROM"] != "a" {
		t.Errorf("merged web = image %q, environment %v; want nginx with FROM=a", svc.Image, svc.Environment)
	}
}

func TestCheckStableFindsTemplatesThatRenderDifferently(t *testing.T) {
	for _, tc := range []struct {
		name, chart string
		want        []string
	}{
		{"a random value is reported by its path", "unstable", []string{"services.web.environment.NONCE"}},
		{"a chart of pure templates is stable", "web", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CheckStable(t.Context(), load(t, tc.chart), RenderOptions{ReleaseName: "r"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CheckStable() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckReportsEveryUnmetRequirement(t *testing.T) {
	req, err := load(t, "web").Requirements(t.Context(), RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name              string
		allowed, existing Objects
		want              string
	}{
		{"allowed and present is met", Objects{Networks: []string{"traefik-public"}, Secrets: []string{"tls-cert"}}, Objects{Networks: []string{"traefik-public"}, Secrets: []string{"tls-cert"}}, ""},
		{"not allowed and absent are both named", Objects{Networks: []string{"traefik-public"}}, Objects{Secrets: []string{"tls-cert"}},
			"chart web: 2 requirement(s) of requirements.yaml not met:\n" +
				"  network \"traefik-public\" does not exist on the swarm (create it with docker network create)\n" +
				"  secret \"tls-cert\" is not in the application's allow list"},
		{"nothing allowed nor present", Objects{}, Objects{},
			"chart web: 2 requirement(s) of requirements.yaml not met:\n" +
				"  network \"traefik-public\" is not in the application's allow list and does not exist on the swarm (create it with docker network create)\n" +
				"  secret \"tls-cert\" is not in the application's allow list and does not exist on the swarm (create it with docker secret create)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			create, err := Check("web", req, tc.allowed, tc.existing)
			if len(create) > 0 {
				t.Errorf("Check() creates %v for a chart of short-form names", create)
			}
			got := ""
			if err != nil {
				got = err.Error()
				var ue *UnmetError
				if !errors.As(err, &ue) {
					t.Errorf("Check() = %T, want *UnmetError", err)
				}
			}
			if got != tc.want {
				t.Errorf("Check() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSkepVersionIsCheckedOnReleasesOnly(t *testing.T) {
	c := load(t, "too-new") // skepVersion: ">=99"
	for _, tc := range []struct {
		skep    string
		wantErr bool
	}{
		{"v1.0.0", true},
		{"1.0.0", true},
		{"v99.0.0", false},
		{"dev", false},
		{"v0.3.0-4-gabc1234", false},
		{"v0.0.0-20260101000000-abcdef123456", false},
		{"v0.3.0-rc.1", false},
	} {
		if err := c.CheckSkepVersion(tc.skep); (err != nil) != tc.wantErr {
			t.Errorf("CheckSkepVersion(%q) = %v, want error %v", tc.skep, err, tc.wantErr)
		}
	}
}

func TestRemovedFunctionsFailWithTheReason(t *testing.T) {
	for name := range Removed {
		t.Run(name, func(t *testing.T) {
			c, err := Load(minimal(map[string]string{"c/templates/x.yaml": "x-v: {{ " + name + " \"a\" }}\n"}), "c")
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = Render(t.Context(), c, RenderOptions{})
			if err == nil || !strings.Contains(err.Error(), "function "+name+" is not available in Skep charts") {
				t.Errorf("Render() = %v, want %s refused", err, name)
			}
		})
	}
}

func TestRunawayTemplatesAreStopped(t *testing.T) {
	for _, tc := range []struct {
		name, template, want string
	}{
		{"a huge sequence", "x-v: {{ len (until 100000000) }}\n", "longer than 10000"},
		{"a huge repeat", `x-v: {{ repeat 100000000 "xx" }}` + "\n", "past the 64 MiB a render may build"},
		{"an include of itself", `{{ define "loop" }}{{ include "loop" . }}{{ include "loop" . }}{{ end }}x-v: {{ include "loop" . }}` + "\n", "nested deeper than 100"},
		{"a panic in a function", `x-v: {{ index .Values "a" "b" }}` + "\n", "error calling index"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(minimal(map[string]string{"c/templates/x.yaml": tc.template}), "c")
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = Render(context.Background(), c, RenderOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Render() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestHelmHelpersWork(t *testing.T) {
	c, err := Load(minimal(map[string]string{
		"c/values.yaml":      "cfg: {a: 1}\nmsg: 'hello {{ .Release.Name }}'\n",
		"c/templates/x.yaml": "x-yaml:\n{{ toYaml .Values.cfg | indent 2 }}\nx-tpl: {{ tpl .Values.msg . }}\nx-missing: '{{ .Values.nothing }}'\nx-ns: {{ .Release.Namespace }}\n",
	}), "c")
	if err != nil {
		t.Fatal(err)
	}
	_, m, err := Render(t.Context(), c, RenderOptions{ReleaseName: "rel"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"x-yaml:\n  a: 1\n", "x-tpl: hello rel\n", "x-missing: \"\"\n", "x-ns: rel\n"} {
		if !strings.Contains(m.Compose, want) {
			t.Errorf("compose lacks %q:\n%s", want, m.Compose)
		}
	}
}

func TestChartAccessorsReturnCopies(t *testing.T) {
	c := load(t, "web")
	md := c.Metadata()
	md.Keywords[0] = "changed"
	r, err := c.Requirements(t.Context(), RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.Networks[0].Name = "changed"
	v := c.Values()
	v["image"].(map[string]any)["tag"] = "changed"
	again, _ := c.Requirements(t.Context(), RenderOptions{})
	if c.Metadata().Keywords[0] != "web" || again.Networks[0].Name != "traefik-public" || c.Values()["image"].(map[string]any)["tag"] != "2.4.1" {
		t.Error("changing what an accessor returned changed the chart")
	}
	if got := c.Templates(); !slices.Equal(got, []string{"templates/_helpers.tpl", "templates/objects.yaml.tmpl", "templates/web.yaml", "templates/workers.yml"}) {
		t.Errorf("Templates() = %v", got)
	}
}

// A chart in a checkout is loaded through an os.Root of it: a symbolic
// link is refused whether it stays inside or leads out, and a chart
// directory that is itself a link out of the checkout is not read.
func TestLoadThroughARootRefusesSymlinks(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(outside+"/passwd", []byte("root:x:0:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(outside+"/chart/templates", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outside+"/chart/Chart.yaml", []byte("name: c\nversion: 1.0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, link, to, want string
	}{
		{"a file linking out of the checkout", "c/files/passwd", outside + "/passwd", "c/files/passwd: not a regular file"},
		{"a file linking inside the chart", "c/files/again.conf", "a.conf", "c/files/again.conf: not a regular file"},
		{"a chart directory linking out of the checkout", "c", outside + "/chart", "path escapes from parent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkout := t.TempDir()
			if tc.link != "c" {
				for name, f := range minimal(map[string]string{"c/files/a.conf": "x"}) {
					p := filepath.Join(checkout, filepath.FromSlash(name))
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p, f.Data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := os.Symlink(tc.to, filepath.Join(checkout, filepath.FromSlash(tc.link))); err != nil {
				t.Fatal(err)
			}
			root, err := os.OpenRoot(checkout)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			ch, err := Load(root.FS(), "c")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load = %v, want an error containing %q", err, tc.want)
			}
			if ch != nil {
				t.Errorf("Load returned a chart despite the link")
			}
		})
	}
}

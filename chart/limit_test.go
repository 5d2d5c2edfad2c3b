package chart

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/configfile"
)

// runaway reads the template testdata/runaway/NAME.yaml: a shape a
// hostile commit could push to exhaust the controller.
func runaway(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "runaway", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// renderRunaway renders a chart whose only template is
// testdata/runaway/NAME.yaml.
func renderRunaway(t *testing.T, ctx context.Context, name string, timeout time.Duration) error {
	t.Helper()
	c, err := Load(minimal(map[string]string{"c/templates/web.yaml": "", "c/templates/x.yaml": runaway(t, name)}), "c")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Render(ctx, c, RenderOptions{Timeout: timeout})
	return err
}

func TestRenderStopsAtItsBoundsNamingTheTemplate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string
		timeout time.Duration
		want    string
	}{
		{
			name: "indent refuses a width past the memory bound before building it", file: "indent",
			want: `c/templates/x.yaml:1:8: executing "templates/x.yaml" at <indent 3000000000 "x">: error calling indent: would build 3000000001 bytes, past the 64 MiB a render may build`,
		},
		{
			name: "random text refuses a length past the memory bound", file: "random",
			want: `c/templates/x.yaml:1:8: executing "templates/x.yaml" at <randAlphaNum 1000000000>: error calling randAlphaNum: would build 1000000000 bytes, past the 64 MiB a render may build`,
		},
		{
			name: "toYaml of a dict doubled 25 times is refused by its expanded size", file: "dict-doubled",
			want: `c/templates/x.yaml:2:8: executing "templates/x.yaml" at <toYaml $d>: error calling toYaml: would build more than 64 MiB, the most a render may build (the value's shared parts count each time they appear)`,
		},
		{
			name: "toJson of lists nested 30 times is refused by its expanded size", file: "lists-nested",
			want: `c/templates/x.yaml:2:8: executing "templates/x.yaml" at <toJson $l>: error calling toJson: would build more than 64 MiB, the most a render may build (the value's shared parts count each time they appear)`,
		},
		{
			name: "deepCopy of a doubled dict is refused by its expanded size", file: "deep-copy",
			want: `c/templates/x.yaml:2:9: executing "templates/x.yaml" at <deepCopy $d>: error calling deepCopy: would build more than 64 MiB, the most a render may build (the value's shared parts count each time they appear)`,
		},
		{
			name: "printing a dict that holds itself is refused, not a stack overflow", file: "cycle",
			want: `c/templates/x.yaml:2:8: executing "templates/x.yaml" at <$d>: printing the value: nested deeper than 1000 (a value holding itself?)`,
		},
		{
			name: "a string doubled 40 times stops at the memory bound", file: "string-doubled",
			want: `c/templates/x.yaml:1:50: executing "templates/x.yaml" at <print $s $s>: error calling print: would build more than 64 MiB, the most a render may build (the value's shared parts count each time they appear)`,
		},
		{
			name: "printf widths count against the memory bound", file: "printf-width",
			want: `c/templates/x.yaml:1:8: executing "templates/x.yaml" at <printf (repeat 3000 "%999999[1]d") 1>: error calling printf: would build 3000102000 bytes; with the 33000 built before, that is past the 64 MiB a render may build`,
		},
		{
			name: "replace of the empty string counts what it inserts", file: "replace",
			want: `c/templates/x.yaml:1:8: executing "templates/x.yaml" at <replace "" (repeat 1000 "x") (repeat 1000000 "y")>: error calling replace: would build 1001001000 bytes; with the 1001000 built before, that is past the 64 MiB a render may build`,
		},
		{
			name: "regexReplaceAll counts a replacement per possible match", file: "regex-replace",
			want: `c/templates/x.yaml:1:8: executing "templates/x.yaml" at <regexReplaceAll "" (repeat 1000000 "y") (repeat 1000 "x")>: error calling regexReplaceAll: would build 1001001000 bytes; with the 1001000 built before, that is past the 64 MiB a render may build`,
		},
		{
			name: "three nested ranges of until 10000 stop at the step bound", file: "ranges-nested",
			want: `c/templates/x.yaml:1:55: executing "templates/x.yaml" at <until 10000>: ranging over 10000 items: more than 1000000 steps (function calls, pipelines and range iterations) in one render`,
		},
		{
			name: "a range over a huge number stops at the step bound", file: "range-int",
			want: `c/templates/x.yaml:1:9: executing "templates/x.yaml" at <1000000000000>: ranging over 1000000000000 items: more than 1000000 steps (function calls, pipelines and range iterations) in one render`,
		},
		{
			name: "a template calling itself twice per level stops at the step bound", file: "template-recursion",
			want: `c/templates/x.yaml:1:28: executing "twice" at <.n>: more than 1000000 steps (function calls, pipelines and range iterations) in one render`,
		},
		{
			name: "uniq of a long list is refused before its quadratic work", file: "uniq",
			want: `c/templates/x.yaml:2:8: executing "templates/x.yaml" at <uniq (concat $u $u $u $u $u $u $u $u $u $u)>: error calling uniq: comparing 100000 items with each other: more than 1000000 steps (function calls, pipelines and range iterations) in one render`,
		},
		{
			name: "fromYaml of an alias bomb is refused by the YAML decoder's own guard", file: "yaml-aliases",
			want: `c/templates/x.yaml:2:8: executing "templates/x.yaml" at <fromYaml $y>: error calling fromYaml: yaml: document contains excessive aliasing`,
		},
		{
			name: "slow functions in a loop stop at the render's time bound", file: "slow-functions", timeout: 500 * time.Millisecond,
			want: `c/templates/x.yaml: stopped after 500ms, the most a render may take`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Only the case of the time bound may meet it, on a machine
			// however slow (or -race).
			timeout := tc.timeout
			if timeout == 0 {
				timeout = time.Hour
			}
			err := renderRunaway(t, t.Context(), tc.file, timeout)
			var ps configfile.Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Render() = %v, want problems", err)
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.String())
			}
			if diff := cmp.Diff([]string{tc.want}, got); diff != "" {
				t.Errorf("Render() problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderReturnsOnceItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	// The template below runs for minutes unbounded; the cancel comes while
	// it runs, as a controller's shutdown would.
	stop := time.AfterFunc(100*time.Millisecond, cancel)
	defer stop.Stop()
	err := renderRunaway(t, ctx, "slow-functions", time.Hour)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Render() = %v, want the context's cancellation", err)
	}
	var ps configfile.Problems
	if errors.As(err, &ps) {
		t.Errorf("Render() = %v, a cancelled render is not a problem of the chart", err)
	}
}

func TestEveryRunawayShapeHasACase(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "runaway", "*.yaml"))
	if err != nil || len(files) < 10 {
		t.Fatalf("found %d runaway shapes (%v), want at least 10", len(files), err)
	}
	src, err := os.ReadFile("limit_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if !strings.Contains(string(src), `file: "`+name+`"`) {
			t.Errorf("testdata/runaway/%s.yaml has no case in TestRenderStopsAtItsBoundsNamingTheTemplate", name)
		}
	}
}

// BenchmarkRunawayRender renders each runaway shape (but the slow one,
// which only meets the time bound) to its refusal; B/op is everything the
// render allocated on the way, an upper bound on the memory it held.
func BenchmarkRunawayRender(b *testing.B) {
	files, err := filepath.Glob(filepath.Join("testdata", "runaway", "*.yaml"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no runaway shapes: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if name == "slow-functions" {
			continue
		}
		b.Run(name, func(b *testing.B) {
			text, err := os.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			c, err := Load(minimal(map[string]string{"c/templates/web.yaml": "", "c/templates/x.yaml": string(text)}), "c")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Render(b.Context(), c, RenderOptions{Timeout: time.Hour}); err == nil {
					b.Fatal("Render() = nil, want the refusal")
				}
			}
		})
	}
}

// BenchmarkRenderWebChart renders the test chart web with its ci values:
// what the bounds cost a chart that meets none of them.
func BenchmarkRenderWebChart(b *testing.B) {
	c := load(b, "web")
	opts := RenderOptions{ReleaseName: "web", ValuesFiles: c.CIValues()[:1]}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Render(b.Context(), c, opts); err != nil {
			b.Fatal(err)
		}
	}
}

func TestEveryCheckNamesAFunctionOfTheTemplates(t *testing.T) {
	e, err := newEngine(nil)
	if err != nil {
		t.Fatal(err)
	}
	funcs := e.funcs()
	for name := range checks {
		if _, ok := funcs[name]; !ok {
			t.Errorf("checks[%q] names no function a template can call", name)
		}
	}
	if len(checks) < 40 {
		t.Errorf("%d checks, want the 40 and more of docs/charts.md", len(checks))
	}
}

func TestTemplatedRequirementsRenderUnderTheSameBounds(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		timeout    time.Duration
		want       string
	}{
		{"a name built past the memory bound", "networks:\n  - name: \"{{ indent 3000000000 \"x\" | len }}\"\n", time.Hour,
			`c/requirements.yaml:2:14: executing "requirements.yaml" at <indent 3000000000 "x">: error calling indent: would build 3000000001 bytes, past the 64 MiB a render may build`},
		{"nested ranges past the step bound", "{{ range until 10000 }}{{ range until 10000 }}{{ end }}{{ end }}networks: []\n", time.Hour,
			`c/requirements.yaml:1:32: executing "requirements.yaml" at <until 10000>: ranging over 10000 items: more than 1000000 steps (function calls, pipelines and range iterations) in one render`},
		{"slow functions past the time bound", runaway(t, "slow-functions"), 500 * time.Millisecond,
			`c/requirements.yaml: stopped after 500ms, the most a render may take`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(minimal(map[string]string{"c/requirements.yaml": tc.file}), "c")
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Requirements(t.Context(), RenderOptions{ReleaseName: "r", Timeout: tc.timeout})
			if diff := cmp.Diff([]string{tc.want}, problemStrings(err)); diff != "" {
				t.Errorf("Requirements() problems (-want +got):\n%s", diff)
			}
		})
	}
}

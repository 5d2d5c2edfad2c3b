package configfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

type testFile struct {
	Name    string            `yaml:"name"`
	Enabled bool              `yaml:"enabled"`
	Count   int               `yaml:"count"`
	Items   []testItem        `yaml:"items"`
	Labels  map[string]string `yaml:"labels"`
	Limit   *int              `yaml:"limit"`
}

type testItem struct {
	Interval interval `yaml:"interval"`
	Tags     []string `yaml:"tags"`
}

// interval is a custom type that validates in UnmarshalYAML.
type interval time.Duration

func (i *interval) UnmarshalYAML(n *yaml.Node) error {
	d, err := time.ParseDuration(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil {
		return fmt.Errorf("want a duration like 30s, got %s", Describe(n))
	}
	*i = interval(d)
	return nil
}

func strs(ps Problems) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

func TestDecodeFillsEveryKindOfField(t *testing.T) {
	data, err := os.ReadFile("testdata/valid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got testFile
	d := Decode("valid.yaml", data, &got, Options{})
	if err := d.Err(); err != nil {
		t.Fatal(err)
	}
	ten := 10
	want := testFile{
		Name: "web", Enabled: true, Count: 3,
		Items:  []testItem{{Interval: interval(30 * time.Second), Tags: []string{"a", "b"}}, {Interval: interval(time.Minute)}},
		Labels: map[string]string{"team": "ops"}, Limit: &ten,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Decode (-want +got):\n%s", diff)
	}
}

func TestDecodeReportsEveryProblemWithItsPosition(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		opts Options
		want []string
	}{
		{
			name: "every problem of a file is reported, in file order",
			yaml: mustRead(t, "testdata/invalid.yaml"),
			want: []string{
				`f.yaml:1:7: name: want a string, got a list`,
				`f.yaml:2:10: enabled: want true or false, got "yes"`,
				`f.yaml:3:8: count: want a whole number, got "many"`,
				`f.yaml:5:15: items[0].interval: want a duration like 30s, got "often"`,
				`f.yaml:6:5: items[0].colour: unknown key; want one of interval, tags`,
				`f.yaml:7:11: items[1].tags: want a list, got "a"`,
				`f.yaml:8:9: labels: want a mapping, got "x"`,
			},
		},
		{
			name: "a key written twice names the first",
			yaml: "name: a\nname: b\n",
			want: []string{"f.yaml:2:1: name: key written twice; first at line 1"},
		},
		{
			name: "hidden values name only the kind of a misplaced scalar",
			yaml: "items: hunter2\ncount: 1.5\n",
			opts: Options{HideValues: true},
			want: []string{"f.yaml:1:8: items: want a list, got a string", "f.yaml:2:8: count: want a whole number, got a number"},
		},
		{
			name: "a document that is not a mapping shows what is wanted and the example",
			yaml: "- a\n",
			opts: Options{Want: "a mapping with name", Example: "name: web"},
			want: []string{"f.yaml:1:1: want a mapping with name, got a list; for example:\nname: web"},
		},
		{
			name: "invalid YAML names its line",
			yaml: "name: [\n",
			want: []string{"f.yaml:1: invalid YAML: did not find expected node content"},
		},
		{
			name: "a second document is refused at its line",
			yaml: "name: a\n---\nname: b\n",
			want: []string{"f.yaml:2:1: a second YAML document; a file holds one"},
		},
		{
			name: "x- keys are skipped anywhere",
			yaml: "x-top: 1\nitems:\n  - x-note: hi\n",
		},
		{
			name: "an integer too large for its field is refused",
			yaml: "limit: 99999999999999999999\n",
			want: []string{`f.yaml:1:8: limit: want a whole number, got "99999999999999999999"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v testFile
			got := strs(Decode("f.yaml", []byte(tc.yaml), &v, tc.opts).Problems())
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decode problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeStopsAtTheNodeBudget(t *testing.T) {
	var b strings.Builder
	b.WriteString("x-a: &a [" + strings.Repeat("t,", 999) + "t]\nitems:\n")
	for range 300 {
		b.WriteString("  - tags: *a\n")
	}
	var v testFile
	ps := Decode("f.yaml", []byte(b.String()), &v, Options{}).Problems()
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "too deeply aliased") {
		t.Errorf("Decode problems = %v, want one about the node budget", ps)
	}
}

func TestEmptyDocumentIsNoProblem(t *testing.T) {
	for _, data := range []string{"", "# only a comment\n", "~\n"} {
		var v testFile
		d := Decode("f.yaml", []byte(data), &v, Options{})
		if !d.Empty() || d.Err() != nil {
			t.Errorf("Decode(%q): Empty = %v, Err = %v; want true, nil", data, d.Empty(), d.Err())
		}
	}
}

func TestAddPointsAtTheFieldOrItsNearestPresentParent(t *testing.T) {
	var v testFile
	d := Decode("f.yaml", []byte("name: web\nitems:\n  - tags: [a]\n  - interval: often\n"), &v, Options{})
	for _, tc := range []struct {
		name, field, want string
	}{
		{"a present field is located at its value", "name", "f.yaml:1:7: name: m"},
		{"a missing field is located at its parent", "items[0].interval", "f.yaml:3:5: items[0].interval: m"},
		{"a missing top-level field is located at the document", "count", "f.yaml:1:1: count: m"},
		{"a field below one that failed to decode is not reported", "items[1].interval", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(d.Problems())
			d.Add(tc.field, "m")
			ps := d.Problems()
			var got string
			for _, p := range ps {
				if p.Message == "m" && p.Field == tc.field {
					got = p.String()
				}
			}
			if got != tc.want || (tc.want == "") != (len(ps) == before) {
				t.Errorf("Add(%q) recorded %q, want %q", tc.field, got, tc.want)
			}
		})
	}
}

func TestProblemsAreAnErrorFoundWithErrorsAs(t *testing.T) {
	var v testFile
	err := fmt.Errorf("load: %w", Decode("f.yaml", []byte("nope: 1\n"), &v, Options{}).Err())
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 1 || ps[0].Field != "nope" {
		t.Fatalf("errors.As(%v) = %v, want one problem at nope", err, ps)
	}
	for _, tc := range []struct {
		name string
		p    Problem
		want string
	}{
		{"every part", Problem{File: "f", Line: 1, Column: 2, Field: "a.b", Message: "m"}, "f:1:2: a.b: m"},
		{"no column", Problem{File: "f", Line: 1, Message: "m"}, "f:1: m"},
		{"no position or field", Problem{File: "f", Message: "m"}, "f: m"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%s: String() = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// FuzzDecode holds Decode to its contract on any input: it never panics,
// and gives either located problems or a value that decodes the same again.
func FuzzDecode(f *testing.F) {
	seeds, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds in testdata: %v", err)
	}
	for _, s := range seeds {
		data := mustRead(f, s)
		if data == "" {
			f.Fatalf("seed %s is empty", s)
		}
		f.Add([]byte(data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v testFile
		ps := Decode("fuzz.yaml", data, &v, Options{}).Problems()
		for _, p := range ps {
			if p.File != "fuzz.yaml" || p.Message == "" {
				t.Fatalf("problem without file or message: %+v", p)
			}
		}
		if len(ps) > 0 {
			return
		}
		var again testFile
		if err := Decode("fuzz.yaml", data, &again, Options{}).Err(); err != nil {
			t.Fatalf("second decode failed: %v", err)
		}
		if diff := cmp.Diff(v, again); diff != "" {
			t.Errorf("second decode differs:\n%s", diff)
		}
	})
}

func mustRead(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestDecodeIntoASliceWantsAListAndIndexesFieldPaths(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []string
	}{
		{"a list of mappings decodes with paths from the index", "- tags: [a]\n- interval: often\n  nope: 1\n",
			[]string{`f.yaml:2:13: [1].interval: want a duration like 30s, got "often"`, "f.yaml:3:3: [1].nope: unknown key; want one of interval, tags"}},
		{"a mapping is refused", "name: web\n", []string{"f.yaml:1:1: want a list, got a mapping"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v []testItem
			d := Decode("f.yaml", []byte(tc.data), &v, Options{})
			if diff := cmp.Diff(tc.want, strs(d.Problems())); diff != "" {
				t.Errorf("Decode(%q) problems (-want +got):\n%s", tc.data, diff)
			}
		})
	}
}

// named is a struct a file may write as its name alone.
type named struct {
	Name  string `yaml:"name"`
	Short bool   `yaml:"-"`
}

func (n *named) UnmarshalScalar(node *yaml.Node) error {
	if node.ShortTag() != "!!str" || node.Value == "" {
		return fmt.Errorf("want a name, got %s", Describe(node))
	}
	n.Name, n.Short = node.Value, true
	return nil
}

func TestScalarUnmarshalerTakesAScalarAndKeepsTheMappingStrict(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []named
		problems   []string
	}{
		{"a scalar is the short form", "- web\n", []named{{Name: "web", Short: true}}, nil},
		{"a mapping decodes field by field", "- name: web\n", []named{{Name: "web"}}, nil},
		{"both forms mix in one list", "- a\n- name: b\n", []named{{Name: "a", Short: true}, {Name: "b"}}, nil},
		{"an unknown key of the mapping names its line and path", "- name: web\n  nmae: x\n", []named{{Name: "web"}},
			[]string{"f.yaml:2:3: [0].nmae: unknown key; want one of name"}},
		{"the scalar's own error is placed at the scalar", "- web\n- 3\n", []named{{Name: "web", Short: true}, {}},
			[]string{`f.yaml:2:3: [1]: want a name, got "3"`}},
		{"a list is neither form", "- [a]\n", []named{{}}, []string{"f.yaml:1:3: [0]: want a mapping, got a list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []named
			d := Decode("f.yaml", []byte(tc.data), &got, Options{})
			if diff := cmp.Diff(tc.problems, strs(d.Problems())); diff != "" {
				t.Errorf("Decode(%q) problems (-want +got):\n%s", tc.data, diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decode(%q) (-want +got):\n%s", tc.data, diff)
			}
		})
	}
}

package canary

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// load reads testdata/name as compose's loader would hand the extension.
func load(t testing.TB, name string) any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseReadsEveryKindOfStep(t *testing.T) {
	s, problems := Parse(load(t, "full.yaml"))
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	var names []string
	for _, st := range s.Steps {
		names = append(names, st.String())
	}
	want := []string{"setWeight 20", "pause 30s", "analysis errors, smoke, ready", "setWeight 50", "pause 1m0s", "pause until promoted"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	m := s.Steps[2].Analysis.Metrics[0]
	if m.Interval != 10*time.Second || m.Count != 3 || m.InitialDelay != 5*time.Second || m.FailureLimit != 1 ||
		m.Timeout != DefaultTimeout || m.ConsecutiveErrorLimit != DefaultConsecutiveErrorLimit || m.Prometheus == nil ||
		m.SuccessCondition.String() != "result[0] < 0.05" {
		t.Errorf("metric errors = %+v", m)
	}
	if s.MaxFailures != 1 || !cmp.Equal(s.Weights(), []int{20, 50}) || !cmp.Equal(s.Jobs(), []string{"smoke-test"}) {
		t.Errorf("maxFailures %d, weights %v, jobs %v", s.MaxFailures, s.Weights(), s.Jobs())
	}
	if s, problems := Parse(load(t, "minimal.yaml")); len(problems) > 0 || s.Steps[1].Pause == nil || s.Steps[1].Pause.Duration != 0 {
		t.Errorf("minimal: %+v, %v", s, problems)
	}
}

// Every problem of a strategy is reported at once, each at its field.
func TestParseReportsEveryProblemAtItsField(t *testing.T) {
	_, problems := Parse(load(t, "bad.yaml"))
	var got []string
	for _, p := range problems {
		got = append(got, p.Field()+": "+p.Err.Error())
	}
	want := []string{
		"speed: unknown field; want one of maxFailures, steps",
		"maxFailures: want a whole number of at least 0, got -1",
		"steps[0].setWeight: want a percentage from 0 to 100, got 120",
		`steps[1].pause: want a positive duration such as 30s or 5m, got "soon"`,
		"steps[2]: want exactly one of setWeight, pause or analysis in a step",
		`steps[3].analysis.metrics[0].name: want a name of lower-case letters, digits and '-', got "Errors"`,
		"steps[3].analysis.metrics[0].interval: count is 3: want an interval between the measurements",
		"steps[3].analysis.metrics[0].successCondition: condition \"result <\": ",
		`steps[3].analysis.metrics[0].prometheus.address: want an http or https URL, got "ftp://p"`,
		"steps[3].analysis.metrics[0].prometheus.query: want a non-empty string",
		"steps[3].analysis.metrics[1]: want exactly one provider: prometheus, web or job",
		"steps[3].analysis.metrics[2].name: metric twice is named twice in this analysis",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d = %q, want it to start %q", i, got[i], want[i])
		}
	}
}

func TestParseRefusesWhatIsNoStrategy(t *testing.T) {
	for _, v := range []any{nil, "fast", []any{1}, map[string]any{}, map[string]any{"steps": "all"}, map[string]any{"steps": []any{map[string]any{}}}} {
		if _, problems := Parse(v); len(problems) == 0 {
			t.Errorf("Parse(%#v) found no problem", v)
		}
	}
}

// FuzzParse: any YAML either is refused with problems or parses into a
// strategy whose every step is of one kind; it never panics.
func FuzzParse(f *testing.F) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("testdata", e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		if len(data) == 0 {
			f.Fatalf("empty seed %s", e.Name())
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if yaml.Unmarshal(data, &v) != nil {
			return
		}
		s, problems := Parse(v)
		if len(problems) > 0 {
			return
		}
		if len(s.Steps) == 0 || len(s.Steps) > MaxSteps {
			t.Fatalf("a strategy of %d steps parsed", len(s.Steps))
		}
		for i, st := range s.Steps {
			n := 0
			for _, set := range []bool{st.SetWeight != nil, st.Pause != nil, st.Analysis != nil} {
				if set {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("step %d has %d kinds", i, n)
			}
		}
	})
}

package chart

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/render"
)

// FuzzValues renders the web chart with arbitrary bytes as a values file.
// Property: Render never panics; it returns configfile.Problems or
// render's errors, or a document that renders the same again.
func FuzzValues(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "values", "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join("testdata", "web", "ci", "*.yaml"))
	seeds = append(append(seeds, more...), filepath.Join("testdata", "web", "values.yaml"))
	if len(seeds) < 4 {
		f.Fatalf("found %d seed values files, want at least 4", len(seeds))
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		if len(data) == 0 {
			f.Fatalf("seed %s is empty", s)
		}
		f.Add(data)
	}
	f.Add([]byte("workers: [{name: x, replicas: 99999999999999999999}]\n"))
	f.Add([]byte("a: &a [*a]\n"))
	c := load(f, "web")
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := RenderOptions{ReleaseName: "web", ValuesFiles: []ValuesFile{{Name: "fuzz.yaml", Data: data}}}
		_, m, err := Render(t.Context(), c, opts)
		if err != nil {
			var ps configfile.Problems
			var re *render.Error
			if !errors.As(err, &ps) && !errors.As(err, &re) {
				t.Fatalf("Render() error %T %q is neither Problems nor *render.Error", err, err)
			}
			return
		}
		_, again, err := Render(t.Context(), c, opts)
		if err != nil {
			t.Fatalf("second Render() = %v after a first success", err)
		}
		if m.Compose != again.Compose || m.Values != again.Values {
			t.Fatalf("Render() is not deterministic")
		}
	})
}

package chart

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/render"
)

// FuzzTemplate renders the web chart with its compose template replaced
// by arbitrary text, seeded with the chart's templates and the runaway
// shapes of testdata/runaway. Property: Render never panics and returns
// within its bounds (a short time bound here); it returns
// configfile.Problems or render's errors, or a document that renders the
// same again.
func FuzzTemplate(f *testing.F) {
	c := load(f, "web")
	for _, tpl := range c.templates {
		f.Add(tpl.text)
	}
	shapes, err := filepath.Glob(filepath.Join("testdata", "runaway", "*.yaml"))
	if err != nil || len(shapes) < 10 {
		f.Fatalf("found %d runaway shapes (%v), want at least 10", len(shapes), err)
	}
	for _, s := range shapes {
		data, err := os.ReadFile(s)
		if err != nil || len(data) == 0 {
			f.Fatalf("seed %s: %d bytes, %v", s, len(data), err)
		}
		f.Add(string(data))
	}
	f.Add(`{{ range $i := until 100000000 }}x{{ end }}`)
	f.Add(`{{ define "a" }}{{ include "a" . }}{{ end }}{{ include "a" . }}`)
	f.Add(`{{ .Values.nope.deeper }}`)
	f.Add(`services: {web: {image: "{{ env "HOME" }}"}}`)
	f.Fuzz(func(t *testing.T, text string) {
		fuzzed := *c
		fuzzed.templates = append([]sourceFile(nil), c.templates...)
		for i, tpl := range fuzzed.templates {
			if !tpl.helper() {
				fuzzed.templates[i].text = text
				break
			}
		}
		opts := RenderOptions{ReleaseName: "web", Timeout: 2 * time.Second}
		_, m, err := Render(t.Context(), &fuzzed, opts)
		if err != nil {
			var ps configfile.Problems
			var re *render.Error
			if !errors.As(err, &ps) && !errors.As(err, &re) {
				t.Fatalf("Render() error %T %q is neither Problems nor *render.Error", err, err)
			}
			return
		}
		_, again, err := Render(t.Context(), &fuzzed, opts)
		if err != nil || m.Compose != again.Compose {
			t.Fatalf("Render() is not deterministic: %v", err)
		}
	})
}

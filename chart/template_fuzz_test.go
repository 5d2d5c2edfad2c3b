package chart

import (
	"errors"
	"testing"

	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/render"
)

// FuzzTemplate renders the web chart with its compose template replaced
// by arbitrary text. Property: Render never panics and never runs
// unbounded; it returns configfile.Problems or render's errors, or a
// document that renders the same again.
func FuzzTemplate(f *testing.F) {
	c := load(f, "web")
	for _, tpl := range c.templates {
		f.Add(tpl.text)
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
		opts := RenderOptions{ReleaseName: "web"}
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

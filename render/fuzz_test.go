package render

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzCompose renders arbitrary compose input from a temporary directory.
// Property: Compose never panics; it returns either a document whose every
// service has an image, rendering the same way twice, or a *render.Error.
func FuzzCompose(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join(fixtureDir, "*", "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	if len(seeds) < 10 {
		f.Fatalf("found %d seed compose files, want at least 10", len(seeds))
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
	f.Add([]byte("services:\n  web:\n    image: a\n    env_file: x.env\n"))
	f.Add([]byte("x: &a [*a]\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
		files := map[string]string{
			"compose.yaml": string(data),
			"app.conf":     "listen=8080\n",
			"x.env":        "A=1\n",
		}
		writeTree(t, root, files)
		in := Input{Root: root, Variables: map[string]string{"IMAGE": "img:1", "REPLICAS": "2", "VERSION": "v1"}}
		doc, err := Compose(t.Context(), in)
		if err != nil {
			var re *Error
			if !errors.As(err, &re) {
				t.Fatalf("Compose() error %T %q is not a *render.Error", err, err)
			}
			return
		}
		for _, svc := range doc.Config.Services {
			if svc.Image == "" {
				t.Fatalf("service %s has no image yet rendered without error", svc.Name)
			}
		}
		again, err := Compose(t.Context(), in)
		if err != nil {
			t.Fatalf("second Compose() = %v after a first success", err)
		}
		if diff := cmp.Diff(marshalDocument(t, doc), marshalDocument(t, again)); diff != "" {
			t.Fatalf("Compose() is not deterministic:\n%s", diff)
		}
	})
}

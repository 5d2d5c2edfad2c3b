package artifact

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/skep-cd/skep/configfile"
)

// FuzzLoad checks that Load never panics and returns either
// configfile.Problems, each naming a file of the directory, or a set whose
// every entry keeps the rules: a name that is unique as a variable, one
// strategy, a position, and an image exactly for services. The input is
// loaded as a native file and as a release-repository service file.
func FuzzLoad(f *testing.F) {
	added := 0
	err := filepath.WalkDir("testdata", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			return err
		}
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		if len(data) > 0 {
			f.Add(data)
			added++
		}
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	if added < 15 {
		f.Fatalf("only %d non-empty seeds from testdata", added)
	}
	const infra = "- {github: infrastructure, provider: cloudformation, deploy: {branch: main}}\n"
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, fsys := range []fstest.MapFS{
			{"env/a.yaml": {Data: data}},
			{"env/infrastructure/i.yaml": {Data: []byte(infra)}, "env/service/a.yaml": {Data: data}},
		} {
			set, err := Load(fsys, "env", testOptions)
			if err != nil {
				var problems configfile.Problems
				if !errors.As(err, &problems) {
					// Only a file that is not a list leaves the native
					// directory unrecognised.
					if _, ok := Detect(fsys, "env"); ok {
						t.Fatalf("Load error %v (%T) is not configfile.Problems", err, err)
					}
					continue
				}
				for _, p := range problems {
					if p.File == "" || p.Message == "" || strings.HasPrefix(p.File, "env") {
						t.Fatalf("problem %+v lacks its file (relative to the directory) or message", p)
					}
				}
				if set != nil {
					t.Fatalf("Load returned a set with an error")
				}
				continue
			}
			seen := map[string]bool{}
			for _, e := range set.Entries() {
				if !nameRule.MatchString(e.Name) || seen[Variable(e.Name)] {
					t.Fatalf("entry %+v: invalid or duplicate name", e)
				}
				seen[Variable(e.Name)] = true
				if e.Deploy.Strategy() == "" || e.File == "" || e.Line == 0 {
					t.Fatalf("entry %+v: no strategy or position", e)
				}
				if (e.Kind == Service) != (e.Image != "") || e.Source == "" {
					t.Fatalf("entry %+v: image or source does not match its kind", e)
				}
				if e.Deploy.Release != "" && checkRelease(e.Deploy.Release) != "" {
					t.Fatalf("entry %+v: invalid release accepted", e)
				}
			}
		}
	})
}

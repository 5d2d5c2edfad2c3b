package appset

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/skep-cd/skep/configfile"
)

// FuzzParse checks that Parse never panics and returns either configfile.Problems, each
// naming the file, or a set that survives a marshal and parse unchanged.
func FuzzParse(f *testing.F) {
	seeds, err := filepath.Glob("testdata/*/*.y*ml")
	if err != nil {
		f.Fatal(err)
	}
	seeds = append(seeds, "../examples/appset/applications.yaml")
	added := 0
	for _, name := range seeds {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		if len(data) > 0 {
			f.Add(data)
			added++
		}
	}
	if added < 10 {
		f.Fatalf("only %d non-empty seeds from testdata", added)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := Parse("fuzz.yaml", data)
		if err != nil {
			var problems configfile.Problems
			if !errors.As(err, &problems) || len(problems) == 0 {
				t.Fatalf("Parse error %v (%T) is not a non-empty configfile.Problems", err, err)
			}
			for _, p := range problems {
				if p.File != "fuzz.yaml" || p.Message == "" {
					t.Fatalf("problem %+v lacks its file or message", p)
				}
			}
			if set != nil {
				t.Fatalf("Parse returned a set with an error")
			}
			return
		}
		assertRoundTrip(t, set)
	})
}

// Package golden compares test output with files kept in the repository
// and rewrites them when a test binary runs with -update.
//
// It is for tests only and registers the -update flag once, so that no test
// file has to guess whether another one already did. It never writes a
// file without -update.
package golden

import (
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files (testdata and generated docs)")

// Update reports whether the test binary runs with -update.
func Update() bool { return *update }

// Check compares got with the file at path, or rewrites the file under
// -update. A mismatch fails the test with a diff (-want +got).
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("rewrite %s: %v", path, err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got); run go test -update if the change is intended:\n%s", path, diff)
	}
}

package gitsource

import (
	"os"
	"testing"

	"github.com/skep-cd/skep/harness"
)

// TestMain lets BenchmarkListRefsOfManyRepositories run its git server in
// a copy of this binary (harness.StartGitServerProcess), out of the
// process it measures.
func TestMain(m *testing.M) {
	if harness.ServeGitProcess() {
		return
	}
	os.Exit(m.Run())
}

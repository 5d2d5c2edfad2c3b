package bench_test

import (
	"log/slog"
	"os"
	"testing"

	"github.com/skep-cd/skep/bench"
	"github.com/skep-cd/skep/harness"
)

// TestSoakHA kills a random replica of a replicated controller every
// 30–90 s while a commit lands every few seconds (issue 38), prints the
// report to stdout, and fails on any check it holds: every commit applied
// exactly once, no write while another replica held the lease, no two
// terms' writes overlapping, one event history on every replica.
// `make soak-ha` runs it, with:
//
//	SKEP_SOAK_HA=1               required: it takes many minutes and loads the shared swarm
//	SKEP_SOAK_BINARY=bin/skep    the skep binary (required)
//	SKEP_SOAK_DURATION=20m       how long replicas are killed
func TestSoakHA(t *testing.T) {
	if harness.SwarmRequired() {
		harness.RequireSwarm(t)
	}
	if os.Getenv("SKEP_SOAK_HA") != "1" {
		t.Skip("set SKEP_SOAK_HA=1 (make soak-ha does) to kill replicas for minutes")
	}
	docker := harness.RequireSwarm(t)
	opts := bench.SoakHAOptions{Binary: os.Getenv("SKEP_SOAK_BINARY"), Log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	if opts.Binary == "" {
		t.Fatal("SKEP_SOAK_BINARY: no skep binary given")
	}
	if d, ok := envDuration(t, "SKEP_SOAK_DURATION"); ok {
		opts.Duration = d
	}
	report := bench.SoakHA(t, docker, opts)
	if err := report.Print(os.Stdout); err != nil {
		t.Fatal(err)
	}
	if n := report.Errors(); n > 0 {
		t.Errorf("the HA soak saw %d errors (see the table)", n)
	}
}

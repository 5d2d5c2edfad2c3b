package bench_test

import (
	"log/slog"
	"os"
	"testing"

	"github.com/skep-cd/skep/bench"
	"github.com/skep-cd/skep/harness"
)

// TestSoak loads a controller with many applications, commits, out-of-band
// changes, event-stream subscribers and API readers for a fixed time
// (issue 18), prints the table to stdout, and fails on any error or when
// the controller's memory is not flat. `make soak` runs it, with:
//
//	SKEP_SOAK=1                  required: it takes many minutes and loads the shared swarm
//	SKEP_SOAK_BINARY=bin/skep    the skep binary under load (required)
//	SKEP_SOAK_DURATION=10m       how long the load runs
//	SKEP_SOAK_APPS=100           applications, one service each
//	SKEP_SOAK_SUBSCRIBERS=200    event-stream subscribers
//
// With SKEP_REQUIRE_SWARM=1 a missing swarm fails it even without
// SKEP_SOAK, as it fails every other test.
func TestSoak(t *testing.T) {
	if harness.SwarmRequired() {
		harness.RequireSwarm(t)
	}
	if os.Getenv("SKEP_SOAK") != "1" {
		t.Skip("set SKEP_SOAK=1 (make soak does) to load the swarm for minutes")
	}
	cli := harness.RequireSwarm(t)
	opts := bench.SoakOptions{
		Binary: os.Getenv("SKEP_SOAK_BINARY"),
		Log:    slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
	if d, ok := envDuration(t, "SKEP_SOAK_DURATION"); ok {
		opts.Duration = d
	}
	if v := os.Getenv("SKEP_SOAK_APPS"); v != "" {
		opts.Apps = atoi(t, "SKEP_SOAK_APPS", v)
	}
	if v := os.Getenv("SKEP_SOAK_SUBSCRIBERS"); v != "" {
		opts.Subscribers = atoi(t, "SKEP_SOAK_SUBSCRIBERS", v)
	}
	report := bench.Soak(t, cli, opts)
	if err := report.Print(os.Stdout); err != nil {
		t.Fatal(err)
	}
	if n := report.Errors(); n > 0 {
		t.Errorf("the soak saw %d errors (see the table)", n)
	}
	if m := report.Memory(); !m.Flat {
		t.Errorf("the controller's memory is not flat: %s", m.Why)
	}
}

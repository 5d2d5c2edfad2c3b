package bench_test

import (
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/skep-cd/skep/bench"
	"github.com/skep-cd/skep/harness"
)

// BenchmarkSwarm runs every swarm measurement of issue 16 once, prints the
// table to stdout and reports the results as metrics. `make bench` runs it
// after the Go benchmarks, with:
//
//	SKEP_BENCH=1                  required: it takes minutes and loads the shared swarm
//	SKEP_BENCH_BINARY=bin/skep    the skep binary measured (required)
//	SKEP_BENCH_SAMPLES=10         samples per sampled measurement
//	SKEP_BENCH_IDLE=5m            each idle window
//	SKEP_BENCH_SCALE=200          applications at the larger scale point; -1 skips it
//	SKEP_BENCH_SCALE_SERVICES=1   services of each application there
//	SKEP_BENCH_SCALE_REPOS=1      repositories its applications are spread over
//	SKEP_BENCH_ONLY=scale         the larger scale point alone
//	SKEP_BENCH_ONLY=deploy        Skep's first deploy of the 20 applications alone, SAMPLES times
//	SKEP_BENCH_ONLY=idle          the 20 applications' idle window alone, SAMPLES windows
//	SKEP_BENCH_ONLY=polling       polling at the interval floor alone, SAMPLES pushes
//	SKEP_BENCH_ONLY=webhook       the webhook push against docker stack deploy alone, SAMPLES pushes
//	SKEP_BENCH_ONLY=failover      the take-overs of three replicas alone, SAMPLES kills, freezes and stops of the leader each
//	SKEP_BENCH_GO=bin/bench-go.txt  the Go benchmarks' output, added to the table
//	SKEP_BENCH_LOG=debug          more progress on stderr, the controller at --log-level debug
//
// It is a benchmark and not a test because tests never time anything; and
// it runs under `go test` rather than as a command because the harness it
// builds on (the test image, the git server, unique names, cleanup) takes
// a testing.TB, and Skep keeps one binary. It ignores b.N: run it with
// -benchtime 1x.
func BenchmarkSwarm(b *testing.B) {
	if os.Getenv("SKEP_BENCH") != "1" {
		b.Skip("set SKEP_BENCH=1 (make bench does) to measure on the swarm")
	}
	cli := harness.RequireSwarm(b)
	opts := bench.Options{
		Binary:    os.Getenv("SKEP_BENCH_BINARY"),
		GoResults: os.Getenv("SKEP_BENCH_GO"),
	}
	level := slog.LevelInfo
	if os.Getenv("SKEP_BENCH_LOG") == "debug" {
		level = slog.LevelDebug
		opts.ControllerLogLevel = "debug"
	}
	opts.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if v := os.Getenv("SKEP_BENCH_SAMPLES"); v != "" {
		opts.Samples = atoi(b, "SKEP_BENCH_SAMPLES", v)
	}
	switch v := os.Getenv("SKEP_BENCH_ONLY"); v {
	case "":
	case "scale":
		opts.ScaleOnly = true
	case "deploy":
		opts.DeployOnly = true
	case "idle":
		opts.IdleOnly = true
	case "polling":
		opts.PollOnly = true
	case "webhook":
		opts.WebhookOnly = true
	case "failover":
		opts.FailoverOnly = true
	default:
		b.Fatalf("SKEP_BENCH_ONLY=%q: the parts that run alone are scale, deploy, idle, polling, webhook and failover", v)
	}
	if v := os.Getenv("SKEP_BENCH_SCALE"); v != "" {
		opts.Scale = atoi(b, "SKEP_BENCH_SCALE", v)
	}
	if v := os.Getenv("SKEP_BENCH_SCALE_SERVICES"); v != "" {
		opts.ScaleServices = atoi(b, "SKEP_BENCH_SCALE_SERVICES", v)
	}
	if v := os.Getenv("SKEP_BENCH_SCALE_REPOS"); v != "" {
		opts.ScaleRepos = atoi(b, "SKEP_BENCH_SCALE_REPOS", v)
	}
	if d, ok := envDuration(b, "SKEP_BENCH_IDLE"); ok {
		opts.Idle = d
	}
	report := bench.Run(b, cli, opts)
	if err := report.Print(os.Stdout); err != nil {
		b.Fatal(err)
	}
	for _, m := range report.Metrics() {
		b.ReportMetric(m.Value, m.Unit)
	}
}

// envDuration reads the duration the variable name holds; ok is false
// when it is unset. A value that is no duration fails tb.
func envDuration(tb testing.TB, name string) (d time.Duration, ok bool) {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return d, true
}

func atoi(tb testing.TB, name, v string) int {
	n, err := strconv.Atoi(v)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return n
}

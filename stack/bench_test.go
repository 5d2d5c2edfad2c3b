package stack_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/stack"
)

// The benchmarks below measure the CPU cost of one reconcile's pure steps,
// render → convert → plan, on the richest fixture and on generated releases
// of up to 1,000 services (render.MaxServices). The plan is against an
// identical recorded release: the no-op tick. Run them with
//
//	go test -run '^$' -bench . -benchmem ./stack/
//
// and compare runs with benchstat; the sub-benchmark names carry the size.

var benchOwner = stack.Owner{Controller: "bench", Application: "bench", Release: "bench"}

// benchSizes are the generated release sizes; 1000 is the per-release limit.
var benchSizes = []int{10, 100, 1000}

func BenchmarkRenderConvertPlan(b *testing.B) {
	b.Run("fixture=update-rollback", func(b *testing.B) {
		benchRenderConvertPlan(b, render.Input{Root: "../testdata/compose/update-rollback", Variables: map[string]string{"IMAGE": "skep-testapp:bench"}})
	})
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			benchRenderConvertPlan(b, render.Input{Root: writeServices(b, n)})
		})
	}
}

func benchRenderConvertPlan(b *testing.B, in render.Input) {
	recorded := renderConvert(b, in)
	b.ReportAllocs()
	for b.Loop() {
		rel := renderConvert(b, in)
		if p := plan.Compare(rel, &recorded, plan.Options{}); p.Changed() {
			b.Fatalf("no-op plan changed: %s", p.Summary())
		}
	}
}

// BenchmarkRender, BenchmarkConvert and BenchmarkPlan split
// BenchmarkRenderConvertPlan's cost at 1,000 services by step.
func BenchmarkRender(b *testing.B) {
	in := render.Input{Root: writeServices(b, 1000)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := render.Compose(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConvert(b *testing.B) {
	doc, err := render.Compose(context.Background(), render.Input{Root: writeServices(b, 1000)})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := stack.Convert(doc.Config, stack.Options{Owner: benchOwner, Files: doc.Files}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPlan(b *testing.B) {
	in := render.Input{Root: writeServices(b, 1000)}
	desired, recorded := renderConvert(b, in), renderConvert(b, in)
	b.ReportAllocs()
	for b.Loop() {
		if p := plan.Compare(desired, &recorded, plan.Options{}); p.Changed() {
			b.Fatalf("no-op plan changed: %s", p.Summary())
		}
	}
}

// renderConvert renders and converts in, failing the benchmark on error.
func renderConvert(b *testing.B, in render.Input) stack.Release {
	b.Helper()
	doc, err := render.Compose(context.Background(), in)
	if err != nil {
		b.Fatal(err)
	}
	rel, err := stack.Convert(doc.Config, stack.Options{Owner: benchOwner, Files: doc.Files})
	if err != nil {
		b.Fatal(err)
	}
	return rel
}

// writeServices writes a compose.yaml of n services, each shaped like a
// real one (environment, labels, a health check, resources, an update
// policy, a network), into a fresh directory and returns it.
func writeServices(b *testing.B, n int) string {
	b.Helper()
	var sb strings.Builder
	sb.WriteString("services:\n")
	for i := range n {
		fmt.Fprintf(&sb, `  svc%04d:
    image: registry.example.org/team/svc%04d:v1.2.3
    environment:
      MODE: prod
      LOG_LEVEL: info
      PORT: "8080"
      SERVICE: svc%04d
    labels: {team: bench}
    networks: [backend]
    healthcheck: {test: ["CMD", "/app", "health"], interval: 10s, timeout: 2s, retries: 3}
    deploy:
      replicas: 2
      endpoint_mode: dnsrr
      labels: {tier: web}
      resources: {limits: {cpus: "0.5", memory: 128M}}
      update_config: {parallelism: 1, order: start-first, failure_action: rollback}
      restart_policy: {condition: on-failure}
`, i, i, i)
	}
	sb.WriteString("networks:\n  backend: {}\n")
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return dir
}

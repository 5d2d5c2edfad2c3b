package stack_test

import (
	"context"
	"testing"

	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/stack"
)

// BenchmarkRenderConvertPlan measures the per-application CPU cost of one
// reconcile's pure steps on the richest fixture: render, convert, and a plan
// against an identical recorded release (the no-op tick).
//
//	go test -run '^$' -bench . -benchmem ./stack/
func BenchmarkRenderConvertPlan(b *testing.B) {
	in := render.Input{Root: "../testdata/compose/update-rollback", Variables: map[string]string{"IMAGE": "skep-testapp:bench"}}
	owner := stack.Owner{Controller: "bench", Application: "bench", Release: "bench"}
	doc, err := render.Compose(context.Background(), in)
	if err != nil {
		b.Fatal(err)
	}
	recorded, err := stack.Convert(doc.Config, stack.Options{Owner: owner, Files: doc.Files})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		doc, err := render.Compose(context.Background(), in)
		if err != nil {
			b.Fatal(err)
		}
		rel, err := stack.Convert(doc.Config, stack.Options{Owner: owner, Files: doc.Files})
		if err != nil {
			b.Fatal(err)
		}
		if p := plan.Compare(rel, &recorded, plan.Options{}); p.Changed() {
			b.Fatalf("no-op plan changed: %s", p.Summary())
		}
	}
}

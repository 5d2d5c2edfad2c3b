// Package examples holds ready-to-push repositories; this test keeps them
// valid (appset tests check the example app set; this one renders the
// compose application and loads the example artifact directory).
package examples

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/chart"
	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/stack"
)

func TestExampleComposeAppRendersWithItsEnvFile(t *testing.T) {
	doc, err := render.Compose(context.Background(), render.Input{Root: "compose-app"})
	if err != nil {
		t.Fatalf("examples/compose-app: %v", err)
	}
	rel, err := stack.Convert(doc.Config, stack.Options{
		Owner: stack.Owner{Controller: "default", Application: "web", Release: "web"}, Files: doc.Files})
	if err != nil {
		t.Fatalf("examples/compose-app: %v", err)
	}
	svc, ok := rel.Services["web_web"]
	if !ok || svc.Mode.Replicated == nil || *svc.Mode.Replicated.Replicas != 2 {
		t.Fatalf("web_web = %+v, want 2 replicas from .env", svc.Mode)
	}
	if len(rel.Configs) != 1 {
		t.Errorf("configs = %v, want the content-hashed site config", rel.Configs)
	}
}

func TestExampleReleasesTestingIsAValidNativeArtifactDirectory(t *testing.T) {
	fsys := os.DirFS("releases")
	if shape, ok := artifact.Detect(fsys, "testing"); !ok || shape != artifact.NativeShape {
		t.Fatalf("examples/releases/testing detected as %q (%t), want the native shape", shape, ok)
	}
	set, err := artifact.Load(fsys, "testing", artifact.LoadOptions{})
	if err != nil {
		t.Fatalf("examples/releases/testing: %v", err)
	}
	var got []string
	for _, e := range set.Entries() {
		got = append(got, fmt.Sprintf("%s %s %s", e.Kind, e.Name, e.Deploy.Strategy()))
	}
	want := []string{"infrastructure stack branch", "service web release", "service api branch", "service worker suspend"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("examples/releases/testing entries differ (-want +got):\n%s", diff)
	}
}

// The canary example renders with its strategy: two weights, an analysis
// of two Prometheus metrics and a smoke job, an analysis hook that is no
// service of the release.
func TestExampleCanaryAppRendersItsStrategy(t *testing.T) {
	doc, err := render.Compose(context.Background(), render.Input{Root: "canary-app"})
	if err != nil {
		t.Fatalf("examples/canary-app: %v", err)
	}
	rel, err := stack.Convert(doc.Config, stack.Options{Owner: stack.Owner{Controller: "default", Application: "web", Release: "web"},
		Files: doc.Files, Hooks: map[string]stack.Hook{"smoke": {Phase: stack.Analysis}}, Canaries: doc.Canaries})
	if err != nil {
		t.Fatalf("examples/canary-app: %v", err)
	}
	s, ok := rel.Canaries["web_web"]
	if !ok || !cmp.Equal(s.Weights(), []int{20, 60}) || !cmp.Equal(s.Jobs(), []string{"smoke"}) || len(s.Steps) != 5 {
		t.Fatalf("strategy of web_web = %+v, want setWeight 20 and 60 and a smoke job", s)
	}
	if _, svc := rel.Services["web_smoke"]; svc || len(rel.Hooks) != 1 {
		t.Errorf("the smoke job is a service (%t) or not the one hook (%v)", svc, rel.Hooks)
	}
	if q := s.Steps[2].Analysis.Metrics[0].Prometheus.Query; !strings.Contains(q, `version="v1.4.0"`) {
		t.Errorf("errors query %q, want the version interpolated", q)
	}
}

// The chart equivalent: the strategy comes from the values (values.yaml,
// then an environment's values file), through the template, to the same
// place a compose file's does.
func TestExampleCanaryChartCarriesItsStrategyFromItsValues(t *testing.T) {
	c, err := chart.Load(os.DirFS("canary-chart"), ".")
	if err != nil {
		t.Fatalf("examples/canary-chart: %v", err)
	}
	prod := chart.ValuesFile{Name: "prod.yaml", Data: []byte("canary:\n  steps:\n    - setWeight: 20\n    - pause: 30s\n    - setWeight: 60\n    - pause: {}\n")}
	doc, _, err := chart.Render(context.Background(), c, chart.RenderOptions{ValuesFiles: []chart.ValuesFile{prod}})
	if err != nil {
		t.Fatalf("examples/canary-chart: %v", err)
	}
	s, ok := doc.Canaries["web"]
	if !ok || !cmp.Equal(s.Weights(), []int{20, 60}) || s.Steps[1].String() != "pause 30s" || s.Steps[3].String() != "pause until promoted" {
		t.Fatalf("canaries %+v, want the steps of prod.yaml", doc.Canaries)
	}
}

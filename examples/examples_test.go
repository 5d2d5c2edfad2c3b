// Package examples holds ready-to-push repositories; this test keeps them
// valid (appset tests check the example app set; this one renders the
// compose application and loads the example artifact directory).
package examples

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/artifact"
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

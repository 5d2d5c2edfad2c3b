// Package examples holds ready-to-push repositories; this test keeps them
// valid (appset tests check the example app set; this one renders the
// compose application).
package examples

import (
	"context"
	"testing"

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

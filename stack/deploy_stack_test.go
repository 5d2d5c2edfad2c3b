package stack_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/stack"
)

// The stack that runs Skep itself (deploy/stack.yml) must stay deployable,
// and must need the Docker socket and its token secret listed in allow.
func TestSkepOwnStackRendersAndNeedsItsSocketAllowed(t *testing.T) {
	doc, err := render.Compose(context.Background(), render.Input{
		Root: "../deploy", Files: []string{"stack.yml"},
		Variables: map[string]string{"SKEP_APPSET_REPO": "https://git.example.org/ops/apps.git"},
	})
	if err != nil {
		t.Fatalf("render deploy/stack.yml: %v", err)
	}
	owner := stack.Owner{Controller: "default", Application: "skep", Release: "skep"}
	rel, err := stack.Convert(doc.Config, stack.Options{Owner: owner, Files: doc.Files, Allow: stack.Allow{
		HostPaths: []string{"/var/run/docker.sock"}, Secrets: []string{"skep-admin-token"},
	}})
	if err != nil {
		t.Fatalf("convert deploy/stack.yml: %v", err)
	}
	svc, ok := rel.Services["skep_controller"]
	if !ok {
		t.Fatalf("no skep_controller service in %v", rel.Services)
	}
	if got := strings.Join(svc.TaskTemplate.Placement.Constraints, ","); got != "node.role == manager" {
		t.Errorf("placement = %q, want manager nodes only", got)
	}
	if len(svc.EndpointSpec.Ports) != 0 {
		t.Errorf("the API port is published by default: %+v", svc.EndpointSpec.Ports)
	}

	_, err = stack.Convert(doc.Config, stack.Options{Owner: owner, Files: doc.Files})
	if !errors.Is(err, stack.ErrNotAllowed) || !strings.Contains(err.Error(), "/var/run/docker.sock") {
		t.Errorf("convert without allow = %v, want the docker socket refused", err)
	}
}

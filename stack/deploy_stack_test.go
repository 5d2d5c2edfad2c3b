package stack_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/stack"
)

// The stacks that run Skep itself (deploy/stack.yml, and deploy/stack-ha.yml
// with replicas) must stay deployable, and must need the Docker socket and
// their token secrets listed in allow.
func TestSkepOwnStackRendersAndNeedsItsSocketAllowed(t *testing.T) {
	for _, tc := range []struct {
		file     string
		secrets  []string
		replicas uint64
		// ha: the replicas elect a leader, one per node, each named by its
		// task so the others reach it.
		ha bool
	}{
		{file: "stack.yml", secrets: []string{"skep-admin-token"}, replicas: 1},
		{file: "stack-ha.yml", secrets: []string{"skep-admin-token", "skep-peer-token"}, replicas: 2, ha: true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			doc, err := render.Compose(context.Background(), render.Input{
				Root: "../deploy", Files: []string{tc.file},
				Variables: map[string]string{"SKEP_APPSET_REPO": "https://git.example.org/ops/apps.git"},
			})
			if err != nil {
				t.Fatalf("render deploy/%s: %v", tc.file, err)
			}
			owner := stack.Owner{Controller: "default", Application: "skep", Release: "skep"}
			rel, err := stack.Convert(doc.Config, stack.Options{Owner: owner, Files: doc.Files, Allow: stack.Allow{
				HostPaths: []string{"/var/run/docker.sock"}, Secrets: tc.secrets,
			}})
			if err != nil {
				t.Fatalf("convert deploy/%s: %v", tc.file, err)
			}
			svc, ok := rel.Services["skep_controller"]
			if !ok {
				t.Fatalf("no skep_controller service in %v", rel.Services)
			}
			placement := svc.TaskTemplate.Placement
			if got := strings.Join(placement.Constraints, ","); got != "node.role == manager" {
				t.Errorf("placement = %q, want manager nodes only", got)
			}
			if len(svc.EndpointSpec.Ports) != 0 {
				t.Errorf("the API port is published by default: %+v", svc.EndpointSpec.Ports)
			}
			if got := *svc.Mode.Replicated.Replicas; got != tc.replicas {
				t.Errorf("replicas = %d, want %d", got, tc.replicas)
			}
			args := strings.Join(svc.TaskTemplate.ContainerSpec.Args, " ")
			if ha := strings.Contains(args, "--leader-election"); ha != tc.ha {
				t.Errorf("args %q: leader election %v, want %v", args, ha, tc.ha)
			}
			if tc.ha && (placement.MaxReplicas != 1 || svc.TaskTemplate.ContainerSpec.Hostname != "{{.Task.Name}}") {
				t.Errorf("max replicas per node %d, host name %q; want one per node, each named by its task",
					placement.MaxReplicas, svc.TaskTemplate.ContainerSpec.Hostname)
			}

			_, err = stack.Convert(doc.Config, stack.Options{Owner: owner, Files: doc.Files})
			if !errors.Is(err, stack.ErrNotAllowed) || !strings.Contains(err.Error(), "/var/run/docker.sock") {
				t.Errorf("convert without allow = %v, want the docker socket refused", err)
			}
		})
	}
}

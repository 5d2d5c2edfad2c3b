package apply

import (
	"context"
	"testing"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
)

// oneService is a ServiceWriter holding one service; it keeps what
// ServiceUpdate writes.
type oneService struct {
	svc     swarm.Service
	written *swarm.ServiceSpec
	version swarm.Version
}

func (o *oneService) ServiceList(context.Context, swarm.ServiceListOptions) ([]swarm.Service, error) {
	return []swarm.Service{o.svc}, nil
}

func (o *oneService) ServiceCreate(context.Context, swarm.ServiceSpec, swarm.ServiceCreateOptions) (swarm.ServiceCreateResponse, error) {
	panic("ForceUpdate creates nothing")
}

func (o *oneService) ServiceUpdate(_ context.Context, _ string, v swarm.Version, spec swarm.ServiceSpec, _ swarm.ServiceUpdateOptions) (swarm.ServiceUpdateResponse, error) {
	o.written, o.version = &spec, v
	return swarm.ServiceUpdateResponse{}, nil
}

func (o *oneService) ServiceInspectWithRaw(context.Context, string, swarm.ServiceInspectOptions) (swarm.Service, []byte, error) {
	return o.svc, nil, nil
}

// TestForceUpdateMovesOnlyTheCounterOfAServiceItOwns: a forced update
// writes the live spec with its ForceUpdate counter moved, at the live
// version; a service of another release or controller is refused,
// stalled, and left alone.
func TestForceUpdateMovesOnlyTheCounterOfAServiceItOwns(t *testing.T) {
	owner := stack.Owner{Controller: "c1", Application: "web", Release: "web"}
	live := swarm.Service{ID: "s1", Meta: swarm.Meta{Version: swarm.Version{Index: 42}}, Spec: swarm.ServiceSpec{
		Annotations:  swarm.Annotations{Name: "web_api", Labels: map[string]string{stack.LabelController: "c1", stack.LabelRelease: "web"}},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: "app:v1"}, ForceUpdate: 3},
	}}
	eng := &oneService{svc: live}
	if err := ForceUpdate(t.Context(), eng, owner, "web_api"); err != nil {
		t.Fatal(err)
	}
	if eng.written == nil || eng.written.TaskTemplate.ForceUpdate != 4 || eng.version.Index != 42 || eng.written.TaskTemplate.ContainerSpec.Image != "app:v1" {
		t.Errorf("wrote %+v at version %d, want the live spec with ForceUpdate 4 at version 42", eng.written, eng.version.Index)
	}
	other := &oneService{svc: live}
	err := ForceUpdate(t.Context(), other, stack.Owner{Controller: "c2", Application: "web", Release: "web"}, "web_api")
	if outcome.Of(err) != outcome.Stalled || other.written != nil {
		t.Errorf("another controller's service: %v, written %v; want a stalled refusal and no write", err, other.written)
	}
}

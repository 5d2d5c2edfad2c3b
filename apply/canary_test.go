package apply

import (
	"errors"
	"testing"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/stack"
)

// Edit scales an owned service in place, writes nothing when nothing
// changes, and refuses another owner's; RemoveCanaries removes the
// owner's canary and nothing else.
func TestEditScalesInPlaceAndRemoveCanariesRemovesOnlyTheOwnersCanary(t *testing.T) {
	f := newFixture(t)
	v1 := harness.TestImage(t, f.cli, harness.ImageOptions{Version: "v1"})
	rel := f.release(v1, "listen 80\n")
	web := rel.Services[f.ns+"_web"]
	canary := web
	canary.Name = f.ns + "_web-canary"
	canary.Labels = map[string]string{stack.LabelNamespace: f.ns, stack.LabelKind: stack.KindCanary, stack.LabelCanaryOf: f.ns + "_web"}
	rel.Services[canary.Name] = canary
	mustApply(t, rel, f.cli, f.opts(t, ResolveNever))
	before := f.settled(t, f.ns+"_web")

	two := func(spec *swarm.ServiceSpec) { n := uint64(2); spec.Mode.Replicated.Replicas = &n }
	wrote, err := Edit(t.Context(), f.cli, f.owner, f.ns+"_web", two)
	if err != nil || !wrote {
		t.Fatalf("Edit = %v, %v; want a write", wrote, err)
	}
	after := f.service(t, f.ns+"_web")
	if *after.Spec.Mode.Replicated.Replicas != 2 || after.Spec.Labels[stack.LabelSpecHash] != before.Spec.Labels[stack.LabelSpecHash] ||
		after.Spec.TaskTemplate.ContainerSpec.Image != before.Spec.TaskTemplate.ContainerSpec.Image {
		t.Errorf("after Edit: replicas %d, hash %s, image %s; want 2 replicas and the rest as it was",
			*after.Spec.Mode.Replicated.Replicas, after.Spec.Labels[stack.LabelSpecHash], after.Spec.TaskTemplate.ContainerSpec.Image)
	}
	if wrote, err := Edit(t.Context(), f.cli, f.owner, f.ns+"_web", two); err != nil || wrote {
		t.Errorf("Edit to what runs = %v, %v; want no write", wrote, err)
	}
	other := f.owner
	other.Controller += "-other"
	var foreignErr *ForeignError
	if _, err := Edit(t.Context(), f.cli, other, f.ns+"_web", two); !errors.As(err, &foreignErr) {
		t.Errorf("Edit by another owner = %v, want a ForeignError", err)
	}
	if removed, err := RemoveCanaries(t.Context(), f.cli, other); err != nil || len(removed) != 0 {
		t.Errorf("RemoveCanaries by another owner = %v, %v; want nothing removed", removed, err)
	}
	removed, err := RemoveCanaries(t.Context(), f.cli, f.owner)
	if err != nil || len(removed) != 1 || removed[0] != canary.Name {
		t.Fatalf("RemoveCanaries = %v, %v; want %s removed", removed, err, canary.Name)
	}
	if _, _, err := f.cli.ServiceInspectWithRaw(t.Context(), canary.Name, swarm.ServiceInspectOptions{}); err == nil {
		t.Error("the canary is still there")
	}
	f.service(t, f.ns+"_web")
}

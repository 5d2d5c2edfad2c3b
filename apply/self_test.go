package apply

import (
	"errors"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/stack"
)

// handDeployed creates the release's web service as `docker stack deploy`
// leaves it (no skep labels, no network, config or secret) and returns it:
// the controller's own service before its first self-managed sync.
func (f *fixture) handDeployed(t *testing.T, rel stack.Release) swarm.Service {
	t.Helper()
	spec := rel.Services[f.ns+"_web"]
	spec.Labels = map[string]string{stack.LabelNamespace: f.ns}
	spec.TaskTemplate.ContainerSpec.Configs, spec.TaskTemplate.ContainerSpec.Secrets, spec.TaskTemplate.Networks = nil, nil, nil
	resp, err := f.cli.ServiceCreate(t.Context(), spec, swarm.ServiceCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return f.service(t, resp.ID)
}

// The controller's own service is taken over though unlabelled, recorded in
// the revision, and written only by Result.Self.Write, after everything
// else; a wave's apply leaves it alone.
func TestApplyWritesTheControllersOwnServiceLast(t *testing.T) {
	f := newFixture(t)
	v1 := harness.TestImage(t, f.cli, harness.ImageOptions{Version: "v1"})
	v2 := harness.TestImage(t, f.cli, harness.ImageOptions{Version: "v2"})
	self := f.handDeployed(t, f.release(v1, "x\n"))
	opts := f.opts(t, ResolveNever)
	opts.Self = SelfService{ID: self.ID, Name: self.Spec.Name}

	rel := f.release(v2, "listen 80\n")
	wave := opts
	wave.Wave = true
	if res, err := Apply(t.Context(), f.cli, rel, wave); err != nil || res.Self != nil {
		t.Fatalf("wave apply = %+v, %v; want no pending self write", res, err)
	}
	if got := f.service(t, self.ID); !unwritten(self, got) {
		t.Fatalf("a wave's apply wrote the controller's own service: %+v → %+v", self, got)
	}

	res := mustApply(t, rel, f.cli, opts)
	if res.Self == nil || res.Self.From != v1 || res.Self.To != v2 || res.Revision != 1 {
		t.Fatalf("apply = %+v; want revision 1 and a pending self write v1 → v2", res)
	}
	if _, listed := actions(res)["service "+self.Spec.Name]; listed {
		t.Errorf("apply reported the self service as written before Write: %v", actions(res))
	}
	if got := f.service(t, self.ID); got.Spec.TaskTemplate.ContainerSpec.Image != v1 {
		t.Errorf("the controller's own service runs %s before Write, want v1 still", got.Spec.TaskTemplate.ContainerSpec.Image)
	}
	rev, err := LatestRevision(t.Context(), f.cli, f.owner)
	if err != nil || rev == nil || rev.Images[self.Spec.Name] != v2 {
		t.Fatalf("recorded revision %+v, %v; want it to hold the self service at v2", rev, err)
	}
	ch, err := res.Self.Write(t.Context())
	if err != nil || ch.Action != Updated || ch.ID != self.ID {
		t.Fatalf("Write = %+v, %v; want the service updated", ch, err)
	}
	got := f.settled(t, self.Spec.Name)
	if got.Spec.TaskTemplate.ContainerSpec.Image != v2 || !f.owner.Owns(got.Spec.Labels) {
		t.Errorf("after Write: image %s, labels %v; want v2 and this owner's labels", got.Spec.TaskTemplate.ContainerSpec.Image, got.Spec.Labels)
	}
	if again := mustApply(t, rel, f.cli, opts); again.Self != nil || again.Revision != 0 {
		t.Errorf("second apply = %+v; want nothing to write", again)
	}
}

// Only the service whose id the controller found as its own is taken over:
// a name with another id is refused, and so is a release that drops it.
func TestApplyRefusesASelfServiceThatIsNotTheControllers(t *testing.T) {
	f := newFixture(t)
	v1 := harness.TestImage(t, f.cli, harness.ImageOptions{Version: "v1"})
	self := f.handDeployed(t, f.release(v1, "x\n"))
	opts := f.opts(t, ResolveNever)
	opts.Self = SelfService{ID: "not-" + self.ID, Name: self.Spec.Name}
	if _, err := Apply(t.Context(), f.cli, f.release(v1, "x\n"), opts); err == nil || !strings.Contains(err.Error(), "not the controller's own service") {
		t.Errorf("apply with another id = %v, want a refusal", err)
	}
	opts.Self.ID = self.ID
	empty := f.release(v1, "x\n")
	empty.Services = map[string]swarm.ServiceSpec{}
	_, err := Apply(t.Context(), f.cli, empty, opts)
	if err == nil || !strings.Contains(err.Error(), "does not declare the controller's own service") {
		t.Errorf("apply of a release without it = %v, want a refusal", err)
	}
	var fe *ForeignError
	if errors.As(err, &fe) {
		t.Errorf("refusal is a foreign error: %v", err)
	}
	if got := f.service(t, self.ID); !unwritten(self, got) {
		t.Errorf("refused applies wrote the service: %+v → %+v", self, got)
	}
}

package syncpass

import (
	"testing"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// TestKeptReleaseHasTheHealthOfTheRender: what outlives a reconcile drops
// the specs' bulk but keeps what health reads of them, so every declared
// service counts as the render declares it.
func TestKeptReleaseHasTheHealthOfTheRender(t *testing.T) {
	three, two := uint64(3), uint64(2)
	full := stack.Release{
		Name: "shop",
		Services: map[string]dswarm.ServiceSpec{
			"shop_web": {
				Annotations:  dswarm.Annotations{Name: "shop_web", Labels: map[string]string{"a": "b"}},
				TaskTemplate: dswarm.TaskSpec{ContainerSpec: &dswarm.ContainerSpec{Image: "nginx:1.27", Env: []string{"A=1"}}},
				Mode:         dswarm.ServiceMode{Replicated: &dswarm.ReplicatedService{Replicas: &three}},
			},
			"shop_agent": {
				Annotations: dswarm.Annotations{Name: "shop_agent"},
				Mode:        dswarm.ServiceMode{Global: &dswarm.GlobalService{}},
			},
			"shop_migrate": {
				Annotations: dswarm.Annotations{Name: "shop_migrate"},
				Mode:        dswarm.ServiceMode{ReplicatedJob: &dswarm.ReplicatedJob{TotalCompletions: &two}},
			},
		},
		Configs: map[string]dswarm.ConfigSpec{"shop_conf": {Data: []byte("x")}},
		Hooks:   []stack.Hook{{Service: "shop_seed"}},
	}
	k := Kept(full)
	if k.Name != full.Name || len(k.Services) != len(full.Services) {
		t.Fatalf("kept %q with %d services, want %q with %d", k.Name, len(k.Services), full.Name, len(full.Services))
	}
	for name, spec := range k.Services {
		if spec.Name != name || spec.TaskTemplate.ContainerSpec != nil || spec.Labels != nil {
			t.Errorf("kept spec of %s holds more than its name and mode: %+v", name, spec)
		}
	}
	if k.Configs != nil || k.Hooks != nil {
		t.Errorf("kept release holds configs or hooks: %+v", k)
	}
	// Nothing listed: every service is missing, and the desired count
	// comes from the declared mode alone.
	var none swarm.Snapshot
	want, got := Health(full, none), Health(k, none)
	if got != want {
		t.Errorf("health of the kept release %+v, of the render %+v", got, want)
	}
	if got.Desired != 5 {
		t.Errorf("desired %d, want 5 (3 replicas, 2 completions, a global service on no node)", got.Desired)
	}
}

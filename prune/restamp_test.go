package prune

import (
	"errors"
	"testing"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/stack"
)

// TestRelabelOnSwarmMovesRenamedApplicationInPlace renames an
// application: its service, config and secret get the new application
// label under the same ids (not deleted and recreated); its network is
// reported immutable and left alone.
func TestRelabelOnSwarmMovesRenamedApplicationInPlace(t *testing.T) {
	cli := harness.RequireSwarm(t)
	ctx := t.Context()
	ns := harness.Name(t, "rs")
	harness.CleanupStack(t, cli, ns)
	ctl := harness.Name(t, "ctl")
	old := stack.Owner{Controller: ctl, Application: "shop-old", Release: ns}
	renamed := stack.Owner{Controller: ctl, Application: "shop", Release: ns}

	netResp, err := cli.NetworkCreate(ctx, ns+"_default", network.CreateOptions{Driver: "overlay", Labels: old.Labels()})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := cli.ConfigCreate(ctx, swarm.ConfigSpec{Annotations: swarm.Annotations{Name: ns + "_conf-1", Labels: old.Labels()}, Data: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := cli.SecretCreate(ctx, swarm.SecretSpec{Annotations: swarm.Annotations{Name: ns + "_sec-1", Labels: old.Labels()}, Data: []byte("y")})
	if err != nil {
		t.Fatal(err)
	}
	zero := uint64(0)
	svc, err := cli.ServiceCreate(ctx, swarm.ServiceSpec{
		Annotations:  swarm.Annotations{Name: ns + "_web", Labels: old.Labels()},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: "skep-testapp:absent"}},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &zero}},
	}, swarm.ServiceCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	p := Orphans(Input{Owner: renamed, Live: listLive(t, cli), Applications: []string{"shop"}})
	if got := len(p.Select(Restamp)); got != 4 {
		t.Fatalf("Orphans() re-stamps %d objects, want 4: %+v", got, p.Items)
	}
	if len(p.Deletions()) != 0 {
		t.Fatalf("Orphans() deletes %+v of a renamed application", p.Deletions())
	}
	res := Relabel(ctx, cli, p)
	if len(res.Relabelled) != 3 {
		t.Errorf("Relabelled = %+v, want service, config and secret", res.Relabelled)
	}
	if len(res.Failed) != 1 || res.Failed[0].Object.ID != netResp.ID || !errors.Is(res.Failed[0].Err, ErrImmutableLabels) {
		t.Errorf("Failed = %+v, want the network, immutable", res.Failed)
	}

	gotSvc, _, err := cli.ServiceInspectWithRaw(ctx, svc.ID, swarm.ServiceInspectOptions{})
	if err != nil {
		t.Fatalf("service after re-stamp (same id): %v", err)
	}
	gotConf, _, err := cli.ConfigInspectWithRaw(ctx, conf.ID)
	if err != nil {
		t.Fatal(err)
	}
	gotSec, _, err := cli.SecretInspectWithRaw(ctx, sec.ID)
	if err != nil {
		t.Fatal(err)
	}
	for what, l := range map[string]map[string]string{"service": gotSvc.Spec.Labels, "config": gotConf.Spec.Labels, "secret": gotSec.Spec.Labels} {
		if !renamed.Owns(l) {
			t.Errorf("%s labels after re-stamp = %v, want owned by %+v", what, l, renamed)
		}
	}
	after := Orphans(Input{Owner: renamed, Live: listLive(t, cli), Applications: []string{"shop"}})
	if got := len(after.Select(Restamp)); got != 1 {
		t.Errorf("after re-stamp, %d objects still to re-stamp, want only the network", got)
	}
}

package prune

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/volume"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/stack"
)

// recorder is a Deleter that records calls and fails the ids in fail.
type recorder struct {
	calls []string
	fail  map[string]error
}

func (r *recorder) do(kind, id string) error {
	r.calls = append(r.calls, kind+":"+id)
	return r.fail[id]
}

func (r *recorder) ServiceRemove(_ context.Context, id string) error { return r.do("service", id) }
func (r *recorder) NetworkRemove(_ context.Context, id string) error { return r.do("network", id) }
func (r *recorder) ConfigRemove(_ context.Context, id string) error  { return r.do("config", id) }
func (r *recorder) SecretRemove(_ context.Context, id string) error  { return r.do("secret", id) }
func (r *recorder) VolumeRemove(_ context.Context, id string, force bool) error {
	if force {
		return errors.New("forced volume removal")
	}
	return r.do("volume", id)
}

func TestExecuteDeletesInKindOrderAndGoesOnAfterFailures(t *testing.T) {
	obj := func(k Kind, id string, l map[string]string) Item {
		return Item{Object: Object{Kind: k, ID: id, Name: "shop_" + id, Labels: l}, Decision: Delete}
	}
	p := Plan{Owner: owner, Items: []Item{
		obj(KindVolume, "v", labels(owner)),
		obj(KindConfig, "c-used", labels(owner)),
		obj(KindNetwork, "n-gone", labels(owner)),
		obj(KindService, "s", labels(owner)),
		obj(KindSecret, "sec-foreign", map[string]string{stack.LabelNamespace: "shop"}),
		obj(KindConfig, "rev", labels(owner, stack.LabelKind, "revision")),
		{Object: Object{Kind: KindService, ID: "kept", Name: "shop_kept", Labels: labels(owner)}, Decision: Keep},
	}}
	eng := &recorder{fail: map[string]error{
		"c-used": cerrdefs.ErrInvalidArgument.WithMessage("config 'shop_c-used' is in use by the following service: shop_x"),
		"n-gone": cerrdefs.ErrNotFound.WithMessage("network shop_n-gone not found"),
	}}
	res := Execute(t.Context(), eng, p)

	if diff := cmp.Diff([]string{"service:s", "network:n-gone", "config:c-used", "volume:v"}, eng.calls); diff != "" {
		t.Errorf("engine calls mismatch (-want +got):\n%s", diff)
	}
	var deleted []string
	for _, o := range res.Deleted {
		deleted = append(deleted, o.ID)
	}
	if diff := cmp.Diff([]string{"s", "v"}, deleted); diff != "" {
		t.Errorf("Deleted mismatch (-want +got):\n%s", diff)
	}
	// A network already gone is neither deleted by this prune nor a failure.
	if len(res.Gone) != 1 || res.Gone[0].ID != "n-gone" {
		t.Errorf("Gone = %+v, want the network n-gone", res.Gone)
	}
	type failure struct {
		ID    string
		InUse bool
	}
	var failed []failure
	for _, f := range res.Failed {
		failed = append(failed, failure{f.Object.ID, f.InUse})
	}
	want := []failure{{"c-used", true}, {"rev", false}, {"sec-foreign", false}}
	if diff := cmp.Diff(want, failed, cmpopts.SortSlices(func(a, b failure) bool { return a.ID < b.ID })); diff != "" {
		t.Errorf("Failed mismatch (-want +got):\n%s", diff)
	}
	if res.Err() == nil {
		t.Error("Result.Err() = nil with failures")
	}
}

func TestExecuteStopsWritingWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	eng := &recorder{}
	p := Plan{Owner: owner, Items: []Item{{Object: Object{Kind: KindService, ID: "s", Name: "shop_s", Labels: labels(owner)}, Decision: Delete}}}
	res := Execute(ctx, eng, p)
	if len(eng.calls) != 0 || len(res.Failed) != 1 || !errors.Is(res.Failed[0].Err, context.Canceled) {
		t.Errorf("Execute(cancelled) called %v and failed %+v, want no calls and one cancelled failure", eng.calls, res.Failed)
	}
}

// TestExecuteOnSwarmSparesHandMadeServiceAndReportsConfigInUse prunes a real
// namespace holding an owned orphan service, a service made by hand, and an
// owned orphan config that the hand-made service still uses.
func TestExecuteOnSwarmSparesHandMadeServiceAndReportsConfigInUse(t *testing.T) {
	cli := harness.RequireSwarm(t)
	ctx := t.Context()
	ns := harness.Name(t, "pr")
	harness.CleanupStack(t, cli, ns)
	own := stack.Owner{Controller: harness.Name(t, "ctl"), Application: "app", Release: ns}
	image := harness.TestImage(t, cli, harness.ImageOptions{})

	conf, err := cli.ConfigCreate(ctx, swarm.ConfigSpec{
		Annotations: swarm.Annotations{Name: ns + "_conf-1", Labels: own.Labels()}, Data: []byte("x"),
	})
	if err != nil {
		t.Fatal(err)
	}
	zero := uint64(0)
	create := func(name string, l map[string]string, configs ...*swarm.ConfigReference) string {
		t.Helper()
		resp, err := cli.ServiceCreate(ctx, swarm.ServiceSpec{
			Annotations:  swarm.Annotations{Name: name, Labels: l},
			TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: image, Configs: configs}},
			Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &zero}},
		}, swarm.ServiceCreateOptions{})
		if err != nil {
			t.Fatalf("create service %s: %v", name, err)
		}
		return resp.ID
	}
	orphanID := create(ns+"_old", own.Labels())
	handID := create(ns+"_hand", map[string]string{stack.LabelNamespace: ns}, &swarm.ConfigReference{
		File:     &swarm.ConfigReferenceFileTarget{Name: "/conf", UID: "0", GID: "0", Mode: 0o444},
		ConfigID: conf.ID, ConfigName: ns + "_conf-1",
	})

	recorded := stack.Release{
		Name:     ns,
		Services: map[string]swarm.ServiceSpec{ns + "_old": {}, ns + "_hand": {}},
		Configs:  map[string]swarm.ConfigSpec{ns + "_conf-1": {}},
	}
	live := listLive(t, cli)
	p := Orphans(Input{Owner: own, Live: live, Recorded: []Record{{Application: "app", Release: recorded}}, Applications: []string{"app"}})
	if got := decisionsByName(p); !cmp.Equal(got, map[string]Decision{ns + "_old": Delete, ns + "_hand": Unmanaged, ns + "_conf-1": Delete}) {
		t.Fatalf("Orphans() decisions = %v", got)
	}

	res := Execute(ctx, cli, p)
	if len(res.Deleted) != 1 || res.Deleted[0].ID != orphanID {
		t.Errorf("Deleted = %+v, want only the orphan service", res.Deleted)
	}
	if len(res.Failed) != 1 || res.Failed[0].Object.ID != conf.ID || !res.Failed[0].InUse {
		t.Errorf("Failed = %+v, want the config, in use", res.Failed)
	} else {
		t.Logf("in-use config reported: %v", res.Failed[0].Err)
	}
	if _, _, err := cli.ServiceInspectWithRaw(ctx, handID, swarm.ServiceInspectOptions{}); err != nil {
		t.Errorf("hand-made service after prune: %v", err)
	}
	if _, _, err := cli.ServiceInspectWithRaw(ctx, orphanID, swarm.ServiceInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("orphan service after prune: err = %v, want not found", err)
	}

	// Once the hand-made service lets go of the config, the next tick's
	// prune deletes it.
	if err := cli.ServiceRemove(ctx, handID); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		p := Orphans(Input{Owner: own, Live: listLive(t, cli), Recorded: []Record{{Application: "app", Release: recorded}}, Applications: []string{"app"}})
		res := Execute(ctx, cli, p)
		if err := res.Err(); err != nil {
			return false, err.Error()
		}
		if _, _, err := cli.ConfigInspectWithRaw(ctx, conf.ID); !cerrdefs.IsNotFound(err) {
			return false, fmt.Sprintf("config still there: %v", err)
		}
		return true, ""
	})
}

func listLive(t *testing.T, cli interface {
	ServiceList(context.Context, swarm.ServiceListOptions) ([]swarm.Service, error)
	NetworkList(context.Context, network.ListOptions) ([]network.Summary, error)
	ConfigList(context.Context, swarm.ConfigListOptions) ([]swarm.Config, error)
	SecretList(context.Context, swarm.SecretListOptions) ([]swarm.Secret, error)
	VolumeList(context.Context, volume.ListOptions) (volume.ListResponse, error)
}) []Object {
	t.Helper()
	ctx := t.Context()
	services, err := cli.ServiceList(ctx, swarm.ServiceListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	networks, err := cli.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	configs, err := cli.ConfigList(ctx, swarm.ConfigListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := cli.SecretList(ctx, swarm.SecretListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	volumes, err := cli.VolumeList(ctx, volume.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return LiveObjects(services, networks, configs, secrets, volumes.Volumes)
}

func decisionsByName(p Plan) map[string]Decision {
	out := map[string]Decision{}
	for _, it := range p.Items {
		out[it.Object.Name] = it.Decision
	}
	return out
}

func TestProtectKeepsTheObjectWhateverThePlanSaid(t *testing.T) {
	p := Plan{Items: []Item{
		{Object: Object{Kind: KindService, ID: "self", Name: "skep_controller"}, Decision: Delete, Reason: "release gone"},
		{Object: Object{Kind: KindService, ID: "other", Name: "skep_ui"}, Decision: Delete, Reason: "release gone"},
		{Object: Object{Kind: KindNetwork, ID: "self", Name: "skep_default"}, Decision: Delete, Reason: "release gone"},
	}}
	got := p.Protect(KindService, "self", "the controller's own service")
	if d := got.Items[0]; d.Decision != Keep || d.Reason != "the controller's own service" {
		t.Errorf("protected item = %+v, want kept with the reason", d)
	}
	if got.Items[1].Decision != Delete || got.Items[2].Decision != Delete {
		t.Errorf("other items changed: %+v", got.Items[1:])
	}
	if p.Items[0].Decision != Delete {
		t.Errorf("Protect changed the plan it was called on: %+v", p.Items[0])
	}
}

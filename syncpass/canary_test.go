package syncpass

import (
	"strings"
	"testing"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/canary"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// TestGateCanary names gate's rules of a release with a canary, as
// TestGate does the others: a running canary is taken on whatever the
// plan and the automation say, stays where it is while a window holds it
// unless someone asks, waits for a snapshot that shows its last write,
// and a render that starts one steers instead of writing, after the
// rules that hold any write.
func TestGateCanary(t *testing.T) {
	live := observed{has: true, readable: true, namespace: "ns-1"}
	running := facts{app: automated(), key: "c2", plan: changedPlan, seen: live, canary: canaryFacts{running: true}}
	back := running
	back.plan, back.key = unchangedPlan, "c1"
	manualRunning := running
	manualRunning.app = manual()
	windowed := running
	windowed.window = heldBy(t, true)
	promoted := windowed
	promoted.ask.Canary = CanaryPromote
	unseen := running
	unseen.canary = canaryFacts{unseen: true}
	starts := facts{app: automated(), key: "c2", plan: changedPlan, seen: live, canary: canaryFacts{starts: true}}
	heldStart := starts
	heldStart.held = &apply.FailedRollout{Commit: "c2", Key: "c2", Cause: "analysis failed"}
	waitsForDb := starts
	waitsForDb.notReady = []Dependency{{Name: "db", Why: "degraded"}}
	for _, tc := range []gateCase{
		{name: "a running canary is taken on", f: running, want: gateWant{then: steer}},
		{name: "a running canary is taken on once git went back, to be removed", f: back, want: gateWant{then: steer}},
		{name: "a running canary of a manual application is taken on: it is a sync under way", f: manualRunning, want: gateWant{then: steer}},
		{name: "a running canary stays where it is while a window holds it", f: windowed, want: gateWant{then: report}},
		{name: "someone's promotion passes a window that lets manual syncs through", f: promoted, want: gateWant{then: steer}},
		{name: "a canary waits for a snapshot that shows its last write", f: unseen,
			want: gateWant{then: hold, class: outcome.Waiting, errHas: "does not show the canary's last write"}},
		{name: "a render that starts a canary steers instead of writing", f: starts,
			want: gateWant{then: steer, findings: true, waiting: true, notices: []string{"window="}}},
		{name: "a commit an aborted canary holds off starts no canary again", f: heldStart,
			want: gateWant{then: hold, class: outcome.Stalled, errHas: "held off c2", findings: true, waiting: true, notices: []string{"window="}}},
		{name: "a canary waits for dependencies as a write does", f: waitsForDb,
			want: gateWant{then: hold, class: outcome.Waiting, errHas: "waiting for db", findings: true, waiting: true, waitingFor: []string{"db"}, notices: []string{"window="}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkVerdict(t, gate(tc.f), tc.f, tc.want)
		})
	}
}

func TestCanaryFactsOf(t *testing.T) {
	strategy := canary.Strategy{Steps: []canary.Step{{Pause: &canary.Pause{}}}}
	d := desired{release: stack.Release{Name: "web", Canaries: map[string]canary.Strategy{"web_api": strategy}}}
	canarySvc := &dswarm.Service{}
	for _, tc := range []struct {
		name string
		ask  Ask
		seen observed
		want canaryFacts
	}{
		{name: "no live snapshot: no canary", seen: observed{}, want: canaryFacts{}},
		{name: "a service with a strategy that the plan updates starts one", seen: observed{has: true, readable: true}, want: canaryFacts{starts: true}},
		{name: "a rollback never starts one", ask: Ask{Rollback: true}, seen: observed{has: true, readable: true}, want: canaryFacts{}},
		{name: "a running one runs", seen: observed{has: true, readable: true, canary: canarySvc}, want: canaryFacts{running: true}},
		{name: "a snapshot behind the writes cannot tell", seen: observed{has: true, canary: canarySvc}, want: canaryFacts{unseen: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Ask: tc.ask, Live: snapshotWith(t, "web_api")}
			if got := canaryFactsOf(in, d, tc.seen, changedPlan); got != tc.want {
				t.Errorf("canaryFactsOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The canary runs the render's task on the same networks and aliases,
// with its own replicas and state, and no fixed published port.
func TestCanarySpecRunsTheNewTaskBesideTheStableOne(t *testing.T) {
	three := uint64(3)
	stable := dswarm.ServiceSpec{
		Annotations: dswarm.Annotations{Name: "shop_web", Labels: map[string]string{stack.LabelNamespace: "shop", stack.LabelWave: "1"}},
		TaskTemplate: dswarm.TaskSpec{ContainerSpec: &dswarm.ContainerSpec{Image: "web:v2"},
			Networks: []dswarm.NetworkAttachmentConfig{{Target: "shop_default", Aliases: []string{"web"}}}},
		Mode: dswarm.ServiceMode{Replicated: &dswarm.ReplicatedService{Replicas: &three}},
		EndpointSpec: &dswarm.EndpointSpec{Mode: dswarm.ResolutionModeDNSRR, Ports: []dswarm.PortConfig{
			{TargetPort: 8080, PublishedPort: 80, PublishMode: dswarm.PortConfigPublishModeIngress},
			{TargetPort: 8080, PublishedPort: 8080, PublishMode: dswarm.PortConfigPublishModeHost},
			{TargetPort: 9090, PublishMode: dswarm.PortConfigPublishModeHost}}},
	}
	st := canary.Start("c2", "k", 3, 3, t0)
	got := canarySpec(stable, "shop_web", 1, st)
	if got.Name != "shop_web-canary" || *got.Mode.Replicated.Replicas != 1 || got.TaskTemplate.ContainerSpec.Image != "web:v2" ||
		got.TaskTemplate.Networks[0].Aliases[0] != "web" {
		t.Errorf("canary spec = %+v", got)
	}
	if got.Labels[stack.LabelKind] != stack.KindCanary || got.Labels[stack.LabelCanaryOf] != "shop_web" || got.Labels[stack.LabelWave] != "" {
		t.Errorf("labels = %v", got.Labels)
	}
	if back, err := canary.Decode(got.Labels[stack.LabelCanary]); err != nil || back.Key != "k" {
		t.Errorf("state label = %v, %v", back, err)
	}
	if ports := got.EndpointSpec.Ports; len(ports) != 1 || ports[0].TargetPort != 9090 {
		t.Errorf("ports = %+v, want only the host-mode one the Engine picks", ports)
	}
	if stable.Labels[stack.LabelKind] != "" || len(stable.EndpointSpec.Ports) != 3 || *stable.Mode.Replicated.Replicas != 3 {
		t.Error("canarySpec changed the stable spec it was given")
	}
	long := strings.Repeat("s", 60) + "_web"
	if n := canaryName(long); len(n) > 63 || !strings.HasSuffix(n, "-canary") || n == canaryName(long+"x") {
		t.Errorf("canaryName(%d characters) = %q", len(long), n)
	}
}

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// snapshotWith is a snapshot of the services named, nothing else.
func snapshotWith(t *testing.T, names ...string) swarm.Snapshot {
	t.Helper()
	var services []dswarm.Service
	for _, n := range names {
		services = append(services, dswarm.Service{ID: n, Spec: dswarm.ServiceSpec{Annotations: dswarm.Annotations{Name: n}}})
	}
	return swarm.NewSnapshot(swarm.Contents{Services: services, TakenAt: t0})
}

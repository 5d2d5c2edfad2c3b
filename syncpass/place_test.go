package syncpass

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/swarm"
)

// readyNode is a ready, active linux/amd64 node of 2 CPUs and 4 GiB.
func readyNode(name string) dswarm.Node {
	return dswarm.Node{ID: "id-" + name,
		Spec:   dswarm.NodeSpec{Role: dswarm.NodeRoleWorker, Availability: dswarm.NodeAvailabilityActive},
		Status: dswarm.NodeStatus{State: dswarm.NodeStateReady},
		Description: dswarm.NodeDescription{Hostname: name, Platform: dswarm.Platform{OS: "linux", Architecture: "x86_64"},
			Resources: dswarm.Resources{NanoCPUs: 2e9, MemoryBytes: 4 << 30}}}
}

// TestUnschedulableFailsAWaitForATaskNoNodeTakes: a task the scheduler
// left pending with its "no suitable node" error fails the wait at once
// with the scheduler's words and what no node satisfies; not a task
// pending without an error, or one of an application that allows the
// rule.
func TestUnschedulableFailsAWaitForATaskNoNodeTakes(t *testing.T) {
	written := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	rel := webRelease("app:v1")
	live := liveService(rel, "app:v1", "")
	live.Spec.TaskTemplate.Placement = &dswarm.Placement{Constraints: []string{"node.labels.zone == c"}}
	pending := func(created time.Time, err string) dswarm.Task {
		return dswarm.Task{ID: "0123456789abcdef", ServiceID: live.ID, DesiredState: dswarm.TaskStateRunning, Meta: dswarm.Meta{CreatedAt: created},
			Status: dswarm.TaskStatus{State: dswarm.TaskStatePending, Err: err}}
	}
	const noNode = "no suitable node (scheduling constraints not satisfied on 2 nodes)"
	// A host-mode port: the placement check does not judge it.
	const portTaken = "no suitable node (host-mode port already in use on 2 nodes)"
	stopping := dswarm.Task{ID: "old", ServiceID: live.ID, DesiredState: dswarm.TaskStateShutdown,
		Status: dswarm.TaskStatus{State: dswarm.TaskStateRunning, Timestamp: written.Add(-time.Hour)}}
	stopped := func(at time.Time) dswarm.Task {
		t := stopping
		t.Status = dswarm.TaskStatus{State: dswarm.TaskStateShutdown, Timestamp: at}
		return t
	}
	allowing := func(rules ...string) appset.Application {
		a := appset.Application{Name: "web", Release: "web"}
		a.Allow.Unplaceable = rules
		return a
	}
	for _, tc := range []struct {
		name string
		app  appset.Application
		task dswarm.Task
		want []string // nil: the wait goes on
		// placeable drops the service's constraint: every node suits it.
		placeable bool
		leaving   []dswarm.Task // other tasks of the service
	}{
		{name: "a task of the write no node takes", app: allowing(), task: pending(written.Add(time.Second), noNode),
			want: []string{"service web_api cannot be placed: task 0123456789ab pending: " + noNode, `constraint "node.labels.zone == c" matches none of the 2`}},
		{name: "a task pending since an earlier write", app: allowing(), task: pending(written.Add(-time.Second), noNode),
			want: []string{"cannot be placed"}},
		{name: "a task pending without the scheduler's error: it is being placed", app: allowing(), task: pending(written.Add(time.Second), "")},
		{name: "an application that allows the rule waits for a node", app: allowing("constraint"), task: pending(written.Add(time.Second), noNode)},
		{name: "an application that allows every rule waits for a node", app: allowing("all"), task: pending(written.Add(time.Second), noNode)},
		{name: "allowing another rule does not let this one wait", app: allowing("resources"), task: pending(written.Add(time.Second), noNode),
			want: []string{"cannot be placed"}},
		{name: "a task waiting for what a task on its way out holds, which the check finds placeable, waits",
			app: allowing(), task: pending(written.Add(time.Second), portTaken), placeable: true, leaving: []dswarm.Task{stopping}},
		{name: "as it does for what a task that just stopped held",
			app: allowing(), task: pending(written.Add(time.Second), portTaken), placeable: true, leaving: []dswarm.Task{stopped(written)}},
		{name: "but not for what a task long stopped held",
			app: allowing(), task: pending(written.Add(time.Second), portTaken), placeable: true, leaving: []dswarm.Task{stopped(written.Add(-time.Minute))},
			want: []string{"service web_api cannot be placed: task 0123456789ab pending: " + portTaken}},
		{name: "a rule the check does not judge, with no task on its way out, fails with the scheduler's words",
			app: allowing(), task: pending(written.Add(time.Second), portTaken), placeable: true,
			want: []string{"service web_api cannot be placed: task 0123456789ab pending: " + portTaken}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := live
			if tc.placeable {
				live.Spec.TaskTemplate.Placement = nil
			}
			snap := swarm.NewSnapshot(swarm.Contents{Services: []dswarm.Service{live}, Tasks: append([]dswarm.Task{tc.task}, tc.leaving...),
				Nodes: []dswarm.Node{readyNode("skep-w1"), readyNode("skep-w2")}, TakenAt: written.Add(2 * time.Second)})
			got := unschedulable(tc.app, rel, snap)
			if tc.want == nil {
				if got != "" {
					t.Errorf("unschedulable = %q, want the wait to go on", got)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("unschedulable = %q, want it to say %q", got, w)
				}
			}
		})
	}
}

// platformsOf is a registry that answers each image's platforms and
// counts the look-ups.
type platformsOf struct {
	answers map[string][]artifact.Platform
	asked   atomic.Int32
}

func (p *platformsOf) Platforms(_ context.Context, image string) ([]artifact.Platform, error) {
	p.asked.Add(1)
	if ps, ok := p.answers[image]; ok {
		return ps, nil
	}
	return nil, artifact.ErrImageMissing
}

// TestCheckPlacementAsksTheRegistryUnlessLookUpsAreOff: an image built for
// another platform is refused with the platforms; an image the registry
// does not know is not judged on platform; an application with
// resolveImage: never asks no registry.
func TestCheckPlacementAsksTheRegistryUnlessLookUpsAreOff(t *testing.T) {
	reg := &platformsOf{answers: map[string][]artifact.Platform{"app:arm": {{OS: "linux", Architecture: "arm64"}}}}
	env := Env{Platforms: reg, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	snap := swarm.NewSnapshot(swarm.Contents{Nodes: []dswarm.Node{readyNode("skep-w1")}, TakenAt: time.Now()})
	app := appset.Application{Name: "web", Release: "web"}
	if got := placementLines(checkPlacement(t.Context(), env, app, webRelease("app:arm"), snap)); len(got) != 1 || !strings.Contains(got[0], "built for linux/arm64") {
		t.Errorf("an arm64 image on an amd64 node: %q, want it refused for its platform", got)
	}
	if got := checkPlacement(t.Context(), env, app, webRelease("app:unknown"), snap); len(got) != 0 {
		t.Errorf("an image the registry does not know: %v, want no problem", got)
	}
	asked := reg.asked.Load()
	app.SyncPolicy.ResolveImage = appset.ResolveNever
	if got := checkPlacement(t.Context(), env, app, webRelease("app:arm"), snap); len(got) != 0 || reg.asked.Load() != asked {
		t.Errorf("resolveImage: never: %v after %d look-ups, want no problem and no look-up", got, reg.asked.Load()-asked)
	}
	failed := swarm.NewSnapshot(swarm.Contents{Nodes: []dswarm.Node{readyNode("skep-w1")}, Err: errors.New("list failed")})
	if got := checkPlacement(t.Context(), env, appset.Application{Name: "web"}, webRelease("app:arm"), failed); got != nil {
		t.Errorf("a snapshot that failed: %v, want nothing judged", got)
	}
}

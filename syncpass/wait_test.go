package syncpass

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/swarm"
)

// TestNextWaitStep: a wait ends only on a snapshot that shows its write
// and finds the release ready; it asks for a full relist while the
// snapshot may predate the write and for the tasks once it does not; and
// a wave that wrote nothing has no write to wait for.
func TestNextWaitStep(t *testing.T) {
	at := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	before, after := at.Add(-time.Second), at.Add(time.Second)
	cases := []struct {
		name        string
		written     time.Time
		taken       time.Time
		seenEarlier bool
		ready       bool
		want        waitStep
	}{
		{name: "a ready release in a snapshot after the write is done", written: at, taken: after, ready: true, want: waitDone},
		{name: "a snapshot from before the write says nothing of it", written: at, taken: before, seenEarlier: true, ready: true, want: waitRelist},
		{name: "a snapshot from the instant of the write says nothing of it", written: at, taken: at, seenEarlier: true, ready: true, want: waitRelist},
		{name: "a written release not ready yet asks for the tasks", written: at, taken: after, want: waitRelistTasks},
		{name: "a wave that wrote nothing goes on from an older snapshot", taken: before, seenEarlier: true, ready: true, want: waitDone},
		{name: "a wave that wrote nothing and is not ready asks for the tasks", taken: before, seenEarlier: true, want: waitRelistTasks},
		{name: "a wave that wrote nothing still needs the earlier writes seen", taken: before, ready: true, want: waitRelist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextWaitStep(tc.written, tc.taken, tc.seenEarlier, tc.ready); got != tc.want {
				t.Errorf("nextWaitStep(written %v, taken %v, seen earlier %t, ready %t) = %d, want %d",
					tc.written, tc.taken, tc.seenEarlier, tc.ready, got, tc.want)
			}
		})
	}
}

// listed is a swarm.Reader that lists the same contents every time and
// streams no event.
type listed struct{ c swarm.Contents }

func (l listed) ServiceList(context.Context, dswarm.ServiceListOptions) ([]dswarm.Service, error) {
	return l.c.Services, nil
}
func (l listed) TaskList(context.Context, dswarm.TaskListOptions) ([]dswarm.Task, error) {
	return l.c.Tasks, nil
}
func (l listed) NetworkList(context.Context, network.ListOptions) ([]network.Summary, error) {
	return nil, nil
}
func (l listed) ConfigList(context.Context, dswarm.ConfigListOptions) ([]dswarm.Config, error) {
	return nil, nil
}
func (l listed) SecretList(context.Context, dswarm.SecretListOptions) ([]dswarm.Secret, error) {
	return nil, nil
}
func (l listed) NodeList(context.Context, dswarm.NodeListOptions) ([]dswarm.Node, error) {
	return l.c.Nodes, nil
}
func (l listed) VolumeList(context.Context, volume.ListOptions) (volume.ListResponse, error) {
	return volume.ListResponse{}, nil
}
func (l listed) Events(context.Context, events.ListOptions) (<-chan events.Message, <-chan error) {
	return make(chan events.Message), make(chan error)
}

// TestAFailingRolloutAsksGitAgainOnlyOnceASecond: a request stays queued
// behind a failing rollout while git has nothing newer (a sync asked
// again, a webhook of another branch). The wait asks git again on its
// next tick, not in a loop that spins for the rest of the timeout.
func TestAFailingRolloutAsksGitAgainOnlyOnceASecond(t *testing.T) {
	written := time.Now().Add(-time.Minute)
	rel := webRelease("registry/web:v2")
	live := liveService(rel, "registry/web:v2", dswarm.UpdateStateUpdating)
	pending := dswarm.Task{ID: "t1", ServiceID: live.ID, NodeID: "", DesiredState: dswarm.TaskStateRunning,
		Meta: dswarm.Meta{CreatedAt: written.Add(time.Second)}, Spec: dswarm.TaskSpec{ContainerSpec: live.Spec.TaskTemplate.ContainerSpec},
		Status: dswarm.TaskStatus{State: dswarm.TaskStatePending, Timestamp: written.Add(time.Second),
			Err: "no suitable node (scheduling constraints not satisfied on 1 node)"}}
	w := swarm.NewWatcher(listed{swarm.Contents{Services: []dswarm.Service{live}, Tasks: []dswarm.Task{pending},
		Nodes: []dswarm.Node{readyNode("skep-m1")}}}, swarm.WatcherOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = w.Run(ctx) }()
	w.Read(ctx)

	queued := make(chan struct{})
	close(queued)
	env := Env{Owner: "c1", Live: w, Fleet: Fleet{Newer: func(string) <-chan struct{} { return queued }}}
	app := appset.Application{Name: "web", Release: "web",
		SyncPolicy: appset.SyncPolicy{Timeout: 2500 * time.Millisecond}, Allow: appset.Allow{Unplaceable: []string{appset.UnplaceableAll}}}
	var asked atomic.Int64
	wf := waitFor{app: app, rel: rel, written: written, superseded: func(context.Context) bool { asked.Add(1); return false }}
	err := waitHealthy(t.Context(), env, wf)
	if err == nil || !strings.Contains(err.Error(), "not healthy within 2.5s") {
		t.Errorf("the wait ended with %v, want its timeout", err)
	}
	if n := asked.Load(); n < 1 || n > 4 {
		t.Errorf("git asked %d times in a wait of 2.5 s with a request queued, want 1 to 4 (once, then once a second)", n)
	}
}

package swarm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/volume"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/tickgrid"
)

// runWatcher starts w.Run and, at cleanup, cancels it and checks it
// returned.
func runWatcher(t *testing.T, w *Watcher) (context.Context, context.CancelFunc, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return ctx, cancel, done
}

// runOnResyncGrid runs, in a synctest bubble, a Watcher of f with a 30 s
// resync and a 5 minute full relist, started on the resync's grid so that
// the resyncs come every 30 s from its start, and waits for its first
// snapshot.
func runOnResyncGrid(t *testing.T, f *fakeReader) (*Watcher, context.Context, context.CancelFunc, <-chan error) {
	t.Helper()
	time.Sleep(tickgrid.Until(time.Now(), 30*time.Second))
	w := NewWatcher(f, WatcherOptions{Resync: 30 * time.Second, FullResync: 5 * time.Minute})
	ctx, cancel, done := runWatcher(t, w)
	synctest.Wait()
	return w, ctx, cancel, done
}

func TestWatcherOnSwarmSeesOutOfBandChangesAndStops(t *testing.T) {
	cli := harness.RequireSwarm(t)
	// A resync of an hour: only the events stream can make changes seen.
	w := NewWatcher(cli, WatcherOptions{Resync: time.Hour})
	ctx, cancel, done := runWatcher(t, w)
	defer cancel()
	wake := w.Subscribe(ctx)

	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		s := w.Current()
		return !s.TakenAt().IsZero() && s.Err() == nil, fmt.Sprintf("taken at %v, err %v", s.TakenAt(), s.Err())
	})
	if !slices.Contains(slices.Collect(maps.Values(w.Current().NetworkNames())), "ingress") {
		t.Errorf("NetworkNames() = %v, want the swarm's ingress network among them", w.Current().NetworkNames())
	}
	if n := w.Current().EligibleNodes(); n < 1 {
		t.Errorf("EligibleNodes() = %d, want at least this manager", n)
	}
	if nodes := w.Current().Nodes(); len(nodes) < 1 || nodes[0].ID == "" {
		t.Errorf("Nodes() = %v, want at least this manager", nodes)
	}
	first := w.Current().Version()

	ns := harness.Name(t, "sn")
	harness.CleanupStack(t, cli, ns)
	zero := uint64(0)
	spec := swarm.ServiceSpec{
		Annotations:  swarm.Annotations{Name: ns + "_hand", Labels: map[string]string{"com.docker.stack.namespace": ns}},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: "skep-testapp:absent"}},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &zero}},
	}
	resp, err := cli.ServiceCreate(ctx, spec, swarm.ServiceCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, func(context.Context) (bool, string) {
		_, ok := w.Current().Service(ns + "_hand")
		return ok, "service created by hand not in the snapshot"
	})
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Error("no wake-up on the subscription after a change")
	}
	if w.Current().Version() <= first {
		t.Errorf("Version() = %d after a change, want above %d", w.Current().Version(), first)
	}

	svc, _, err := cli.ServiceInspectWithRaw(ctx, resp.ID, swarm.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	three := uint64(3)
	svc.Spec.Mode.Replicated.Replicas = &three
	if _, err := cli.ServiceUpdate(ctx, svc.ID, svc.Version, svc.Spec, swarm.ServiceUpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, func(context.Context) (bool, string) {
		s, _ := w.Current().Service(ns + "_hand")
		if r := s.Spec.Mode.Replicated; r != nil && r.Replicas != nil && *r.Replicas == 3 {
			return true, ""
		}
		return false, "scale to 3 not in the snapshot"
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run() = %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	for range wake { // drains a pending wake-up, then sees the close
	}
}

// fakeReader is a Reader whose lists are empty, counted and optionally
// failing, and whose events stream the test drives.
type fakeReader struct {
	mu       sync.Mutex
	lists    int // service lists: every relist, services-only ones too
	full     int // config lists: full relists only
	taskList int // task lists: full relists and resyncs of the tasks
	streams  int
	listErr  error
	msgs     chan events.Message
	errs     chan error
	services []swarm.Service
	tasks    []swarm.Task
	nodes    []swarm.Node
	configs  []swarm.Config
	// afterTasks, when set, runs after each task list: what moves between
	// it and the next list.
	afterTasks func(*fakeReader)
}

func newFakeReader() *fakeReader { return &fakeReader{} }

func (f *fakeReader) counts() (lists, streams int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists, f.streams
}

func (f *fakeReader) set(fn func(*fakeReader)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeReader) ServiceList(context.Context, swarm.ServiceListOptions) ([]swarm.Service, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	return f.services, f.listErr
}
func (f *fakeReader) TaskList(context.Context, swarm.TaskListOptions) ([]swarm.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.taskList++
	tasks := f.tasks
	if f.afterTasks != nil {
		f.afterTasks(f)
	}
	return tasks, nil
}

func (f *fakeReader) taskLists() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.taskList
}

func (f *fakeReader) fullLists() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.full
}
func (f *fakeReader) NetworkList(context.Context, network.ListOptions) ([]network.Summary, error) {
	return nil, nil
}
func (f *fakeReader) ConfigList(context.Context, swarm.ConfigListOptions) ([]swarm.Config, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.full++
	return f.configs, nil
}
func (f *fakeReader) SecretList(context.Context, swarm.SecretListOptions) ([]swarm.Secret, error) {
	return nil, nil
}
func (f *fakeReader) NodeList(context.Context, swarm.NodeListOptions) ([]swarm.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes, nil
}
func (f *fakeReader) VolumeList(context.Context, volume.ListOptions) (volume.ListResponse, error) {
	return volume.ListResponse{}, nil
}
func (f *fakeReader) Events(ctx context.Context, _ events.ListOptions) (<-chan events.Message, <-chan error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.streams++
	f.msgs, f.errs = make(chan events.Message), make(chan error, 1)
	return f.msgs, f.errs
}

func (f *fakeReader) send(ctx context.Context, m events.Message) {
	f.mu.Lock()
	ch := f.msgs
	f.mu.Unlock()
	select {
	case ch <- m:
	case <-ctx.Done():
	}
}

func TestWatcherRelistsAtMostOncePerIntervalUnderAnEventStorm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeReader()
		w := NewWatcher(f, WatcherOptions{MinInterval: 500 * time.Millisecond, Resync: time.Hour})
		ctx, cancel, done := runWatcher(t, w)
		synctest.Wait()
		// 2 seconds of events, one every millisecond.
		for i := range 2000 {
			f.send(ctx, events.Message{Type: events.ServiceEventType, Action: events.ActionUpdate, Actor: events.Actor{ID: fmt.Sprint(i)}})
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		lists, _ := f.counts()
		// The first list, then one per 500ms over 2s of events, plus the
		// one the last events scheduled.
		if full := f.fullLists(); full < 2 || full > 6 {
			t.Errorf("%d relists for 2000 events over 2s, want between 2 and 6", full)
		}
		// Between them, services alone at most once per 100ms.
		if lists > 6+20 {
			t.Errorf("%d service lists for 2000 service events over 2s, want at most 26", lists)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

// TestWatcherLeavesIgnoredConfigsOut: a leader lease rewritten every
// second relists nothing and is not in the snapshot; another config's
// event still relists.
func TestWatcherLeavesIgnoredConfigsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeReader()
		f.configs = []swarm.Config{{ID: "l", Spec: swarm.ConfigSpec{Annotations: swarm.Annotations{Name: "skep-lease-x"}}},
			{ID: "c", Spec: swarm.ConfigSpec{Annotations: swarm.Annotations{Name: "web_conf"}}}}
		w := NewWatcher(f, WatcherOptions{Resync: time.Hour, IgnoreConfig: func(name string) bool { return strings.HasPrefix(name, "skep-lease-") }})
		ctx, cancel, done := runWatcher(t, w)
		synctest.Wait()
		if got := w.Current().ConfigNames(); len(got) != 1 || got["c"] != "web_conf" {
			t.Errorf("configs in the snapshot %v, want web_conf alone", got)
		}
		lease := events.Message{Type: events.ConfigEventType, Action: events.ActionUpdate, Actor: events.Actor{ID: "l", Attributes: map[string]string{"name": "skep-lease-x"}}}
		for range 10 {
			f.send(ctx, lease)
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if full := f.fullLists(); full != 1 {
			t.Errorf("%d full lists after 10 lease renewals, want the first one alone", full)
		}
		other := lease
		other.Actor = events.Actor{ID: "c", Attributes: map[string]string{"name": "web_conf"}}
		f.send(ctx, other)
		time.Sleep(time.Second)
		synctest.Wait()
		if full := f.fullLists(); full != 2 {
			t.Errorf("%d full lists after another config's event, want 2", full)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

func TestWatcherRelistsServicesAtOnceForAServiceEventWhileAFullRelistWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeReader()
		w := NewWatcher(f, WatcherOptions{MinInterval: 500 * time.Millisecond, ServiceMinInterval: 100 * time.Millisecond, Resync: time.Hour})
		ctx, cancel, done := runWatcher(t, w)
		synctest.Wait()
		first := w.Current()
		// A container event starts the clock of the full relists; then
		// someone scales a service by hand.
		f.send(ctx, events.Message{Type: events.ContainerEventType, Action: events.ActionStart})
		synctest.Wait()
		f.set(func(f *fakeReader) {
			f.services = []swarm.Service{{ID: "a", Spec: swarm.ServiceSpec{Annotations: swarm.Annotations{Name: "shop_web"}}}}
		})
		f.send(ctx, events.Message{Type: events.ServiceEventType, Action: events.ActionUpdate, Actor: events.Actor{ID: "a"}})
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		now := w.Current()
		if _, ok := now.Service("shop_web"); !ok || now.Version() <= first.Version() {
			t.Fatalf("150ms after the service event the snapshot (version %d, was %d) has no shop_web", now.Version(), first.Version())
		}
		if full := f.fullLists(); full != 1 {
			t.Errorf("%d full relists within 150ms of the first, want 1: the services came alone", full)
		}
		if !now.TakenAt().Equal(first.TakenAt()) {
			t.Errorf("a services-only relist moved TakenAt from %v to %v", first.TakenAt(), now.TakenAt())
		}
		// The full relist the events asked for still comes, and finds
		// nothing new; it still wakes subscribers, since TakenAt now
		// covers the services they were shown.
		wake := w.Subscribe(ctx)
		time.Sleep(time.Second)
		synctest.Wait()
		if full := f.fullLists(); full != 2 {
			t.Errorf("%d full relists a second later, want 2", full)
		}
		select {
		case <-wake:
		default:
			t.Error("the full relist after a services-only one woke no subscriber")
		}
		if !w.Current().TakenAt().After(now.TakenAt()) {
			t.Errorf("TakenAt %v after the full relist, want after %v", w.Current().TakenAt(), now.TakenAt())
		}
		cancel()
		<-done
	})
}

// At rest, a resync lists what moves without an event (tasks and nodes;
// the services, whose status counts tasks, when those moved) and leaves
// the rest to the events, but for one full relist every FullResync; a
// task that moved wakes subscribers without moving TakenAt, which only a
// full relist does.
// On a swarm of one node, the Engine whose events the watcher follows,
// a task that arrived (running as desired, or ended) only moves with an
// event: the resync lists nothing while every task has, and moves TasksAt
// (by which health ages failures) all the same. A task on its way
// (starting, pending) brings the task lists back.
func TestWatcherLeavesSettledTasksOfOneNodeToTheEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeReader()
		running := func(id string, state swarm.TaskState) swarm.Task {
			return swarm.Task{ID: id, ServiceID: "a", DesiredState: swarm.TaskStateRunning, Status: swarm.TaskStatus{State: state}}
		}
		f.set(func(f *fakeReader) {
			f.nodes = []swarm.Node{{ID: "n1"}}
			f.tasks = []swarm.Task{running("t1", swarm.TaskStateRunning),
				{ID: "t0", ServiceID: "a", DesiredState: swarm.TaskStateShutdown, Status: swarm.TaskStatus{State: swarm.TaskStateFailed}}}
		})
		w, ctx, cancel, done := runOnResyncGrid(t, f)
		first := w.Current()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if tasks := f.taskLists(); tasks != 1 {
			t.Errorf("%d task lists after 2m at rest on one node, want 1 (the first full relist)", tasks)
		}
		if now := w.Current(); !now.TasksAt().After(first.TasksAt().Add(time.Minute)) || now.Version() != first.Version() {
			t.Errorf("TasksAt %v → %v, version %d → %d: want TasksAt moved by the resyncs, the version kept",
				first.TasksAt(), now.TasksAt(), first.Version(), now.Version())
		}

		// An update starts a task: its container's event brings a relist,
		// and the resyncs list the tasks again until it runs.
		f.set(func(f *fakeReader) { f.tasks = append(f.tasks, running("t2", swarm.TaskStateStarting)) })
		f.send(ctx, events.Message{Type: events.ContainerEventType, Action: events.ActionCreate})
		time.Sleep(time.Second)
		synctest.Wait()
		before := f.taskLists()
		if before != 2 {
			t.Fatalf("%d task lists after the event, want 2", before)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if after := f.taskLists(); after != before+2 {
			t.Errorf("%d task lists a minute after a task started, want %d: a resync every 30s", after, before+2)
		}
		// A second node: its tasks raise no event here.
		f.set(func(f *fakeReader) {
			f.tasks = f.tasks[:2]
			f.nodes = append(f.nodes, swarm.Node{ID: "n2"})
		})
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(w.Current().TasksOf("a")); n != 2 {
			t.Fatalf("the resync saw %d tasks of a, want 2", n)
		}
		before = f.taskLists()
		time.Sleep(time.Minute)
		synctest.Wait()
		if after := f.taskLists(); after != before+2 {
			t.Errorf("%d task lists a minute on with two nodes, want %d", after, before+2)
		}
		cancel()
		<-done
	})
}

// TestWatcherFollowsTasksOnTheirWayOnOtherNodes: on a swarm of several
// nodes a task that starts on another node raises no event here; while it
// is on its way the tasks are listed within SettleInterval, so health sees
// it run within seconds, not at the next resync. A task left pending for
// good is listed less and less often, never more than the resync's pace
// once backed off.
func TestWatcherFollowsTasksOnTheirWayOnOtherNodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeReader()
		task := func(id string, state swarm.TaskState) swarm.Task {
			return swarm.Task{ID: id, ServiceID: "a", DesiredState: swarm.TaskStateRunning, Status: swarm.TaskStatus{State: state}}
		}
		f.set(func(f *fakeReader) {
			f.nodes = []swarm.Node{{ID: "n1"}, {ID: "n2"}}
			f.tasks = []swarm.Task{task("t1", swarm.TaskStateStarting)}
		})
		w, _, cancel, done := runOnResyncGrid(t, f)
		// Listed at 1s (starting), then 2s later (the first list found no move).
		time.Sleep(1500 * time.Millisecond)
		f.set(func(f *fakeReader) { f.tasks = []swarm.Task{task("t1", swarm.TaskStateRunning)} })
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := w.Current().TasksOf("a"); len(got) != 1 || got[0].Status.State != swarm.TaskStateRunning {
			t.Errorf("2s after the task ran on another node the snapshot holds %v, want it running", got)
		}
		// Arrived: nothing more than the resyncs.
		before := f.taskLists()
		time.Sleep(time.Minute)
		synctest.Wait()
		if after := f.taskLists(); after != before+2 {
			t.Errorf("%d task lists in a minute once every task arrived, want %d (a resync every 30s)", after-before, 2)
		}

		// A task no node can take stays pending: the lists back off.
		f.set(func(f *fakeReader) { f.tasks = append(f.tasks, task("t2", swarm.TaskStatePending)) })
		w.RelistTasks()
		time.Sleep(time.Second)
		synctest.Wait()
		before = f.taskLists()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		// Lists 1, 2, 3 ... s apart, and the resyncs every 30 s: about
		// twenty in two minutes where a list every second would be 120.
		if n := f.taskLists() - before; n < 10 || n > 25 {
			t.Errorf("%d task lists in 2m with a task pending for good, want 10 to 25 (backing off towards the resync)", n)
		}
		cancel()
		<-done
	})
}

// TestWatcherFollowsTheTasksOfANodeThatWentDown: the event that a node
// went down comes before the orchestrator replaces its tasks, and that
// raises no event here; a list that shows the node down with its tasks
// still running is followed by more, so the replacement is seen within
// seconds, not at the next resync.
func TestWatcherFollowsTheTasksOfANodeThatWentDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeReader()
		node := func(id string, state swarm.NodeState) swarm.Node {
			return swarm.Node{ID: id, Status: swarm.NodeStatus{State: state}}
		}
		task := func(id, node string, desired, state swarm.TaskState) swarm.Task {
			return swarm.Task{ID: id, ServiceID: "a", NodeID: node, DesiredState: desired, Status: swarm.TaskStatus{State: state}}
		}
		f.set(func(f *fakeReader) {
			f.nodes = []swarm.Node{node("n1", swarm.NodeStateReady), node("n2", swarm.NodeStateReady)}
			f.tasks = []swarm.Task{task("t1", "n2", swarm.TaskStateRunning, swarm.TaskStateRunning)}
		})
		w, ctx, cancel, done := runOnResyncGrid(t, f)
		// n2 goes down: the node's event, a list, and only then the
		// orchestrator's move.
		f.set(func(f *fakeReader) { f.nodes[1].Status.State = swarm.NodeStateDown })
		f.send(ctx, events.Message{Type: events.NodeEventType, Action: events.ActionUpdate})
		time.Sleep(time.Second)
		synctest.Wait()
		f.set(func(f *fakeReader) {
			f.tasks = []swarm.Task{task("t1", "n2", swarm.TaskStateShutdown, swarm.TaskStateRunning),
				task("t2", "n1", swarm.TaskStateRunning, swarm.TaskStateRunning)}
		})
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got := w.Current().TasksOf("a"); len(got) != 2 {
			t.Errorf("3s after the orchestrator replaced the down node's task the snapshot holds %d task(s), want t1 and t2", len(got))
		}
		cancel()
		<-done
	})
}

// TestWatcherListsTheServicesAgainWhenTheirCountsLagTheTasks: Swarm counts
// a service's running tasks when the services are listed, before the
// tasks are: a task that starts running in between leaves the counts a
// step behind, and on one node no event may follow to mend them. The
// services are listed again at once; counts that still lag are no
// settled snapshot, so the next resync lists them again.
func TestWatcherListsTheServicesAgainWhenTheirCountsLagTheTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeReader()
		service := func(running uint64) []swarm.Service {
			return []swarm.Service{{ID: "a", Spec: swarm.ServiceSpec{Annotations: swarm.Annotations{Name: "a"}},
				ServiceStatus: &swarm.ServiceStatus{RunningTasks: running, DesiredTasks: 1}}}
		}
		running := func(s Snapshot) uint64 {
			if svc, ok := s.Service("a"); ok && svc.ServiceStatus != nil {
				return svc.ServiceStatus.RunningTasks
			}
			return 99
		}
		f.set(func(f *fakeReader) {
			f.nodes = []swarm.Node{{ID: "n1", Status: swarm.NodeStatus{State: swarm.NodeStateReady}}}
			f.services = service(0)
			f.tasks = []swarm.Task{{ID: "t1", ServiceID: "a", NodeID: "n1", DesiredState: swarm.TaskStateRunning,
				Status: swarm.TaskStatus{State: swarm.TaskStateRunning}}}
			f.afterTasks = func(f *fakeReader) { f.services, f.afterTasks = service(1), nil }
		})
		w, _, cancel, done := runOnResyncGrid(t, f)
		if got := running(w.Current()); got != 1 {
			t.Errorf("after the first relist service a counts %d running, want 1: listed again once its tasks had moved", got)
		}

		// Counts that lag both lists: the resync, which skips the tasks of
		// a settled single-node swarm, lists them again.
		f.set(func(f *fakeReader) {
			f.services = service(0)
			f.afterTasks = func(f *fakeReader) { f.afterTasks = func(f *fakeReader) { f.services = service(1) } }
		})
		w.Relist()
		time.Sleep(time.Second)
		synctest.Wait()
		if got := running(w.Current()); got != 0 {
			t.Fatalf("the relist's counts are %d, want 0 (the setup lags both lists)", got)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if got := running(w.Current()); got != 1 {
			t.Errorf("a resync later service a counts %d running, want 1", got)
		}
		cancel()
		<-done
	})
}

func TestWatcherResyncsTheTasksAloneBetweenFullRelists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeReader()
		w, ctx, cancel, done := runOnResyncGrid(t, f)
		first := w.Current()
		time.Sleep(45 * time.Second)
		synctest.Wait()
		if now := w.Current(); now.Version() != first.Version() || !now.TakenAt().Equal(first.TakenAt()) || !now.TasksAt().After(first.TasksAt()) {
			t.Errorf("a resync that found nothing: version %d → %d, TakenAt %v → %v, TasksAt %v → %v; want the version and TakenAt kept, TasksAt later",
				first.Version(), now.Version(), first.TakenAt(), now.TakenAt(), first.TasksAt(), now.TasksAt())
		}

		// A task fails on another node: no event, the next resync sees it.
		wake := w.Subscribe(ctx)
		f.set(func(f *fakeReader) {
			f.tasks = []swarm.Task{{ID: "t1", ServiceID: "a", Status: swarm.TaskStatus{State: swarm.TaskStateFailed}}}
		})
		time.Sleep(30 * time.Second)
		synctest.Wait()
		select {
		case <-wake:
		default:
			t.Error("a resync that found a task moved woke no subscriber")
		}
		now := w.Current()
		if len(now.TasksOf("a")) != 1 || now.Version() == first.Version() || !now.TakenAt().Equal(first.TakenAt()) {
			t.Errorf("after the task moved: tasks of a %v, version %d (was %d), TakenAt %v (was %v); want the task, a new version, TakenAt kept",
				now.TasksOf("a"), now.Version(), first.Version(), now.TakenAt(), first.TakenAt())
		}

		time.Sleep(3*time.Minute + 30*time.Second) // 4m45s from the start
		synctest.Wait()
		if full, tasks := f.fullLists(), f.taskLists(); full != 1 || tasks != 10 {
			t.Errorf("after 4m45s at rest: %d full relists and %d task lists, want 1 and 10 (9 resyncs of the tasks)", full, tasks)
		}
		// The services were listed again only for the task that moved.
		if services, _ := f.counts(); services != 2 {
			t.Errorf("%d service lists after 4m45s, want 2: the full relist and the resync that found a task moved", services)
		}
		// Five minutes after the first, a full relist; it moves TakenAt.
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if full := f.fullLists(); full != 2 {
			t.Errorf("%d full relists after 5m15s, want 2: one every FullResync", full)
		}
		if !w.Current().TakenAt().After(first.TakenAt()) {
			t.Errorf("TakenAt %v after the full relist, want after %v", w.Current().TakenAt(), first.TakenAt())
		}
		cancel()
		<-done
	})
}

func TestWatcherIgnoresHealthCheckExecEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeReader()
		w := NewWatcher(f, WatcherOptions{Resync: time.Hour})
		ctx, cancel, done := runWatcher(t, w)
		synctest.Wait()
		for range 10 {
			f.send(ctx, events.Message{Type: events.ContainerEventType, Action: "exec_start: /testapp health"})
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if lists, _ := f.counts(); lists != 1 {
			t.Errorf("%d lists after only exec events, want the first one only", lists)
		}
		cancel()
		<-done
	})
}

func TestWatcherReportsListFailureAndRecoversWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeReader()
		f.listErr = errors.New("daemon down")
		w := NewWatcher(f, WatcherOptions{MinInterval: 100 * time.Millisecond, MaxBackoff: time.Second, Resync: time.Hour})
		// Subscribe before Run starts: the first, failed list is the only
		// one that moves the snapshot, and a subscription made after it
		// would wait for a wake-up that never comes while the fake clock
		// races through the retries.
		wake := w.Subscribe(t.Context())
		_, cancel, done := runWatcher(t, w)
		synctest.Wait()
		if s := w.Current(); !s.ReadFailed() || !errors.Is(s.Err(), f.listErr) {
			t.Errorf("snapshot after a failed list: err %v, want %v", s.Err(), f.listErr)
		}
		<-wake
		// Backoff doubles from 100ms to the 1s cap: in 5s about 8 tries,
		// not one per millisecond.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if lists, _ := f.counts(); lists < 4 || lists > 12 {
			t.Errorf("%d lists in 5s of failure, want backoff between 4 and 12", lists)
		}
		f.set(func(f *fakeReader) {
			f.listErr = nil
			f.services = []swarm.Service{{ID: "a", Spec: swarm.ServiceSpec{Annotations: swarm.Annotations{Name: "shop_web"}}}}
		})
		time.Sleep(2 * time.Second)
		synctest.Wait()
		s := w.Current()
		if s.ReadFailed() {
			t.Errorf("snapshot still failed after the daemon came back: %v", s.Err())
		}
		if _, ok := s.Service("shop_web"); !ok {
			t.Error("service listed after recovery is not in the snapshot")
		}
		<-wake
		cancel()
		<-done
	})
}

func TestWatcherResubscribesAfterStreamError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeReader()
		w := NewWatcher(f, WatcherOptions{MinInterval: 200 * time.Millisecond, Resync: time.Hour})
		_, cancel, done := runWatcher(t, w)
		synctest.Wait()
		f.set(func(f *fakeReader) { f.errs <- errors.New("unexpected EOF") })
		synctest.Wait()
		if _, streams := f.counts(); streams != 1 {
			t.Errorf("resubscribed at once (%d streams), want a backoff first", streams)
		}
		time.Sleep(250 * time.Millisecond)
		synctest.Wait()
		lists, streams := f.counts()
		if streams != 2 || lists != 2 {
			t.Errorf("after backoff: %d streams, %d lists; want a new stream and a relist", streams, lists)
		}
		cancel()
		<-done
	})
}

func TestWatcherSubscriptionClosesWithItsContext(t *testing.T) {
	w := NewWatcher(newFakeReader(), WatcherOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	ch := w.Subscribe(ctx)
	cancel()
	select {
	case _, ok := <-ch:
		if ok {
			t.Error("received a wake-up instead of a close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("subscription not closed after its context ended")
	}
	if s := w.Current(); !errors.Is(s.Err(), ErrNotListed) {
		t.Errorf("snapshot before Run: err %v, want ErrNotListed", s.Err())
	}
}

// countingReader passes a real Engine's events stream through and keeps
// every message the Engine sent.
type countingReader struct {
	Reader
	mu   sync.Mutex
	seen []events.Message
}

func (c *countingReader) Events(ctx context.Context, options events.ListOptions) (<-chan events.Message, <-chan error) {
	in, errs := c.Reader.Events(ctx, options)
	out := make(chan events.Message)
	go func() {
		defer close(out)
		for m := range in {
			c.mu.Lock()
			c.seen = append(c.seen, m)
			c.mu.Unlock()
			select {
			case out <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, errs
}

func (c *countingReader) messages() []events.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen)
}

// The Engine itself keeps health checks' exec events out of the stream
// (they are most of an idle swarm's events), while a container's start and
// its health status still arrive.
func TestWatcherStreamCarriesNoExecEventsFromTheEngine(t *testing.T) {
	cli := harness.RequireSwarm(t)
	r := &countingReader{Reader: cli}
	w := NewWatcher(r, WatcherOptions{Resync: time.Hour})
	_, cancel, done := runWatcher(t, w)
	defer func() { cancel(); <-done }()
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		return !w.Current().TakenAt().IsZero(), "not listed yet"
	})

	ns := harness.Name(t, "ex")
	harness.CleanupStack(t, cli, ns)
	one := uint64(1)
	resp, err := cli.ServiceCreate(t.Context(), swarm.ServiceSpec{
		Annotations:  swarm.Annotations{Name: ns + "_web", Labels: map[string]string{"com.docker.stack.namespace": ns}},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: harness.TestImage(t, cli, harness.ImageOptions{})}},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &one}},
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR},
	}, swarm.ServiceCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The test image checks its health every 2s: by the time it reports
	// healthy, the Engine has run (and announced) several checks.
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		for _, m := range r.messages() {
			if m.Type == events.ContainerEventType && m.Action == "health_status: healthy" && m.Actor.Attributes["com.docker.swarm.service.id"] == resp.ID {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d messages, no health_status: healthy for the service yet", len(r.messages()))
	})
	time.Sleep(5 * time.Second) // two more checks
	var started bool
	for _, m := range r.messages() {
		if strings.HasPrefix(string(m.Action), "exec_") {
			t.Errorf("the stream carried %s %s", m.Type, m.Action)
		}
		if m.Type == events.ContainerEventType && m.Action == events.ActionStart && m.Actor.Attributes["com.docker.swarm.service.id"] == resp.ID {
			started = true
		}
	}
	if !started {
		t.Errorf("no start event for the service's container among %d messages", len(r.messages()))
	}
}

// slowReader is a fakeReader whose full relists take a second, as listing
// 10,000 services does.
type slowReader struct{ *fakeReader }

func (s slowReader) ConfigList(ctx context.Context, o swarm.ConfigListOptions) ([]swarm.Config, error) {
	time.Sleep(time.Second)
	return s.fakeReader.ConfigList(ctx, o)
}

// A backlog of events, queued while a long relist ran, is one change to
// relist for, not one per event: the watcher read one event per loop and
// its relist timer, due at once, won every other turn.
func TestWatcherRelistsABacklogOfEventsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeReader()
		w := NewWatcher(slowReader{f}, WatcherOptions{MinInterval: 500 * time.Millisecond, Resync: time.Hour})
		ctx, cancel, done := runWatcher(t, w)
		synctest.Wait()
		before := f.fullLists()
		// 200 events handed over as fast as the watcher takes them, as
		// the Engine's stream hands over what it queued.
		for i := range 200 {
			f.send(ctx, events.Message{Type: events.ConfigEventType, Action: events.ActionCreate, Actor: events.Actor{ID: fmt.Sprint(i)}})
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		// The first event's relist, and one for what came while it ran.
		if n := f.fullLists() - before; n < 1 || n > 2 {
			t.Errorf("%d relists for a backlog of 200 events, want 1 or 2", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

// Relist brings a full relist with no event: a caller whose write ended
// after the last relist started needs one to see it.
func TestWatcherRelistsWhenAskedWithoutAnEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeReader()
		w := NewWatcher(f, WatcherOptions{MinInterval: 500 * time.Millisecond, Resync: time.Hour})
		_, cancel, done := runWatcher(t, w)
		synctest.Wait()
		before, taken := f.fullLists(), w.Current().TakenAt()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := f.fullLists() - before; n != 0 {
			t.Fatalf("%d relists with no event and no ask", n)
		}
		w.Relist()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := f.fullLists() - before; n != 1 {
			t.Errorf("%d relists in 10 s after one ask, want 1", n)
		}
		if got := w.Current().TakenAt(); !got.After(taken) {
			t.Errorf("TakenAt %v after the asked relist, want after %v", got, taken)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

// RelistTasks brings the tasks' change that no event announces (a task a
// health check moved from starting to running) into the snapshot without a
// full relist, and asks made together share one list.
func TestWatcherRelistsTheTasksWhenAskedWithoutAnEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeReader()
		starting := swarm.Task{ID: "t1", DesiredState: swarm.TaskStateRunning, Status: swarm.TaskStatus{State: swarm.TaskStateStarting}}
		f.set(func(f *fakeReader) { f.tasks = []swarm.Task{starting} })
		w := NewWatcher(f, WatcherOptions{MinInterval: 500 * time.Millisecond, Resync: time.Hour, FullResync: time.Hour})
		_, cancel, done := runWatcher(t, w)
		synctest.Wait()
		full, tasks, taken := f.fullLists(), f.taskLists(), w.Current().TakenAt()

		running := starting
		running.Status.State = swarm.TaskStateRunning
		f.set(func(f *fakeReader) { f.tasks = []swarm.Task{running} })
		for range 3 {
			w.RelistTasks()
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := f.taskLists() - tasks; n != 1 {
			t.Errorf("%d task lists after three asks, want 1", n)
		}
		if n := f.fullLists() - full; n != 0 {
			t.Errorf("%d full relists after asks for the tasks, want 0", n)
		}
		snap := w.Current()
		if got := snap.Tasks(); len(got) != 1 || got[0].Status.State != swarm.TaskStateRunning {
			t.Errorf("tasks after the asked list = %+v, want t1 running", got)
		}
		if !snap.TakenAt().Equal(taken) {
			t.Errorf("TakenAt moved from %v to %v on a task list", taken, snap.TakenAt())
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
}

// Read waits for the first list, listed or failed, and no longer than
// its context; once listed it answers at once.
func TestReadWaitsForTheFirstListOrItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeReader()
		f.nodes = []swarm.Node{{ID: "n1"}}
		w := NewWatcher(f, WatcherOptions{Resync: time.Hour})
		short, cancelShort := context.WithTimeout(t.Context(), time.Second)
		defer cancelShort()
		if s := w.Read(short); !errors.Is(s.Err(), ErrNotListed) {
			t.Fatalf("Read of a Watcher not run = %v, want ErrNotListed once its context ends", s.Err())
		}
		_, cancel, done := runWatcher(t, w)
		defer func() { cancel(); <-done }()
		if s := w.Read(t.Context()); s.Err() != nil || len(s.Nodes()) != 1 || s.TakenAt().IsZero() {
			t.Fatalf("Read after the first list = %v, %d nodes, taken at %v; want the listed snapshot", s.Err(), len(s.Nodes()), s.TakenAt())
		}
	})
}

// A first list that fails ends the wait too, with its error.
func TestReadEndsOnAFailedFirstList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeReader()
		f.listErr = errors.New("manager gone")
		w := NewWatcher(f, WatcherOptions{Resync: time.Hour})
		_, cancel, done := runWatcher(t, w)
		defer func() { cancel(); <-done }()
		if s := w.Read(t.Context()); s.Err() == nil || errors.Is(s.Err(), ErrNotListed) {
			t.Fatalf("Read after a failed first list = %v, want the list's error", s.Err())
		}
	})
}

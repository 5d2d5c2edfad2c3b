package reconcile_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/reconcile"
)

// listCounter counts the service and task lists made through it.
type listCounter struct {
	reconcile.Engine
	lists atomic.Int64
}

func (l *listCounter) ServiceList(ctx context.Context, o dswarm.ServiceListOptions) ([]dswarm.Service, error) {
	l.lists.Add(1)
	return l.Engine.ServiceList(ctx, o)
}

func (l *listCounter) TaskList(ctx context.Context, o dswarm.TaskListOptions) ([]dswarm.Task, error) {
	l.lists.Add(1)
	return l.Engine.TaskList(ctx, o)
}

// API reads of live services and tasks are answered from the live snapshot:
// a hundred of them cost the Engine nothing, and they still show a change
// made behind the controller's back once the snapshot has seen it.
func TestLiveReadsComeFromTheSnapshot(t *testing.T) {
	e := newEnv(t)
	counter := &listCounter{}
	e.wrap = func(eng reconcile.Engine) reconcile.Engine { counter.Engine = eng; return counter }
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": "services:\n  web:\n    image: " + e.v1 + "\n    deploy: {endpoint_mode: dnsrr, replicas: 1}\n"})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.app("web", true)))})
	run(t, ctrl)
	waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Sync == reconcile.Synced && s.Running == 1
	})

	before := counter.lists.Load()
	for range 100 {
		services, err := ctrl.LiveServices(t.Context(), "web")
		if err != nil || len(services) != 1 || services[0].Spec.Name != e.ns+"_web" {
			t.Fatalf("LiveServices = %v, %v; want web's one service", services, err)
		}
		tasks, err := ctrl.LiveTasks(t.Context(), "web")
		if err != nil || len(tasks) == 0 || tasks[0].ServiceID != services[0].ID {
			t.Fatalf("LiveTasks = %v, %v; want web's tasks", tasks, err)
		}
	}
	if all, err := ctrl.LiveServices(t.Context(), ""); err != nil || len(all) != 1 {
		t.Errorf("LiveServices(all) = %v, %v; want the one service", all, err)
	}
	// Reconciles at idle list nothing either (quiet ticks), so any call
	// here is one of the reads.
	if n := counter.lists.Load() - before; n != 0 {
		t.Errorf("201 live reads made %d service or task lists on the Engine, want 0", n)
	}

	// Behind the controller's back: scaled to 2.
	s, err := e.serviceNamed(t, e.ns+"_web")
	if err != nil || s == nil {
		t.Fatalf("web: %v, %v", s, err)
	}
	two := uint64(2)
	spec := s.Spec
	spec.Mode.Replicated.Replicas = &two
	if _, err := e.cli.ServiceUpdate(t.Context(), s.ID, s.Version, spec, dswarm.ServiceUpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		services, err := ctrl.LiveServices(ctx, "web")
		if err != nil || len(services) != 1 {
			return false, "no service"
		}
		r := services[0].Spec.Mode.Replicated
		return r != nil && r.Replicas != nil && *r.Replicas == 2, "replicas not 2 yet"
	})
}

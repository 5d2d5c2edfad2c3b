package reconcile

import (
	"testing"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/stack"
)

func TestSpecPendingUntilTheTasksRunIt(t *testing.T) {
	spec := func(image string) dswarm.TaskSpec {
		return dswarm.TaskSpec{ContainerSpec: &dswarm.ContainerSpec{Image: image}}
	}
	svc := dswarm.Service{ID: "s1", Spec: dswarm.ServiceSpec{
		Annotations:  dswarm.Annotations{Name: "web", Labels: map[string]string{stack.LabelSpecHash: "new"}},
		TaskTemplate: func() dswarm.TaskSpec { s := spec("web:v2"); s.Runtime = dswarm.RuntimeContainer; return s }(),
	}}
	task := func(image string, desired dswarm.TaskState) dswarm.Task {
		return dswarm.Task{ServiceID: "s1", Spec: spec(image), DesiredState: desired, Status: dswarm.TaskStatus{State: dswarm.TaskStateRunning}}
	}
	for _, tc := range []struct {
		name     string
		hash     string
		tasks    []dswarm.Task
		pending  bool
		updating bool
	}{
		{name: "the live view still holds the spec before the write", hash: "other", tasks: []dswarm.Task{task("web:v2", dswarm.TaskStateRunning)}, pending: true},
		{name: "the new spec with only a task of the old one is not rolled out", hash: "new", tasks: []dswarm.Task{task("web:v1", dswarm.TaskStateRunning)}, pending: true},
		{name: "start-first: the new task runs beside the old one still meant to run", hash: "new",
			tasks: []dswarm.Task{task("web:v1", dswarm.TaskStateRunning), task("web:v2", dswarm.TaskStateRunning)}, pending: true},
		{name: "the old task told to shut down no longer counts", hash: "new",
			tasks: []dswarm.Task{task("web:v1", dswarm.TaskStateShutdown), task("web:v2", dswarm.TaskStateRunning)}},
		{name: "another service's tasks do not count", hash: "new",
			tasks: []dswarm.Task{{ServiceID: "s2", Spec: spec("other"), DesiredState: dswarm.TaskStateRunning}}},
		{name: "a service without tasks (scaled to zero) is rolled out", hash: "new"},
		{name: "the runtime the Engine fills in for services only does not count", hash: "new", tasks: []dswarm.Task{func() dswarm.Task {
			t := task("web:v2", dswarm.TaskStateRunning)
			t.Spec.Runtime = ""
			return t
		}()}},
		{name: "once Swarm runs the update its status decides, not the tasks", hash: "new", tasks: []dswarm.Task{task("web:v1", dswarm.TaskStateRunning)},
			updating: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := svc
			if tc.updating {
				svc.UpdateStatus = &dswarm.UpdateStatus{State: dswarm.UpdateStateUpdating}
			}
			why, _ := specPending(svc, tc.tasks, tc.hash)
			if (why != "") != tc.pending {
				t.Errorf("specPending = %q, want pending %t", why, tc.pending)
			}
		})
	}
}

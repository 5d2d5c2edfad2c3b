package hook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/stack"
)

// fakeEngine runs every job at once to the state and exit code it is
// given, with logs of its lines; it keeps the services it was given.
type fakeEngine struct {
	services []swarm.Service
	state    swarm.TaskState
	exit     int
	logs     []string
	removed  []string
	created  int
}

func (f *fakeEngine) ServiceCreate(_ context.Context, spec swarm.ServiceSpec, _ swarm.ServiceCreateOptions) (swarm.ServiceCreateResponse, error) {
	f.created++
	id := fmt.Sprintf("id%d", len(f.services)+f.created)
	f.services = append(f.services, swarm.Service{ID: id, Spec: spec,
		Meta: swarm.Meta{CreatedAt: time.Date(2026, 1, 1, 0, 0, len(f.services)+f.created, 0, time.UTC)}})
	return swarm.ServiceCreateResponse{ID: id}, nil
}

func (f *fakeEngine) ServiceList(context.Context, swarm.ServiceListOptions) ([]swarm.Service, error) {
	return append([]swarm.Service(nil), f.services...), nil
}

func (f *fakeEngine) ServiceRemove(_ context.Context, id string) error {
	for i, s := range f.services {
		if s.ID == id {
			f.removed = append(f.removed, s.Spec.Name)
			f.services = append(f.services[:i], f.services[i+1:]...)
			return nil
		}
	}
	return errors.New("no such service")
}

func (f *fakeEngine) TaskList(context.Context, swarm.TaskListOptions) ([]swarm.Task, error) {
	return []swarm.Task{{Status: swarm.TaskStatus{State: f.state, ContainerStatus: &swarm.ContainerStatus{ExitCode: f.exit}}}}, nil
}

func (f *fakeEngine) SecretList(context.Context, swarm.SecretListOptions) ([]swarm.Secret, error) {
	return []swarm.Secret{{ID: "s1", Spec: swarm.SecretSpec{Annotations: swarm.Annotations{Name: "shop_db-password"}}}}, nil
}

func (f *fakeEngine) ConfigList(context.Context, swarm.ConfigListOptions) ([]swarm.Config, error) {
	return nil, nil
}

func (f *fakeEngine) ServiceLogs(context.Context, string, container.LogsOptions) (io.ReadCloser, error) {
	var buf bytes.Buffer
	w := stdcopy.NewStdWriter(&buf, stdcopy.Stdout)
	for _, l := range f.logs {
		fmt.Fprintln(w, l)
	}
	return io.NopCloser(&buf), nil
}

var owner = stack.Owner{Controller: "c", Application: "shop", Release: "shop"}

func migrate() stack.Hook {
	labels := owner.Labels()
	labels[stack.LabelKind], labels[stack.LabelHook] = stack.KindHook, "migrate"
	return stack.Hook{Service: "migrate", Phase: stack.PreSync, Spec: swarm.ServiceSpec{Annotations: swarm.Annotations{Name: "shop_migrate", Labels: labels},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: "db", Secrets: []*swarm.SecretReference{{SecretName: "shop_db-password"}}}}}}
}

func TestRunReportsTheExitCodeAndTheLogTail(t *testing.T) {
	for _, tc := range []struct {
		name    string
		state   swarm.TaskState
		exit    int
		wantErr string
	}{
		{name: "a job that completes is the hook's success", state: swarm.TaskStateComplete},
		{name: "a job that exits non-zero fails the hook with its code and log tail", state: swarm.TaskStateFailed, exit: 1,
			wantErr: "pre-sync hook migrate (job shop_migrate-abc1234-1): exit code 1; log tail:\nstep 1\nstep 2"},
		{name: "a job Swarm rejects fails the hook with the task's state", state: swarm.TaskStateRejected,
			wantErr: "pre-sync hook migrate (job shop_migrate-abc1234-1): task rejected: ; log tail:\nstep 1\nstep 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := &fakeEngine{state: tc.state, exit: tc.exit, logs: []string{"step 1", "step 2"}}
			res, err := Run(context.Background(), eng, migrate(), Options{Owner: owner, Commit: "abc1234def"})
			if tc.wantErr == "" {
				if err != nil || res.Logs != "step 1\nstep 2" || res.Job != "shop_migrate-abc1234-1" {
					t.Fatalf("Run = %+v, %v; want job shop_migrate-abc1234-1 with its logs", res, err)
				}
				return
			}
			var failed *FailedError
			if !errors.As(err, &failed) || err.Error() != tc.wantErr {
				t.Fatalf("Run error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestRunNumbersEachRunAndKeepsOnlyTheNewestJobs(t *testing.T) {
	eng := &fakeEngine{state: swarm.TaskStateComplete}
	// A job of another owner with the hook's labels is never removed.
	foreign := migrate().Spec
	foreign.Name, foreign.Labels = "shop_migrate-abc1234-9", map[string]string{stack.LabelHook: "migrate", stack.LabelKind: stack.KindHook, stack.LabelRelease: "shop"}
	eng.services = append(eng.services, swarm.Service{ID: "other", Spec: foreign})
	for _, commit := range []string{"abc1234def", "abc1234def", "fff0000aaa"} {
		if _, err := Run(context.Background(), eng, migrate(), Options{Owner: owner, Commit: commit, Keep: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if d := cmp.Diff([]string{"shop_migrate-abc1234-1"}, eng.removed); d != "" {
		t.Errorf("removed (-want +got):\n%s", d)
	}
	var left []string
	for _, s := range eng.services {
		left = append(left, s.Spec.Name)
	}
	if d := cmp.Diff([]string{"shop_migrate-abc1234-9", "shop_migrate-abc1234-2", "shop_migrate-fff0000-1"}, left); d != "" {
		t.Errorf("jobs left (-want +got):\n%s", d)
	}
}

func TestJobNameFitsSwarmsLimit(t *testing.T) {
	name := jobName(strings.Repeat("a", 63), "0123456789", nil)
	if len(name) > maxServiceName || !strings.HasSuffix(name, "-0123456-1") {
		t.Errorf("jobName = %q (%d), want at most %d characters ending -0123456-1", name, len(name), maxServiceName)
	}
}

func TestRunStopsAJobPastItsTimeout(t *testing.T) {
	eng := &fakeEngine{state: swarm.TaskStateRunning, logs: []string{"waiting for lock"}}
	h := migrate()
	h.Timeout = 50 * time.Millisecond
	_, err := Run(context.Background(), eng, h, Options{Owner: owner, Commit: "abc1234"})
	var failed *FailedError
	if !errors.As(err, &failed) || failed.Reason != "timed out after 50ms" || failed.Logs != "waiting for lock" {
		t.Fatalf("Run error = %v, want a timeout with the log tail", err)
	}
	if d := cmp.Diff([]string{"shop_migrate-abc1234-1"}, eng.removed); d != "" {
		t.Errorf("removed (-want +got):\n%s", d)
	}
}

func TestRunGivesTheJobTheIdsOfItsSecretsAndLeavesTheHookAlone(t *testing.T) {
	eng := &fakeEngine{state: swarm.TaskStateComplete}
	h := migrate()
	if _, err := Run(context.Background(), eng, h, Options{Owner: owner, Commit: "abc1234"}); err != nil {
		t.Fatal(err)
	}
	if got := eng.services[0].Spec.TaskTemplate.ContainerSpec.Secrets[0].SecretID; got != "s1" {
		t.Errorf("job's secret id = %q, want s1", got)
	}
	if got := h.Spec.TaskTemplate.ContainerSpec.Secrets[0].SecretID; got != "" {
		t.Errorf("hook's own spec got secret id %q; it must stay the release's", got)
	}
}

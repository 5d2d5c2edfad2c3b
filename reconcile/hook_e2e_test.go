package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/stack"
)

// withHook is compose(port) plus a hook service on the test image, which
// prints lines and exits with code (testapp exit).
func withHook(port uint32, name, phase string, code int, lines ...string) string {
	args := []string{`"exit"`, fmt.Sprintf("%q", fmt.Sprint(code))}
	for _, l := range lines {
		args = append(args, fmt.Sprintf("%q", l))
	}
	return strings.Replace(compose(port), "configs:\n  settings:", fmt.Sprintf(`  %s:
    image: ${IMAGE}
    command: [%s]
    x-skep-hook: %s
    x-skep-hook-timeout: 2m
configs:
  settings:`, name, strings.Join(args, ", "), phase), 1)
}

// hookJobs lists the swarm's jobs of the test's release for hook name.
func (e *env) hookJobs(t *testing.T, name string) []swarm.Service {
	t.Helper()
	list, err := e.cli.ServiceList(t.Context(), swarm.ServiceListOptions{Filters: filters.NewArgs(
		filters.Arg("label", stack.LabelRelease+"="+e.ns), filters.Arg("label", stack.LabelHook+"="+name))})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// waitEvent waits for an event of type typ about commit whose message
// holds every one of want, and returns it.
func (e *env) waitEvent(t *testing.T, typ notify.EventType, commit string, want ...string) notify.Event {
	t.Helper()
	var got notify.Event
	harness.Eventually(t, 3*time.Minute, func(context.Context) (bool, string) {
		for _, ev := range e.events.of(typ) {
			if ev.Revision != commit {
				continue
			}
			all := true
			for _, w := range want {
				all = all && strings.Contains(ev.Message, w)
			}
			if all {
				got = ev
				return true, ""
			}
		}
		return false, fmt.Sprintf("%s events: %+v", typ, e.events.of(typ))
	})
	return got
}

func TestPreSyncHookGatesTheApplyAndOnlyTheKeptJobsStay(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	first := e.repo.Commit(t, "main", map[string]string{
		"compose.yaml": withHook(port, "migrate", "pre-sync", 0, "migrated to 7"),
		"settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	apps := appSet(strings.Replace(e.app("web", true), "      interval: 10s\n", "      interval: 10s\n      keepHookJobs: 1\n", 1))
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", apps)})
	run(t, ctrl)

	// Exit 0: the deploy proceeds.
	e.waitImage(t, e.v1, 3*time.Minute)
	e.waitEvent(t, notify.SyncSucceeded, first)
	if s, err := e.service(t.Context(), "migrate"); err != nil || s != nil {
		t.Errorf("service %s_migrate: %v, %v; want no such service, the hook runs as a job", e.ns, s, err)
	}
	jobs := e.hookJobs(t, "migrate")
	wantFirst := fmt.Sprintf("%s_migrate-%s-1", e.ns, first[:7])
	if len(jobs) != 1 || jobs[0].Spec.Name != wantFirst {
		t.Fatalf("hook jobs after the first sync = %v, want %s", names(jobs), wantFirst)
	}
	owner := stack.Owner{Controller: e.id, Application: "web", Release: e.ns}
	if j := jobs[0]; !owner.Owns(j.Spec.Labels) || j.Spec.Mode.ReplicatedJob == nil {
		t.Errorf("job %s: labels %v, mode %+v; want the owner's labels on a replicated job", j.Spec.Name, j.Spec.Labels, j.Spec.Mode)
	}

	// Exit 1: the deploy stops before the release is written.
	second := e.repo.Commit(t, "main", map[string]string{
		"compose.yaml": withHook(port, "migrate", "pre-sync", 1, "applying 8", "duplicate column: email"),
		".env":         "IMAGE=" + e.v2 + "\n"})
	failed := e.waitEvent(t, notify.SyncFailed, second, "pre-sync hook migrate", "exit code 1", "duplicate column: email", "applying 8")
	if s, err := e.service(t.Context(), "web"); err != nil || s == nil || s.Spec.TaskTemplate.ContainerSpec.Image != e.v1 {
		t.Errorf("web after the failed pre-sync hook: %v, %v; want it left at %s", s, err, e.v1)
	}
	for _, ev := range e.events.of(notify.SyncSucceeded) {
		if ev.Revision == second {
			t.Errorf("sync-succeeded for %s after its pre-sync hook failed: %s", second, ev.Message)
		}
	}
	// keepHookJobs 1: the first run's job went, the failed one stays for its logs.
	jobs = e.hookJobs(t, "migrate")
	wantSecond := fmt.Sprintf("%s_migrate-%s-1", e.ns, second[:7])
	if len(jobs) != 1 || jobs[0].Spec.Name != wantSecond {
		t.Errorf("hook jobs after the second sync = %v, want %s alone", names(jobs), wantSecond)
	}
	t.Logf("sync-failed: %s", failed.Message)
}

func TestPostSyncHookFailureIsReportedWithItsLogTail(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	commit := e.repo.Commit(t, "main", map[string]string{
		"compose.yaml": withHook(port, "smoke", "post-sync", 3, "GET / answered 502"),
		"settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.app("web", true)))})
	run(t, ctrl)

	e.waitEvent(t, notify.SyncFailed, commit, "post-sync hook smoke", "exit code 3", "GET / answered 502")
	// The apply happened before the hook ran.
	e.waitImage(t, e.v1, 10*time.Second)
	for _, ev := range e.events.of(notify.SyncSucceeded) {
		if ev.Revision == commit {
			t.Errorf("sync-succeeded for %s after its post-sync hook failed: %s", commit, ev.Message)
		}
	}
}

func names(list []swarm.Service) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Spec.Name)
	}
	return out
}

// When the application leaves the app set (with --prune), its release is
// pruned and the finished jobs of its hooks go with it.
func TestHookJobsGoWithTheirPrunedRelease(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	first := e.repo.Commit(t, "main", map[string]string{
		"compose.yaml": withHook(port, "smoke", "post-sync", 0, "smoke ok"),
		"settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	dir := t.TempDir()
	apps := writeFile(t, dir, "apps.yaml", appSet(e.app("web", true)))
	ctrl := e.controllerWith(t, appset.FileSource{Path: apps}, reconcile.Options{PruneApplications: true})
	run(t, ctrl)
	e.waitEvent(t, notify.SyncSucceeded, first)
	if jobs := e.hookJobs(t, "smoke"); len(jobs) != 1 {
		t.Fatalf("hook jobs after the sync = %v, want one", names(jobs))
	}

	writeFile(t, dir, "apps.yaml", appSet(e.bystander()))
	harness.Eventually(t, 2*time.Minute, func(context.Context) (bool, string) {
		s, err := e.service(t.Context(), "web")
		jobs := e.hookJobs(t, "smoke")
		return err == nil && s == nil && len(jobs) == 0, fmt.Sprintf("web: %v (%v), hook jobs: %v", s != nil, err, names(jobs))
	})
	// The records go last, once nothing of the release is left.
	harness.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		rev, err := apply.LatestRevision(ctx, e.cli, stack.Owner{Controller: e.id, Application: "web", Release: e.ns})
		return err == nil && rev == nil, fmt.Sprintf("revision %v, %v", rev, err)
	})
}

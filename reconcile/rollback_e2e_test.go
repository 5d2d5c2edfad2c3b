package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/stack"
)

// release3 is a release of three services in two waves: db and api in
// wave 0, web in wave 1. api runs apiArgs (none: the image's own
// command), and apiDeploy is added to its deploy block. Tasks restart
// after a second, so a failing one fails again within seconds.
func release3(db, api, web string, apiArgs []string, apiDeploy string) string {
	command := ""
	if len(apiArgs) > 0 {
		// A JSON list is a YAML flow sequence.
		args, _ := json.Marshal(apiArgs)
		command = "    command: " + string(args) + "\n"
	}
	service := func(name, image string, wave int, extra, deploy string) string {
		return fmt.Sprintf("  %s:\n    image: %s\n    x-skep-wave: %d\n%s    deploy:\n      endpoint_mode: dnsrr\n      replicas: 1\n      restart_policy: {delay: 1s}\n%s",
			name, image, wave, extra, deploy)
	}
	return "services:\n" + service("db", db, 0, "", "") + service("api", api, 0, command, apiDeploy) + service("web", web, 1, "", "")
}

// rollbackApp is an automated application of e's release under policy
// (the syncPolicy lines given).
func (e *env) rollbackApp(policy ...string) string {
	return strings.Replace(e.app("web", true), "    syncPolicy:\n", "    syncPolicy:\n      "+strings.Join(policy, "\n      ")+"\n", 1)
}

// services returns the release's live db, api and web, by short name.
func (e *env) services3(t *testing.T) map[string]*swarm.Service {
	t.Helper()
	out := map[string]*swarm.Service{}
	for _, name := range []string{"db", "api", "web"} {
		s, err := e.service(t.Context(), name)
		if err != nil || s == nil {
			t.Fatalf("service %s: %v, %v", name, s, err)
		}
		out[name] = s
	}
	return out
}

// sameSpec reports whether live runs the spec before ran: the spec
// Skep wrote (its hash label) and the container's image and arguments.
func sameSpec(before, live *swarm.Service) bool {
	a, b := before.Spec.TaskTemplate.ContainerSpec, live.Spec.TaskTemplate.ContainerSpec
	return before.Spec.Labels[stack.LabelSpecHash] == live.Spec.Labels[stack.LabelSpecHash] &&
		a.Image == b.Image && reflect.DeepEqual(a.Args, b.Args)
}

// waitRelease3 waits until the three services run healthy at commit.
func waitRelease3(t *testing.T, ctrl *reconcile.Controller, commit string) {
	t.Helper()
	waitStatus(t, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool {
		return s.DeployedRevision == commit && s.Health == health.Healthy && s.Running == 3 && s.LastError == ""
	})
}

// A release of three services in two waves whose new commit breaks one
// service of wave 0, with rollback: release: every service the commit
// wrote goes back to the previous revision's spec, wave 1 is never
// written, one release-rolled-back event names the failing service and
// why, the commit is held off (later ticks write nothing), and a fix
// commit deploys at once. Each way a rollout fails is a case: a task
// that exits 1, a health check that fails, Swarm's own failure_action:
// rollback of one service.
func TestReleaseRollbackWritesEveryServiceBackAndHoldsTheCommit(t *testing.T) {
	cli := harness.RequireSwarm(t)
	sick := harness.TestImage(t, cli, harness.ImageOptions{Version: "sick", Unhealthy: true})
	for _, tc := range []struct {
		name string
		// bad is api's image, arguments and deploy additions at the bad
		// commit; cause what the event's cause must say.
		image     func(e *env) string
		args      []string
		apiDeploy string
		cause     []string
		// restart: a new controller takes over while the commit is held.
		restart bool
	}{
		{name: "a task that exits 1", image: func(e *env) string { return e.v1 },
			args:    []string{"exit", "1", "api: cannot open database db:5432"},
			cause:   []string{"_api: exit code 1", "last log line: api: cannot open database db:5432"},
			restart: true},
		{name: "a failing health check", image: func(*env) string { return sick },
			cause: []string{"_api: health check failing"}},
		{name: "Swarm's own rollback of one service", image: func(*env) string { return sick },
			apiDeploy: "      update_config: {failure_action: rollback, monitor: 30s}\n",
			cause:     []string{"_api: rolled back by Swarm"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			first := e.repo.Commit(t, "main", map[string]string{"compose.yaml": release3(e.v1, e.v1, e.v1, nil, tc.apiDeploy)})
			apps := appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.rollbackApp("rollback: release", "timeout: 60s")))}
			ctrl := e.controller(t, apps)
			stop := runStoppable(t, ctrl)
			waitRelease3(t, ctrl, first)
			before := e.services3(t)

			bad := e.repo.Commit(t, "main", map[string]string{"compose.yaml": release3(e.v2, tc.image(e), e.v2, tc.args, tc.apiDeploy)})
			refresh(t, ctrl)
			harness.Eventually(t, 3*time.Minute, func(context.Context) (bool, string) {
				return len(e.events.of(notify.ReleaseRolledBack)) > 0, "no release-rolled-back event yet"
			})
			checkRolledBack(t, e, before, bad, first, tc.cause)
			st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
				return s.Held.Failed != nil && strings.Contains(s.LastError, "held off")
			})
			if st.Held.Failed.Commit != bad || st.Held.Failed.Restored != first || st.Cause.Service != e.ns+"_api" {
				t.Errorf("status hold %+v, cause %+v; want %s held off, %s restored, the api named", st.Held.Failed, st.Cause, bad, first)
			}

			// Two more ticks: the held commit is not written again.
			restored, starts := e.services3(t), len(e.events.of(notify.SyncStarted))
			last := st.LastReconcile
			for range 2 {
				refresh(t, ctrl)
				last = waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.LastReconcile.After(last) }).LastReconcile
			}
			if n := len(e.events.of(notify.SyncStarted)); n != starts {
				t.Errorf("the held commit was synced again: %d sync-started, want %d", n, starts)
			}
			for name, s := range e.services3(t) {
				if !unwritten(restored[name], s) {
					t.Errorf("service %s was written after the rollback", name)
				}
			}
			if tc.restart {
				// The hold is in the swarm: a controller that starts with
				// nothing of its own finds it and keeps the commit off.
				stop()
				ctrl = e.controller(t, apps)
				run(t, ctrl)
				st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.LastReconcile.After(last) && s.LastError != "" })
				if st.Held.Failed == nil || st.Held.Failed.Commit != bad || !strings.Contains(st.LastError, "held off") {
					t.Errorf("after a restart: hold %+v, error %q; want %s still held off", st.Held, st.LastError, bad)
				}
				if n := len(e.events.of(notify.SyncStarted)); n != starts {
					t.Errorf("the restarted controller synced the held commit: %d sync-started, want %d", n, starts)
				}
			}

			// A fix deploys at once: the refresh a webhook makes.
			fix := e.repo.Commit(t, "main", map[string]string{"compose.yaml": release3(e.v2, e.v2, e.v2, nil, tc.apiDeploy)})
			refresh(t, ctrl)
			waitRelease3(t, ctrl, fix)
			if st, _ := ctrl.Statuses().Get("web"); !st.Held.IsZero() || st.Cause.Known() {
				t.Errorf("after the fix: hold %+v, cause %+v; want both gone", st.Held, st.Cause)
			}
		})
	}
}

// refresh asks for a tick of web now, as a push webhook does.
func refresh(t *testing.T, ctrl *reconcile.Controller) {
	t.Helper()
	if err := ctrl.Refresh(t.Context(), "web"); err != nil {
		t.Fatal(err)
	}
}

// rollback: service (the default) is what Skep did before release
// rollbacks: the failed sync names its cause, and the services stay
// where the write left them; nothing is rolled back by Skep or held.
func TestServiceRollbackLeavesTheReleaseWhereTheWriteLeftIt(t *testing.T) {
	e := newEnv(t)
	first := e.repo.Commit(t, "main", map[string]string{"compose.yaml": release3(e.v1, e.v1, e.v1, nil, "")})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.rollbackApp("timeout: 60s")))})
	run(t, ctrl)
	waitRelease3(t, ctrl, first)
	before := e.services3(t)

	bad := e.repo.Commit(t, "main", map[string]string{"compose.yaml": release3(e.v2, e.v1, e.v2, []string{"exit", "1", "api: no database"}, "")})
	refresh(t, ctrl)
	st := waitStatus(t, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool { return s.Revision == bad && s.Cause.Known() })
	if !strings.Contains(st.Cause.String(), "_api: exit code 1") || !strings.Contains(st.LastError, "last log line: api: no database") {
		t.Errorf("status cause %q, error %q; want the api's exit code and last log line", st.Cause.String(), st.LastError)
	}
	if failed := e.events.of(notify.SyncFailed); len(failed) == 0 || !strings.Contains(failed[0].Cause, "last log line: api: no database") {
		t.Errorf("sync-failed events = %+v, want the cause in the first", failed)
	}
	if n := len(e.events.of(notify.ReleaseRolledBack)); n != 0 || !st.Held.IsZero() {
		t.Errorf("%d release-rolled-back events, hold %+v; want none under rollback: service", n, st.Held)
	}
	now := e.services3(t)
	if now["db"].Spec.TaskTemplate.ContainerSpec.Image != e.v2 || !unwritten(before["web"], now["web"]) {
		t.Errorf("db runs %s, web written %t; want db left on %s by the write and web (wave 1) untouched",
			now["db"].Spec.TaskTemplate.ContainerSpec.Image, !unwritten(before["web"], now["web"]), e.v2)
	}
}

// checkRolledBack checks what a release rollback of bad back to first
// left: one event naming the failing api and why, the services of wave 0
// on their earlier spec, web (wave 1) never written.
func checkRolledBack(t *testing.T, e *env, before map[string]*swarm.Service, bad, first string, cause []string) {
	t.Helper()
	events := e.events.of(notify.ReleaseRolledBack)
	if len(events) != 1 {
		t.Fatalf("release-rolled-back events = %+v, want one", events)
	}
	ev := events[0]
	for _, want := range cause {
		if !strings.Contains(ev.Cause, want) {
			t.Errorf("rollback event cause = %q, want it to say %q", ev.Cause, want)
		}
	}
	if ev.Revision != bad || !strings.Contains(ev.Message, bad[:12]) || !strings.Contains(ev.Message, first[:12]) {
		t.Errorf("rollback event = %+v, want it to name the failed %s and the restored %s", ev, bad, first)
	}
	failed := e.events.of(notify.SyncFailed)
	if !slices.ContainsFunc(failed, func(f notify.Event) bool { return f.Revision == bad && f.Cause == ev.Cause }) {
		t.Errorf("sync-failed events = %+v, want one for %s with the rollback's cause", failed, bad)
	}
	now := e.services3(t)
	for _, name := range []string{"db", "api"} {
		if !sameSpec(before[name], now[name]) {
			t.Errorf("service %s runs %s %v, want its earlier spec %s %v back", name, now[name].Spec.TaskTemplate.ContainerSpec.Image,
				now[name].Spec.TaskTemplate.ContainerSpec.Args, before[name].Spec.TaskTemplate.ContainerSpec.Image, before[name].Spec.TaskTemplate.ContainerSpec.Args)
		}
	}
	if !unwritten(before["web"], now["web"]) {
		t.Errorf("web, in wave 1, was written: %s", now["web"].Spec.TaskTemplate.ContainerSpec.Image)
	}
}

// webOnly is a one-service release: web on image, restarting after a
// second, with deploy additions.
func webOnly(image, extra, deploy string) string {
	return fmt.Sprintf("services:\n  web:\n    image: %s\n%s    deploy:\n      endpoint_mode: dnsrr\n      replicas: 1\n      restart_policy: {delay: 1s}\n%s",
		image, extra, deploy)
}

// runWebOnly runs a controller of an automated application whose sync
// waits up to timeout for health, and returns it once web runs healthy
// on v1. The application allows a constraint no node meets: these tests
// fail rollouts with one, which the placement check would refuse before
// the write (multinode.TestAReleaseNoNodeCanPlaceIsRefusedBeforeAnyWrite).
func (e *env) runWebOnly(t *testing.T, timeout string) *reconcile.Controller {
	t.Helper()
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": webOnly(e.v1, "", "")})
	app := e.rollbackApp("wait: true", "timeout: "+timeout) + "    allow:\n      unplaceable: [constraint]\n"
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(app))})
	run(t, ctrl)
	waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool { return s.Health == health.Healthy })
	return ctrl
}

// A rollout that fails names its own cause in the sync-failed event and
// the status, whatever the way it fails: an image no registry has, a
// constraint no node meets, a task the kernel kills for memory.
func TestEachFailedRolloutNamesItsOwnCause(t *testing.T) {
	cli := harness.RequireSwarm(t)
	reg := harness.StartRegistry(t)
	v1 := harness.TestImage(t, cli, harness.ImageOptions{Version: "v1"})
	for _, tc := range []struct {
		name, extra, deploy, image string
		cause                      []string
	}{
		{name: "an image the registry does not have", image: reg.Ref("skep-missing", "v1"),
			cause: []string{"_web: image not pulled", "skep-missing"}},
		{name: "a constraint no node meets", image: v1,
			deploy: "      placement: {constraints: [node.labels.skep-test-nowhere == yes]}\n",
			cause:  []string{"_web: cannot be placed (no suitable node"}},
		{name: "a task killed for memory", image: v1, extra: "    command: [eat, \"512\"]\n",
			deploy: "      resources: {limits: {memory: 32M}}\n",
			cause:  []string{"_web: killed for memory (OOM, exit code 137", "last log line: took "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctrl := e.runWebOnly(t, "30s")

			bad := e.repo.Commit(t, "main", map[string]string{"compose.yaml": webOnly(tc.image, tc.extra, tc.deploy)})
			refresh(t, ctrl)
			st := waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool { return s.Revision == bad && s.Cause.Known() })
			failed := e.events.of(notify.SyncFailed)
			i := slices.IndexFunc(failed, func(f notify.Event) bool { return f.Revision == bad })
			if i < 0 {
				t.Fatalf("sync-failed events = %+v, want one for %s", failed, bad)
			}
			for _, want := range tc.cause {
				if !strings.Contains(failed[i].Cause, want) || !strings.Contains(st.Cause.String(), want) {
					t.Errorf("event cause %q, status cause %q; want both to say %q", failed[i].Cause, st.Cause.String(), want)
				}
			}
		})
	}
}

// A new commit pushed while the rollout of the last one is failing (its
// task cannot be placed, which waits the whole health timeout out) is
// written within one reconcile of its webhook, not after the timeout; the
// failing sync ends naming its cause and that it was preempted.
func TestAFixPreemptsAFailingRollout(t *testing.T) {
	e := newEnv(t)
	ctrl := e.runWebOnly(t, "10m")

	bad := e.repo.Commit(t, "main", map[string]string{"compose.yaml": webOnly(e.v2, "",
		"      placement: {constraints: [node.labels.skep-test-nowhere == yes]}\n")})
	refresh(t, ctrl)
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		s, err := e.service(ctx, "web")
		if err != nil || s == nil {
			return false, fmt.Sprintf("web: %v", err)
		}
		tasks, err := e.cli.TaskList(ctx, swarm.TaskListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return slices.ContainsFunc(tasks, func(tk swarm.Task) bool {
			return tk.ServiceID == s.ID && tk.Status.State == swarm.TaskStatePending && tk.Status.Err != ""
		}), "no task of the bad commit waits for a node yet"
	})
	if st, _ := ctrl.Statuses().Get("web"); st.Phase != reconcile.PhaseApplying {
		t.Fatalf("phase = %s while the rollout fails, want the sync still waiting (applying)", st.Phase)
	}

	fix := e.repo.Commit(t, "main", map[string]string{"compose.yaml": webOnly(e.v2, "", "")})
	pushed := time.Now()
	refresh(t, ctrl)
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		return slices.ContainsFunc(e.events.of(notify.SyncStarted), func(s notify.Event) bool { return s.Revision == fix }), "the fix's sync has not started"
	})
	if took := time.Since(pushed); took > 45*time.Second {
		t.Errorf("the fix started %s after its webhook, want within one reconcile, not the 10m health timeout", took)
	}
	failed := e.events.of(notify.SyncFailed)
	i := slices.IndexFunc(failed, func(f notify.Event) bool { return f.Revision == bad })
	if i < 0 || !strings.Contains(failed[i].Message, "preempts") || !strings.Contains(failed[i].Cause, "cannot be placed") {
		t.Errorf("sync-failed events = %+v, want the bad commit's naming the preemption and the placement", failed)
	}
	e.waitImage(t, e.v2, 2*time.Minute)
	waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool { return s.DeployedRevision == fix && s.Health == health.Healthy })
}

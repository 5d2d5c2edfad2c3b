package multinode_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
)

// unplaceableCompose holds a service every node can run beside three no
// node can: a constraint on a zone no node is in, reservations larger
// than any node (the largest announce 2 CPUs), and an image built only
// for another platform.
const unplaceableCompose = `services:
  fine:
    image: ${IMAGE}
    deploy: {endpoint_mode: dnsrr, replicas: 1}
  zoned:
    image: ${IMAGE}
    deploy:
      endpoint_mode: dnsrr
      placement: {constraints: [node.labels.zone == c]}
  big:
    image: ${IMAGE}
    deploy:
      endpoint_mode: dnsrr
      resources: {reservations: {cpus: "8", memory: 64G}}
  foreign:
    image: ${FOREIGN}
    deploy: {endpoint_mode: dnsrr}
`

// pushForeign pushes to the cluster's registry an image built for
// linux/s390x, which no node of the cluster runs: an empty image whose
// config names the platform. No node ever pulls it.
func (e *env) pushForeign(t *testing.T, repo string) string {
	t.Helper()
	cfg, err := empty.Image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "s390x"
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ref := e.cl.Registry.Ref(repo, "v1")
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref
}

// TestAReleaseNoNodeCanPlaceIsRefusedBeforeAnyWrite: a constraint no node
// satisfies, reservations larger than every node and an image built for
// another platform are each refused, one line per service, before
// anything of the release is written (not even its placeable service);
// the refusal is raised once per commit, and skep app diff's plan says
// the same.
func TestAReleaseNoNodeCanPlaceIsRefusedBeforeAnyWrite(t *testing.T) {
	e := newEnv(t)
	img := e.image(t, "placement", "v1", harness.ImageOptions{})
	foreign := e.pushForeign(t, "placement-foreign")
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": unplaceableCompose, ".env": "IMAGE=" + img + "\nFOREIGN=" + foreign + "\n"})
	ctrl := e.controller(t, e.app("web"))
	st := waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool {
		return strings.Contains(s.LastError, "cannot be placed")
	})
	t.Logf("refusal: %s", st.LastError)
	want := []string{
		e.ns + `_big: reserves 8 CPUs, 64 GiB per task; no node ready and active has it free`,
		e.ns + `_foreign: the image is built for linux/s390x; the nodes ready and active run linux/amd64 (`,
		e.ns + `_zoned: constraint "node.labels.zone == c" matches none of the 5 ready, active nodes`,
	}
	lines := strings.Split(st.LastError, "\n")
	if len(lines) != 1+len(want) {
		t.Errorf("the refusal has %d lines, want a first one and one per service: %q", len(lines), lines)
	}
	for _, w := range want {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, w) }) {
			t.Errorf("no line of the refusal starts %q", w)
		}
	}
	if strings.Contains(st.LastError, "_fine") {
		t.Errorf("the refusal names the service that can be placed")
	}

	// Nothing written: no service, no revision, no sync started.
	if svcs := e.services(t); len(svcs) != 0 {
		t.Errorf("the release has services %v, want none written", svcs)
	}
	if revs, _ := ctrl.Revisions(t.Context(), "web", ""); len(revs) != 0 {
		t.Errorf("revisions %v recorded, want none", revs)
	}
	// Two more passes: the refusal stays, raised once for the commit.
	seen := st.LastReconcile
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.LastReconcile.After(seen.Add(10 * time.Second)) })
	if n := len(e.events.of(notify.SyncStarted)); n != 0 {
		t.Errorf("%d sync-started events, want none", n)
	}
	failed := e.events.of(notify.SyncFailed)
	if len(failed) != 1 || !strings.Contains(failed[0].Message, want[2]) {
		t.Errorf("sync-failed raised %d times, want once with the refusal:\n%s", len(failed), messages(failed))
	}

	// The dry run (skep app diff) says it too, the line of each service.
	plan, err := ctrl.Plan(t.Context(), "web", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Unplaceable) != len(want) {
		t.Errorf("the plan's unplaceable lines = %q, want %d", plan.Unplaceable, len(want))
	}
}

// TestAReleaseAllowedToBeUnplaceableIsWritten: allow.unplaceable lets the
// rule through: the release is written, and its task waits, pending.
func TestAReleaseAllowedToBeUnplaceableIsWritten(t *testing.T) {
	e := newEnv(t)
	img := e.image(t, "placement", "v1", harness.ImageOptions{})
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": `services:
  zoned:
    image: ${IMAGE}
    deploy:
      endpoint_mode: dnsrr
      placement: {constraints: [node.labels.zone == c]}
`, ".env": "IMAGE=" + img + "\n"})
	ctrl := e.controller(t, e.app("web")+"    allow: {unplaceable: [constraint]}\n")
	waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool { return s.Sync == reconcile.Synced })
	if _, ok := e.services(t)["zoned"]; !ok {
		t.Errorf("the allowed release wrote no service zoned")
	}
}

// TestATaskTheSchedulerCannotPlaceFailsTheWaitAtOnce: a rule the check
// before the write does not judge (a host-mode port on more replicas than
// nodes) leaves a task pending with the scheduler's refusal; the sync's
// wait for health fails at once with the scheduler's words, not at its
// timeout of five minutes.
func TestATaskTheSchedulerCannotPlaceFailsTheWaitAtOnce(t *testing.T) {
	e := newEnv(t)
	img := e.image(t, "placement", "v1", harness.ImageOptions{})
	port := 20000 + rand.IntN(10000)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": fmt.Sprintf(`services:
  web:
    image: ${IMAGE}
    ports: [{target: 8080, published: %d, mode: host}]
    deploy: {endpoint_mode: dnsrr, replicas: %d}
`, port, len(e.cl.Nodes)+1), ".env": "IMAGE=" + img + "\n"})
	ctrl := e.controller(t, e.appWith("web", "wait: true, "))
	// The status keeps the failure's cause until the release runs; its
	// last error is the last pass's, which a pass that finds the release
	// written (woken by its tasks starting) clears.
	st := waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool {
		return strings.Contains(s.Cause.String(), "cannot be placed")
	})
	started, failed := e.events.of(notify.SyncStarted), e.events.of(notify.SyncFailed)
	if len(started) == 0 || len(failed) == 0 {
		t.Fatalf("events: %s", messages(e.events.all()))
	}
	t.Logf("failure: %s", failed[0].Message)
	for _, said := range []string{failed[0].Message, st.Cause.String()} {
		if !strings.Contains(said, "no suitable node") || !strings.Contains(said, "host-mode port") {
			t.Errorf("the failure %q does not give the scheduler's words", said)
		}
	}
	if took := failed[0].At.Sub(started[0].At); took > time.Minute {
		t.Errorf("the sync failed %s after it started, want at once rather than at the timeout", took)
	}
}

// rebalanceCompose is two services of five replicas, each rolled all at
// once by its update_config, so that a rebalance takes seconds.
const rebalanceCompose = `services:
  api:
    image: ${IMAGE}
    deploy: {endpoint_mode: dnsrr, replicas: 5, update_config: {parallelism: 5}}
  worker:
    image: ${IMAGE}
    deploy: {endpoint_mode: dnsrr, replicas: 5, update_config: {parallelism: 5}}
`

// TestADrainedNodeBackIsRebalancedOnlyWhenAsked: two applications of the
// same services, one with rebalance: true. A worker drained, its tasks
// move; once it is active again, the one that rebalances is woken (its
// interval is minutes), rolls its services one after the other and its
// tasks spread back over every node, with an event naming the node and
// the services; the other's tasks stay where Swarm left them, nothing of
// it written.
func TestADrainedNodeBackIsRebalancedOnlyWhenAsked(t *testing.T) {
	e := newEnv(t)
	off := e.ns + "-off"
	e.cl.CleanupNetworks(t, off)
	harness.CleanupStack(t, e.engine.Client, off)
	img := e.image(t, "rebalance", "v1", harness.ImageOptions{})
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": rebalanceCompose, ".env": "IMAGE=" + img + "\n"})
	// Its interval is long: the node's return wakes it, no tick does.
	apps := e.appWith("on", "automated: true, interval: 3m, resolveImage: always") + "    rebalance: true\n" + fmt.Sprintf(`  - name: off
    release: %s
    source: {repo: %s, revision: main}
    driftDetection: live
    syncPolicy: {%s}
`, off, e.repo.URL, defaultPolicy)
	ctrl := e.controller(t, apps)
	for _, app := range []string{"on", "off"} {
		waitStatus(t, ctrl, app, 3*time.Minute, func(s reconcile.AppStatus) bool {
			return s.Sync == reconcile.Synced && s.Running == 10 && s.Desired == 10
		})
	}
	w1 := e.cl.Node(t, "skep-w1")
	e.cl.Drain(t, w1)
	services := e.servicesOf(t, e.ns, off)
	for _, name := range []string{"api", "worker"} {
		for _, ns := range []string{e.ns, off} {
			e.waitSpread(t, services[ns+"_"+name], func(c map[string]int) bool { return c[w1.Name] == 0 && sum(c) == 5 })
		}
	}
	before := e.servicesOf(t, off)
	drained := time.Now()
	e.cl.Activate(t, w1)

	harness.Eventually(t, 90*time.Second, func(context.Context) (bool, string) {
		evs := e.events.of(notify.TasksRebalanced)
		return len(evs) > 0 && strings.Contains(messages(evs), "_worker"), messages(evs)
	})
	evs := e.events.of(notify.TasksRebalanced)
	t.Logf("rebalanced: %s", messages(evs))
	for _, ev := range evs {
		if ev.Application != "on" || !strings.HasPrefix(ev.Message, w1.Name+" back") {
			t.Errorf("event %s of %s: %q, want of on, naming %s", ev.Type, ev.Application, ev.Message, w1.Name)
		}
	}
	if all := messages(evs); !strings.Contains(all, e.ns+"_api") || !strings.Contains(all, e.ns+"_worker") {
		t.Errorf("the events name not both services: %s", all)
	}
	for _, name := range []string{"api", "worker"} {
		e.waitSpread(t, services[e.ns+"_"+name], func(c map[string]int) bool {
			return len(c) == len(e.cl.Nodes) && sum(c) == 5
		})
	}
	// One at a time: the second roll started once the first had ended.
	after := e.servicesOf(t, e.ns)
	api, worker := after[e.ns+"_api"].UpdateStatus, after[e.ns+"_worker"].UpdateStatus
	if api == nil || worker == nil || api.CompletedAt == nil || worker.StartedAt == nil || worker.StartedAt.Before(*api.CompletedAt) {
		t.Errorf("rolls overlap: api %+v, worker %+v; want worker started after api completed", api, worker)
	}

	// The application without rebalance: two more passes, nothing moved.
	st, _ := ctrl.Statuses().Get("off")
	waitStatus(t, ctrl, "off", time.Minute, func(s reconcile.AppStatus) bool { return s.LastReconcile.After(st.LastReconcile.Add(10 * time.Second)) })
	for name, svc := range e.servicesOf(t, off) {
		if !unwritten(before[name], svc) {
			t.Errorf("service %s of the application without rebalance was written", name)
		}
		if c := e.perNode(t, svc); c[w1.Name] != 0 {
			t.Errorf("service %s runs %d tasks on %s back since %s, want Swarm to leave them where they were", name, c[w1.Name], w1.Name, drained.Format(time.TimeOnly))
		}
	}
}

// servicesOf returns the live services of the namespaces named, by full name.
func (e *env) servicesOf(t *testing.T, namespaces ...string) map[string]swarm.Service {
	t.Helper()
	list, err := e.engine.ServiceList(t.Context(), swarm.ServiceListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]swarm.Service{}
	for _, s := range list {
		if slices.Contains(namespaces, s.Spec.Labels["com.docker.stack.namespace"]) {
			out[s.Spec.Name] = s
		}
	}
	return out
}

// waitSpread waits until svc's running tasks per node satisfy cond.
func (e *env) waitSpread(t *testing.T, svc swarm.Service, cond func(map[string]int) bool) {
	t.Helper()
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		got, err := e.cl.TasksPerNode(ctx, svc.ID)
		if err != nil {
			return false, err.Error()
		}
		return cond(got), fmt.Sprintf("%s tasks per node %v", svc.Spec.Name, got)
	})
}

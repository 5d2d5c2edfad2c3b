package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/syncpass"
)

// canaryEnv is one canary test's swarm, git, Prometheus scraping the
// release's web tasks, and the port of the load client's counts.
type canaryEnv struct {
	*env
	prom     *harness.Prometheus
	loadPort uint32
}

// errorRatio is the analysis's query: the share of the canary version's
// answers that failed, over the last five seconds.
const errorRatio = `sum(rate(testapp_requests_total{version="v2",code="500"}[5s])) / sum(rate(testapp_requests_total{version="v2"}[5s]))`

// newCanaryEnv starts what a canary test needs beside a plain env.
func newCanaryEnv(t *testing.T) *canaryEnv {
	t.Helper()
	e := &canaryEnv{env: newEnv(t), loadPort: harness.FreePort(t)}
	e.prom = harness.StartPrometheus(t)
	e.prom.ScrapeTasks(t, e.cli, harness.TestAppPort, e.ns+"_web", e.ns+"_web-canary")
	return e
}

// analysis is an analysis step of the error ratio: failing at 10 %.
func (e *canaryEnv) analysis(interval string, count, failureLimit int) string {
	return fmt.Sprintf(`        - analysis:
            metrics:
              - name: errors
                initialDelay: 3s
                interval: %s
                count: %d
                failureLimit: %d
                failureCondition: result[0] >= 0.1
                prometheus:
                  address: %s
                  query: '%s'
`, interval, count, failureLimit, e.prom.URL, errorRatio)
}

// compose is the release: web, five replicas of image with errorRate of
// its answers failed, walking steps as its canary; load, the client
// asking tasks.web twenty times a second; and smoke, an analysis hook
// (a job metric) that passes.
func (e *canaryEnv) compose(image, errorRate, steps string) string {
	return fmt.Sprintf(`services:
  web:
    image: %s
    environment:
      TESTAPP_ERROR_RATE: "%s"
    deploy:
      endpoint_mode: dnsrr
      replicas: 5
      update_config: {parallelism: 5, order: start-first}
    ports:
      - {target: 8080, mode: host}
    x-skep-canary:
      steps:
%s  load:
    image: %s
    command: ["load"]
    environment:
      TESTAPP_TARGET: tasks.web:8080
      TESTAPP_RATE: "20"
    deploy:
      endpoint_mode: dnsrr
    ports:
      - {target: 8080, published: %d, mode: host}
  smoke:
    image: %s
    command: ["exit", "0", "smoke: tasks.web answers"]
    x-skep-hook: analysis
`, image, errorRate, steps, e.v1, e.loadPort, e.v1)
}

// deploy commits the release at v1 with steps as its canary and starts
// an automated controller, which it returns with its app set and what
// stops it, once the release runs at that commit.
func (e *canaryEnv) deploy(t *testing.T, steps string) (*reconcile.Controller, appset.Source, func()) {
	t.Helper()
	first := e.repo.Commit(t, "main", map[string]string{"compose.yaml": e.compose(e.v1, "0", steps)})
	apps := appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.app("web", true)))}
	ctrl := e.controller(t, apps)
	stop := runStoppable(t, ctrl)
	waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool { return s.DeployedRevision == first && s.Running == 6 })
	return ctrl, apps, stop
}

// loadCounts is what the load client counted so far.
type loadCounts struct {
	Versions map[string]int `json:"versions"`
	Failed   map[string]int `json:"failed"`
	Errors   int            `json:"errors"`
}

func (e *canaryEnv) counts(t *testing.T) loadCounts {
	t.Helper()
	var c loadCounts
	harness.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/stats", e.loadPort), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&c) == nil, "stats do not decode"
	})
	return c
}

// share is the share of answers by v2 between two counts, and how many.
func share(before, after loadCounts) (float64, int) {
	v1, v2 := after.Versions["v1"]-before.Versions["v1"], after.Versions["v2"]-before.Versions["v2"]
	if v1+v2 == 0 {
		return 0, 0
	}
	return float64(v2) / float64(v1+v2), v1 + v2
}

// replicas is the live replicas of the release's service name (short),
// -1 when it is not there.
func (e *canaryEnv) replicas(t *testing.T, name string) int {
	t.Helper()
	s, err := e.service(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if s == nil {
		return -1
	}
	return int(*s.Spec.Mode.Replicated.Replicas)
}

// canaries counts the canary services of the release in the swarm.
func (e *canaryEnv) canaries(t *testing.T) []swarm.Service {
	t.Helper()
	list, err := e.cli.ServiceList(t.Context(), swarm.ServiceListOptions{Filters: filters.NewArgs(
		filters.Arg("label", stack.LabelKind+"="+stack.KindCanary), filters.Arg("label", stack.LabelRelease+"="+e.ns))})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// waitCanary waits until the status's canary is at step (from 1) in
// phase, and checks there is one canary service at most.
func (e *canaryEnv) waitCanary(t *testing.T, ctrl *reconcile.Controller, timeout time.Duration, cond func(reconcile.Canary) bool) reconcile.Canary {
	t.Helper()
	var c reconcile.Canary
	harness.Eventually(t, timeout, func(context.Context) (bool, string) {
		st, _ := ctrl.Statuses().Get("web")
		c = st.Canary
		if n := len(e.canaries(t)); n > 1 {
			t.Fatalf("%d canary services run", n)
		}
		return cond(c), fmt.Sprintf("canary %+v; error %s", c, st.LastError)
	})
	return c
}

// checkWeight checks, at a weight in place, the replicas of the canary
// and the stable service, and the share of answers from the canary the
// load client got over four seconds, within 15 points of the weight.
func (e *canaryEnv) checkWeight(t *testing.T, weight, canary, stable int) {
	t.Helper()
	if got, want := [2]int{e.replicas(t, "web-canary"), e.replicas(t, "web")}, [2]int{canary, stable}; got != want {
		t.Errorf("weight %d: canary and stable replicas %v, want %v", weight, got, want)
	}
	before := e.counts(t)
	time.Sleep(4 * time.Second) // the load client's sample: 80 requests
	s, n := share(before, e.counts(t))
	t.Logf("weight %d: %.0f %% of %d answers from the canary", weight, 100*s, n)
	if n < 40 || s < float64(weight-15)/100 || s > float64(weight+15)/100 {
		t.Errorf("weight %d: %.0f %% of %d answers came from the canary, want %d %% ± 15", weight, 100*s, n, weight)
	}
}

// A good version walks every step to its promotion: each weight in place
// by replicas (one and four of five at 20 %, three and two at 60 %) and
// by the share of answers DNS round robin gives the canary, its analysis
// measured from Prometheus, then the stable service takes the canary's
// spec and the canary goes.
func TestCanaryOfAGoodVersionWalksEveryStepToPromotion(t *testing.T) {
	e := newCanaryEnv(t)
	smoke := "              - {name: smoke, job: smoke}\n"
	steps := "        - setWeight: 20\n" + e.analysis("2s", 3, 1) + smoke + "        - setWeight: 60\n        - pause: 6s\n"
	ctrl, _, _ := e.deploy(t, steps)
	if got := e.counts(t); got.Versions["v1"] == 0 {
		t.Fatalf("the load client got no answer: %+v", got)
	}

	good := e.repo.Commit(t, "main", map[string]string{"compose.yaml": e.compose(e.v2, "0", steps)})
	refresh(t, ctrl)
	c := e.waitCanary(t, ctrl, time.Minute, func(c reconcile.Canary) bool { return c.Commit == good && c.Step == 2 })
	if c.Weight != 20 || c.Steps != 4 || c.StepName != "analysis errors, smoke" {
		t.Errorf("canary at its analysis: %+v", c)
	}
	e.checkWeight(t, 20, 1, 4)
	// The job metric ran its Swarm job once; exit code 0 passed it.
	c = e.waitCanary(t, ctrl, time.Minute, func(c reconcile.Canary) bool {
		return c.Step > 2 || len(c.Analysis) == 2 && c.Analysis[1].Phase == "successful"
	})
	if c.Step == 2 && (c.Analysis[1].Count != 1 || c.Analysis[1].Measurements[0].Value != "0") {
		t.Errorf("the smoke job's run: %+v", c.Analysis[1])
	}
	c = e.waitCanary(t, ctrl, time.Minute, func(c reconcile.Canary) bool { return c.Step == 3 })
	if r := c.Analysis; len(r) != 0 {
		t.Errorf("a new step keeps the analysis %+v", r)
	}
	e.waitCanary(t, ctrl, time.Minute, func(c reconcile.Canary) bool { return c.Step == 4 && c.Weight == 60 })
	e.checkWeight(t, 60, 3, 2)

	c = e.waitCanary(t, ctrl, 2*time.Minute, func(c reconcile.Canary) bool { return c.Phase == syncpass.CanaryPromoted })
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.DeployedRevision == good && s.Running == 6 })
	web, err := e.service(t.Context(), "web")
	if err != nil || web == nil {
		t.Fatal(web, err)
	}
	if img := web.Spec.TaskTemplate.ContainerSpec.Image; img != e.v2 || *web.Spec.Mode.Replicated.Replicas != 5 {
		t.Errorf("stable after the promotion runs %s with %d replicas, want %s with 5", img, *web.Spec.Mode.Replicated.Replicas, e.v2)
	}
	if n := len(e.canaries(t)); n != 0 {
		t.Errorf("%d canaries after the promotion, want none", n)
	}
	if len(e.events.of(notify.CanaryPromoted)) != 1 || len(e.events.of(notify.CanaryAborted)) != 0 {
		t.Errorf("canary-promoted %d, canary-aborted %d; want one promotion", len(e.events.of(notify.CanaryPromoted)), len(e.events.of(notify.CanaryAborted)))
	}
	if n := len(e.events.of(notify.CanaryStep)); n != 4 {
		t.Errorf("%d canary-step events, want 4 (the start and three steps begun)", n)
	}
	t.Logf("promoted: %+v; status %s", c, st.Sync)
}

// A bad version (every answer of it failing) aborts within interval ×
// failureLimit of its first measurement, plus one reconcile; the stable
// service is as it was, the canary is gone, and the commit is held: later
// ticks start nothing, until a new commit starts a canary again.
func TestCanaryOfABadVersionAbortsAndHoldsItsCommit(t *testing.T) {
	e := newCanaryEnv(t)
	steps := "        - setWeight: 20\n" + e.analysis("2s", 5, 1) + "        - setWeight: 100\n"
	ctrl, _, _ := e.deploy(t, steps)
	first := e.repo.Head(t, "main")
	before, err := e.service(t.Context(), "web")
	if err != nil || before == nil {
		t.Fatal(before, err)
	}

	bad := e.repo.Commit(t, "main", map[string]string{"compose.yaml": e.compose(e.v2, "1", steps)})
	refresh(t, ctrl)
	c := e.waitCanary(t, ctrl, 2*time.Minute, func(c reconcile.Canary) bool { return c.Phase == syncpass.CanaryAborted })
	aborted := e.events.of(notify.CanaryAborted)
	if len(aborted) != 1 || !strings.Contains(aborted[0].Cause, "analysis failed: metric errors") || aborted[0].Revision != bad {
		t.Fatalf("canary-aborted events %+v, want one naming the failed metric", aborted)
	}
	var failed []time.Time
	for _, r := range c.Analysis {
		for _, m := range r.Measurements {
			t.Logf("measurement %s: %s %s %s", m.At.Format(time.TimeOnly), m.Phase, m.Value, m.Error)
			if m.Phase == "failed" {
				failed = append(failed, m.At)
			}
		}
	}
	// failureLimit 1: the second failure aborts, one interval after the first.
	if len(failed) == 0 {
		t.Fatal("no failed measurement")
	}
	took := aborted[0].At.Sub(failed[0])
	t.Logf("aborted %s after the first failed measurement", took)
	if len(failed) != 2 || took > 2*time.Second+5*time.Second {
		t.Errorf("aborted %s after the first failed measurement, with %d failures; want 2 failures within 2s × 1 + one reconcile", took, len(failed))
	}
	after, err := e.service(t.Context(), "web")
	// It lent the canary a task and has it back: its spec is as it was.
	if err != nil || after == nil || !reflect.DeepEqual(after.Spec, before.Spec) {
		t.Errorf("the stable service after the abort: %+v, want the spec it ran before", after)
	}
	if n := len(e.canaries(t)); n != 0 {
		t.Errorf("%d canaries after the abort, want none", n)
	}
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
		return s.Held.Failed != nil && strings.Contains(s.LastError, "held off")
	})
	if st.Held.Failed.Commit != bad || st.DeployedRevision != first {
		t.Errorf("hold %+v, deployed %s; want %s held off, %s deployed", st.Held.Failed, st.DeployedRevision, bad, first)
	}

	starts, last := len(e.events.of(notify.SyncStarted)), st.LastReconcile
	for range 2 {
		refresh(t, ctrl)
		last = waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.LastReconcile.After(last) }).LastReconcile
	}
	if n := len(e.events.of(notify.SyncStarted)); n != starts || len(e.canaries(t)) != 0 {
		t.Errorf("the held commit started again: %d sync-started, want %d", n, starts)
	}
	fix := e.repo.Commit(t, "main", map[string]string{"compose.yaml": e.compose(e.v2, "0", steps)})
	refresh(t, ctrl)
	e.waitCanary(t, ctrl, time.Minute, func(c reconcile.Canary) bool { return c.Commit == fix && c.Phase == syncpass.CanaryProgressing })
}

// A controller stopped while its canary pauses, and another started in
// its place on an empty memory, carries on at the step the canary's
// service records: same canary, same step begun at the same instant, no
// second start, and on to the promotion.
func TestCanaryResumesAtItsStepAfterTheControllerIsReplaced(t *testing.T) {
	e := newCanaryEnv(t)
	steps := "        - setWeight: 40\n        - pause: 20s\n        - setWeight: 80\n"
	ctrl, apps, stop := e.deploy(t, steps)

	good := e.repo.Commit(t, "main", map[string]string{"compose.yaml": e.compose(e.v2, "0", steps)})
	refresh(t, ctrl)
	paused := e.waitCanary(t, ctrl, time.Minute, func(c reconcile.Canary) bool { return c.Commit == good && c.Step == 2 })
	running := e.canaries(t)
	stop()

	next := e.controller(t, apps)
	run(t, next)
	resumed := e.waitCanary(t, next, time.Minute, func(c reconcile.Canary) bool { return c.Phase != "" })
	if resumed.Step != 2 || !resumed.Since.Equal(paused.Since) || !resumed.Started.Equal(paused.Started) {
		t.Errorf("the new controller's canary %+v, want step 2 begun at %s as recorded", resumed, paused.Since)
	}
	if now := e.canaries(t); len(now) != 1 || now[0].ID != running[0].ID {
		t.Errorf("canaries %v after the restart, want the one that ran (%s)", now, running[0].ID)
	}
	e.waitCanary(t, next, 2*time.Minute, func(c reconcile.Canary) bool { return c.Phase == syncpass.CanaryPromoted })
	starts := 0
	for _, ev := range e.events.of(notify.CanaryStep) {
		if strings.Contains(ev.Message, " started") {
			starts++
		}
	}
	if starts != 1 {
		t.Errorf("the canary started %d times, want once", starts)
	}
	waitStatus(t, next, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.DeployedRevision == good })
}

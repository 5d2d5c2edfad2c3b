package cli_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/wire"
)

// canaryCompose is web, two replicas of image, whose canary puts half of
// them on the new spec and waits for someone.
func canaryCompose(image string) string {
	return fmt.Sprintf(`services:
  web:
    image: %s
    deploy:
      endpoint_mode: dnsrr
      replicas: 2
      update_config: {parallelism: 2, order: start-first}
    x-skep-canary:
      steps:
        - setWeight: 50
        - pause: {}
`, image)
}

// waitApp waits until the application, as skep app get -o json shows it,
// meets cond.
func (e *cliEnv) waitApp(t *testing.T, timeout time.Duration, cond func(wire.Application) bool) wire.Application {
	t.Helper()
	var a wire.Application
	harness.Eventually(t, timeout, func(context.Context) (bool, string) {
		a = e.appJSON(t).Application
		return cond(a), fmt.Sprintf("application %+v, canary %+v", a.Name, a.Canary)
	})
	return a
}

// The manual controls of a canary, from the CLI: a sync starts it (on an
// application that is not automated), it pauses until someone acts, a
// controller killed meanwhile finds it at its step, `skep app get` shows
// it, `skep app promote` gives the stable service its spec and `skep app
// abort` removes it and holds its commit, each attributed to whoever
// asked; without a canary both fail.
func TestCLIPromotesAndAbortsACanary(t *testing.T) {
	e := startController(t)
	events := e.follow(t)
	first := e.repo.Commit(t, "main", map[string]string{"compose.yaml": canaryCompose(e.v1)})
	e.ok(t, "app", "sync", "web")
	e.waitApp(t, 2*time.Minute, func(a wire.Application) bool { return a.DeployedRevision == first && a.Services.Running == 2 })
	if _, errOut, code := e.run(t, e.env, "app", "promote", "web"); code != 1 || !strings.Contains(errOut, "no canary runs") {
		t.Errorf("promote without a canary exited %d: %s; want 1 saying no canary runs", code, errOut)
	}

	second := e.repo.Commit(t, "main", map[string]string{"compose.yaml": canaryCompose(e.v2)})
	e.ok(t, "app", "sync", "web")
	a := e.waitApp(t, time.Minute, func(a wire.Application) bool {
		return a.Canary != nil && a.Canary.Revision == second && a.Canary.Phase == wire.CanaryPaused
	})
	if c := a.Canary; c.Step != 2 || c.StepName != "pause until promoted" || c.Weight != 50 || c.Replicas != 1 || c.StableReplicas != 1 {
		t.Errorf("paused canary %+v, want step 2 at weight 50, one task each", c)
	}
	// Killed mid-step, and started again on its data: the canary is where
	// the swarm records it, not started over.
	e.kill()
	launch(t, e, filepath.Dir(e.apps), e.apps, "--appset-interval", "2s")
	events = e.follow(t)
	resumed := e.waitApp(t, time.Minute, func(a wire.Application) bool { return a.Canary != nil && a.Canary.Phase == wire.CanaryPaused })
	if c := resumed.Canary; c.Revision != second || c.Step != 2 || !c.Since.Equal(a.Canary.Since) || !c.Started.Equal(a.Canary.Started) {
		t.Errorf("after the kill the canary is %+v, want step 2 begun at %s as before", c, a.Canary.Since)
	}
	got := e.ok(t, "app", "get", "web")
	words := strings.Join(strings.Fields(got), " ")
	for _, want := range []string{"Canary:", "Phase: paused", "pause until promoted", "Weight: 50%: 1 canary and 1 stable tasks of 2"} {
		if !strings.Contains(words, want) {
			t.Errorf("skep app get lacks %q:\n%s", want, got)
		}
	}
	if out := e.ok(t, "app", "promote", "web"); !strings.Contains(out, "web: promotion of the canary at "+second[:12]+" queued") {
		t.Errorf("skep app promote said %q", out)
	}
	a = e.waitApp(t, 2*time.Minute, func(a wire.Application) bool {
		return a.Canary.Phase == wire.CanaryPromoted && a.DeployedRevision == second
	})
	if img := liveImage(e.appJSON(t)); img != e.v2 || a.Canary.Message != "promoted by request" {
		t.Errorf("after the promotion web runs %s (%s), want %s", img, a.Canary.Message, e.v2)
	}

	third := e.repo.Commit(t, "main", map[string]string{"compose.yaml": canaryCompose(e.v1)})
	e.ok(t, "app", "sync", "web")
	e.waitApp(t, time.Minute, func(a wire.Application) bool {
		return a.Canary.Revision == third && a.Canary.Phase == wire.CanaryPaused
	})
	e.ok(t, "app", "abort", "web")
	a = e.waitApp(t, time.Minute, func(a wire.Application) bool { return a.Canary.Phase == wire.CanaryAborted && a.RolledBack != nil })
	if a.RolledBack.Revision != third || a.DeployedRevision != second || a.Canary.Message != "aborted by request" {
		t.Errorf("after the abort: held off %+v, deployed %s, canary %+v; want %s held off, %s deployed", a.RolledBack, a.DeployedRevision, a.Canary, third, second)
	}
	if img := liveImage(e.appJSON(t)); img != e.v2 {
		t.Errorf("after the abort web runs %s, want %s as before", img, e.v2)
	}
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		seen := map[string]bool{}
		for _, ev := range events.events() {
			if ev["actor"] == "admin" {
				seen[fmt.Sprint(ev["type"])] = true
			}
		}
		return seen["canary-promoted"] && seen["canary-aborted"], fmt.Sprintf("events by admin: %v", seen)
	})
}

package cli_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/harness"
)

// The Engine is restarted only on the second swarm: the main one is shared
// with every other test.
func TestFaultDaemonRestartedMidApplyConverges(t *testing.T) {
	slowFault(t)
	s2 := harness.RequireSwarm2(t)
	sock, ok := strings.CutPrefix(s2.Sock, "unix://")
	if !ok {
		t.Fatalf("second swarm socket %q is not unix://", s2.Sock)
	}
	e := newFaultEnvAt(t, s2.Client, sock, "two")
	data := filepath.Join(e.dir, "data")
	first := e.repo.Head(t, "main")
	e.startController(t, data)
	e.waitConverged(t, first, e.v1, 2*time.Minute)
	handMade := e.handMade(t, e.ns, "handmade")
	bystander := e.handMade(t, e.ns+"-hm", "web")

	events := e.followEvents(t)
	e.proxy.slow(time.Second)
	base := e.proxy.writes.Load()
	second := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
	e.cli.ok(t, "app", "refresh", "stack")
	waitEvent(t, events, "sync-started", second, time.Minute)
	e.proxy.waitWrites(t, base, 2)
	// The Engine stops under the apply (swarm2-down takes 10-15s with
	// tasks running) and starts again with the same swarm.
	s2.Stop(t)
	t.Run("while the Engine is away the application is unknown and the failed write is said", func(t *testing.T) {
		waitEvent(t, events, "swarm-unreachable", "", time.Minute)
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			a := e.app(t).Application
			return a.Health == "unknown" && strings.Contains(a.HealthMessage+a.LastError, `swarm "two"`),
				fmt.Sprintf("%s: %s / %s", a.Health, a.HealthMessage, a.LastError)
		})
		var failed []string
		for _, ev := range events.events() {
			if ev["type"] == "sync-failed" {
				failed = append(failed, fmt.Sprint(ev["message"]))
			}
		}
		if len(failed) != 1 || !strings.Contains(failed[0], "apply "+e.ns) {
			t.Errorf("sync-failed events %q, want one naming the apply of %s", failed, e.ns)
		}
	})

	e.proxy.slow(0)
	s2.Start(t)
	t.Run("once it is back the upgrade completes, once, and nothing else moved", func(t *testing.T) {
		waitEvent(t, events, "swarm-reachable", "", time.Minute)
		e.anyHealth = true
		objs := e.waitConverged(t, second, e.v2, 3*time.Minute)
		// Every task runs again, whatever health says of the failures
		// the stop left in its window.
		harness.Eventually(t, 2*time.Minute, func(context.Context) (bool, string) {
			a := e.app(t).Application
			return a.Services.Running == a.Services.Desired && a.Services.Desired >= faultServices,
				fmt.Sprintf("%d/%d running (%s: %s)", a.Services.Running, a.Services.Desired, a.Health, a.HealthMessage)
		})
		e.checkObjects(t, objs, 2, handMade)
		if s, err := harness.ServiceNamed(t.Context(), s2.Client, bystander); err != nil || s == nil {
			t.Errorf("the hand-made service of another stack is gone (%v)", err)
		}
		h := e.history(t)
		if len(h.Releases) != 1 || len(h.Releases[0].Revisions) != 2 || h.Releases[0].Revisions[1].Commit != second {
			t.Errorf("history releases %+v, want revisions 1 and 2, the second at %.12s", h.Releases, second)
		}
		// The first sync, the one the restart broke (failed), the one that
		// completed it; retries while the Engine was away write no sync.
		if got := syncsOf(h); !slices.Equal(got, []string{"succeeded", "failed", "succeeded"}) {
			t.Errorf("sync history %v, want [succeeded failed succeeded]", got)
		}
		for _, typ := range []string{"resources-pruned", "prune-failed"} {
			if evs := e.events(t, typ); len(evs) > 0 {
				t.Errorf("%s events around a daemon restart: %+v", typ, evs)
			}
		}
	})
}

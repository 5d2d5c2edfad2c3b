package cli_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/skep-cd/skep/harness"
)

// mainSocket is the path of the main swarm's Engine socket, as the harness
// finds it (DOCKER_HOST, else the default).
func mainSocket(t *testing.T) string {
	t.Helper()
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		return "/var/run/docker.sock"
	}
	path, ok := strings.CutPrefix(host, "unix://")
	if !ok {
		t.Skipf("DOCKER_HOST %s is not a unix socket; the fault suite proxies one", host)
	}
	return path
}

func TestFaultControllerKilledMidApplyLosesNothing(t *testing.T) {
	docker := harness.RequireSwarm(t)
	e := newFaultEnv(t, docker, mainSocket(t))
	data := filepath.Join(e.dir, "data")
	first := e.repo.Head(t, "main")
	bystander := e.handMade(t, e.ns+"-hm", "web")

	t.Run("killed during the install, restarted on its data: one install, one revision", func(t *testing.T) {
		// A second per service write: the install takes six seconds, and
		// the kill lands within one of its start.
		e.proxy.slow(time.Second)
		e.writeApps(t, "")
		ctl := e.startController(t, data)
		events := e.followEvents(t)
		base := e.proxy.writes.Load()
		e.writeApps(t, "main")
		waitEvent(t, events, "sync-started", first, time.Minute)
		// Two services in: the kill lands in the middle of the writes.
		e.proxy.waitWrites(t, base, 2)
		ctl.kill(t)
		objs, err := listObjects(t.Context(), docker, e.ns)
		if err != nil {
			t.Fatal(err)
		}
		if len(objs.services) == 0 || len(objs.services) == faultServices || len(objs.revisions) > 0 {
			t.Fatalf("the kill did not come mid-install (%d services, revisions %v): the case tests nothing", len(objs.services), objs.revisions)
		}
		t.Logf("killed with %d of %d services created", len(objs.services), faultServices)

		e.proxy.slow(0)
		e.startController(t, data)
		objs = e.waitConverged(t, first, e.v1, 2*time.Minute)
		e.checkObjects(t, objs, 1)
		h := e.history(t)
		if len(h.Releases) != 1 || len(h.Releases[0].Revisions) != 1 || h.Releases[0].Revisions[0].Commit != first {
			t.Errorf("history releases %+v, want revision 1 at %.12s", h.Releases, first)
		}
		// The sync the kill cut short is closed as interrupted by the next.
		if got := syncsOf(h); !slices.Equal(got, []string{"interrupted", "succeeded"}) {
			t.Errorf("sync history %v, want [interrupted succeeded]", got)
		}
	})

	handMade := e.handMade(t, e.ns, "handmade")
	second := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
	var untouched map[string]string // services already at v2 when the kill came, by writeMark
	t.Run("killed during an upgrade, restarted on its data: the rest is upgraded, nothing rewritten", func(t *testing.T) {
		// The controller from the subtest above still runs; a new one on the
		// same data takes over after this one is killed mid-upgrade.
		e.proxy.slow(time.Second)
		events := e.followEvents(t)
		base := e.proxy.writes.Load()
		e.cli.ok(t, "app", "refresh", "stack")
		waitEvent(t, events, "sync-started", second, time.Minute)
		e.proxy.waitWrites(t, base, 2)
		killRunning(t, e)
		objs := settled(t, docker, e.ns)
		untouched = map[string]string{}
		for name, s := range objs.services {
			if s.Spec.TaskTemplate.ContainerSpec.Image == e.v2 {
				untouched[name] = writeMark(s)
			}
		}
		if len(untouched) == 0 || len(untouched) == faultServices || len(objs.revisions) != 1 {
			t.Fatalf("the kill did not come mid-upgrade (%d services at v2, revisions %v): the case tests nothing", len(untouched), objs.revisions)
		}
		t.Logf("killed with %d of %d services upgraded", len(untouched), faultServices)

		e.proxy.slow(0)
		e.startController(t, data)
		objs = e.waitConverged(t, second, e.v2, 2*time.Minute)
		e.checkObjects(t, objs, 2, handMade)
		for name, mark := range untouched {
			if got := writeMark(objs.services[name]); got != mark {
				t.Errorf("%s was written again after the restart (spec %s → %s)", name, mark, got)
			}
		}
		h := e.history(t)
		if len(h.Releases) != 1 || len(h.Releases[0].Revisions) != 2 || h.Releases[0].Revisions[1].Commit != second {
			t.Errorf("history releases %+v, want revisions 1 and 2, the second at %.12s", h.Releases, second)
		}
		if got := syncsOf(h); !slices.Equal(got, []string{"interrupted", "succeeded", "interrupted", "succeeded"}) {
			t.Errorf("sync history %v, want [interrupted succeeded interrupted succeeded]", got)
		}
	})

	var third string
	t.Run("killed after the revision, while the sync waits for health: the history does not keep it running", func(t *testing.T) {
		e.wait = true
		e.reloadApps(t, "main")
		events := e.followEvents(t)
		third = e.repo.Commit(t, "main", map[string]string{"settings.txt": "two\n"})
		e.cli.ok(t, "app", "refresh", "stack")
		waitEvent(t, events, "sync-started", third, time.Minute)
		harness.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
			objs, err := listObjects(ctx, docker, e.ns)
			if err != nil {
				return false, err.Error()
			}
			return len(objs.revisions) == 3, fmt.Sprintf("revisions %v", objs.revisions)
		})
		for _, ev := range events.events() {
			if ev["type"] == "sync-succeeded" && ev["revision"] == third {
				t.Fatal("the sync ended before the kill: the case tests nothing")
			}
		}
		killRunning(t, e)
		e.startController(t, data)
		e.waitConverged(t, third, e.v2, 2*time.Minute)
		h := e.history(t)
		if len(h.Syncs) == 0 || h.Syncs[0].Revision != third || h.Syncs[0].Outcome != "interrupted" || h.Syncs[0].FinishedAt == nil {
			t.Errorf("newest sync %+v, want the one at %.12s interrupted, with an end", h.Syncs[:min(1, len(h.Syncs))], third)
		}
		// The restarted controller prunes the settings config the third
		// commit replaced, and tells it once: a second prune on a snapshot
		// that still shows the config finds it gone and tells nothing.
		if evs := e.events(t, "resources-pruned"); len(evs) != 1 {
			t.Errorf("resources-pruned events %+v, want one, for the replaced settings config", evs)
		}
	})

	t.Run("restarted on an empty data directory: a no-op that keeps everything", func(t *testing.T) {
		before, err := listObjects(t.Context(), docker, e.ns)
		if err != nil {
			t.Fatal(err)
		}
		e.current.stop(t, syscall.SIGTERM, 30*time.Second)
		start := time.Now()
		e.startController(t, filepath.Join(e.dir, "empty"))
		// Two reconciles at least (the interval is 10s), so that a
		// correction or a prune would have happened.
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			a := e.app(t).Application
			return a.Sync == "synced" && a.LastReconcile != nil && a.LastReconcile.After(start.Add(12*time.Second)),
				fmt.Sprintf("%s, last reconcile %v", a.Sync, a.LastReconcile)
		})
		after := e.waitConverged(t, third, e.v2, time.Minute)
		e.checkObjects(t, after, 3, handMade)
		if b, a := versions(before), versions(after); !maps.Equal(b, a) {
			t.Errorf("services written by a restart with nothing to do: before %v, after %v", b, a)
		}
		for _, typ := range []string{"sync-started", "resources-pruned", "drift-converged"} {
			if evs := e.events(t, typ); len(evs) > 0 {
				t.Errorf("%s events after a restart with nothing to do: %+v", typ, evs)
			}
		}
		if h := e.history(t); len(h.Releases) != 1 || len(h.Releases[0].Revisions) != 3 {
			t.Errorf("history from the swarm after losing the data directory: %+v, want revisions 1 to 3", h.Releases)
		}
		if s, err := harness.ServiceNamed(t.Context(), docker, bystander); err != nil || s == nil {
			t.Errorf("the hand-made service of another stack is gone (%v)", err)
		}
	})
}

// killRunning SIGKILLs the controller started last.
func killRunning(t *testing.T, e *faultEnv) {
	t.Helper()
	if e.current == nil {
		t.Fatal("no controller running")
	}
	e.current.kill(t)
}

// settled waits until no service of ns has a rollout in progress (Swarm
// writes the update's state into the service, raising its version) and
// returns the release's objects.
func settled(t *testing.T, docker *client.Client, ns string) objects {
	t.Helper()
	var objs objects
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		var err error
		if objs, err = listObjects(ctx, docker, ns); err != nil {
			return false, err.Error()
		}
		for name, s := range objs.services {
			if s.UpdateStatus != nil && s.UpdateStatus.State == swarm.UpdateStateUpdating {
				return false, name + " still updating"
			}
		}
		return true, ""
	})
	return objs
}

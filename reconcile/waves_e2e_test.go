package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	skepswarm "github.com/skep-cd/skep/swarm"
)

// twoWaves is a stack of a db in wave 0 and a web in wave 1.
func twoWaves(dbImage, webImage string) string {
	return fmt.Sprintf(`services:
  db:
    image: %s
    x-skep-wave: 0
    deploy: {endpoint_mode: dnsrr, replicas: 1}
  web:
    image: %s
    x-skep-wave: 1
    deploy: {endpoint_mode: dnsrr, replicas: 1}
`, dbImage, webImage)
}

// firstRunning returns when the first task of service on image reached
// running (with a HEALTHCHECK, Swarm reports running once it is healthy).
func (e *env) firstRunning(t *testing.T, service swarm.Service, image string) time.Time {
	t.Helper()
	tasks, err := e.cli.TaskList(t.Context(), swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", service.ID))})
	if err != nil {
		t.Fatal(err)
	}
	var first time.Time
	for _, tk := range tasks {
		if tk.Spec.ContainerSpec.Image == image && tk.Status.State == swarm.TaskStateRunning && (first.IsZero() || tk.Status.Timestamp.Before(first)) {
			first = tk.Status.Timestamp
		}
	}
	return first
}

// Wave 1 is created only once wave 0 runs healthy (the swarm's own
// timestamps say so), and a wave 0 that does not get healthy fails the
// sync naming it and leaves wave 1 as it was.
func TestWavesApplyInOrderAndAFailingWaveStopsTheNext(t *testing.T) {
	e := newEnv(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": twoWaves(e.v1, e.v1)})
	// The health timeout leaves a loaded two-core machine room to start
	// the healthy db (15s was seen too short in CI); the sick one still
	// fails well inside the wait below.
	app := strings.Replace(e.app("web", true), "      resolveImage: never\n", "      resolveImage: never\n      timeout: 45s\n", 1)
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(app))})
	run(t, ctrl)

	web := waitService(t, e, e.ns+"_web", e.v1)
	db, err := e.serviceNamed(t, e.ns+"_db")
	if err != nil || db == nil {
		t.Fatalf("db: %v, %v", db, err)
	}
	if healthy := e.firstRunning(t, *db, e.v1); healthy.IsZero() || web.CreatedAt.Before(healthy) {
		t.Errorf("web (wave 1) created at %s, db (wave 0) running since %s: want web after db was healthy", web.CreatedAt, healthy)
	}
	if web.Spec.Labels["io.skep.wave"] != "1" {
		t.Errorf("web's labels = %v, want io.skep.wave=1", web.Spec.Labels)
	}
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Sync == reconcile.Synced && s.LastError == "" })
	if got := e.events.of(notify.SyncSucceeded); len(got) != 1 || !strings.Contains(got[0].Message, "2 created") {
		t.Errorf("sync-succeeded events = %+v, want one saying 2 created", got)
	}

	// Wave 0 moves to an image that never gets healthy while wave 1 asks
	// for v2: the sync fails at wave 0 and web keeps running v1.
	web = waitService(t, e, e.ns+"_web", e.v1)
	sick := harness.TestImage(t, e.cli, harness.ImageOptions{Version: "sick", Unhealthy: true})
	broken := e.repo.Commit(t, "main", map[string]string{"compose.yaml": twoWaves(sick, e.v2)})
	st := waitStatus(t, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool { return s.Revision == broken && s.LastError != "" })
	if !strings.Contains(st.LastError, "wave 0: ") {
		t.Errorf("status error = %q, want it to name wave 0", st.LastError)
	}
	if failed := e.events.of(notify.SyncFailed); len(failed) == 0 || !strings.Contains(failed[len(failed)-1].Message, "wave 0: ") {
		t.Errorf("sync-failed events = %+v, want the last to name wave 0", failed)
	}
	if s, err := e.serviceNamed(t, e.ns+"_web"); err != nil || s == nil || s.Spec.TaskTemplate.ContainerSpec.Image != e.v1 || !unwritten(web, s) {
		t.Errorf("wave 1 was touched after wave 0 failed: %v, %v", s, err)
	}
}

// ownEvents passes on only the events about namespace ns: the test's
// snapshot relists on its own objects' events, as on a swarm of its own,
// whatever else the shared swarm runs.
type ownEvents struct {
	skepswarm.Reader
	ns string
}

func (o ownEvents) Events(ctx context.Context, opts events.ListOptions) (<-chan events.Message, <-chan error) {
	msgs, errs := o.Reader.Events(ctx, opts)
	out := make(chan events.Message)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-msgs:
				if !o.mine(m) {
					continue
				}
				select {
				case out <- m:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, errs
}

func (o ownEvents) mine(m events.Message) bool {
	for _, v := range m.Actor.Attributes {
		if v == o.ns || strings.HasPrefix(v, o.ns+"_") {
			return true
		}
	}
	return false
}

// slowWaves is twoWaves with a db that reports healthy only some seconds
// after it starts.
func slowWaves(dbImage, webImage string) string {
	return strings.Replace(twoWaves(dbImage, webImage), "    x-skep-wave: 0\n",
		"    x-skep-wave: 0\n    environment: {TESTAPP_HEALTHY_AFTER: 4s}\n", 1)
}

// A wave whose service turns healthy a few seconds after it starts lets the
// next wave go as soon as the swarm knows, though no event says so (a
// task's starting → running raises none) and no resync comes within the
// timeout; and a later sync whose wave 0 is already in place, so that it
// writes nothing and raises no event, goes on to wave 1 without waiting
// for a write.
func TestWaveGoesOnOnceHealthyWithoutAnEventOrAWrite(t *testing.T) {
	e := newEnv(t)
	e.watch = func(r skepswarm.Reader) skepswarm.Reader { return ownEvents{Reader: r, ns: e.ns} }
	e.watcher = skepswarm.WatcherOptions{Resync: time.Hour, FullResync: time.Hour}
	first := e.repo.Commit(t, "main", map[string]string{"compose.yaml": slowWaves(e.v1, e.v1)})
	app := strings.Replace(e.app("web", true), "      resolveImage: never\n", "      resolveImage: never\n      timeout: 25s\n", 1)
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(app))})
	run(t, ctrl)

	st := waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Revision == first && (s.LastError != "" || s.DeployedRevision == first)
	})
	if st.LastError != "" || st.Sync != reconcile.Synced {
		t.Fatalf("first sync: %s, error %q; want synced within the 25s timeout of each wave", st.Sync, st.LastError)
	}
	waitService(t, e, e.ns+"_web", e.v1)

	// Only wave 1 changes: wave 0 is in place and nothing of it is written.
	second := e.repo.Commit(t, "main", map[string]string{"compose.yaml": slowWaves(e.v1, e.v2)})
	st = waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Revision == second && (s.LastError != "" || s.DeployedRevision == second)
	})
	if st.LastError != "" || st.Sync != reconcile.Synced {
		t.Fatalf("second sync: %s, error %q; want synced past wave 0, which was in place", st.Sync, st.LastError)
	}
	waitService(t, e, e.ns+"_web", e.v2)
	if failed := e.events.of(notify.SyncFailed); len(failed) != 0 {
		t.Errorf("sync-failed events = %+v, want none", failed)
	}
	if got := e.events.of(notify.SyncSucceeded); len(got) != 2 {
		t.Errorf("sync-succeeded events = %+v, want one per commit", got)
	}
}

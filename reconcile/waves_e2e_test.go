package reconcile_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
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
	if s, err := e.serviceNamed(t, e.ns+"_web"); err != nil || s == nil || s.Spec.TaskTemplate.ContainerSpec.Image != e.v1 || s.Version.Index != web.Version.Index {
		t.Errorf("wave 1 was touched after wave 0 failed: %v, %v", s, err)
	}
}

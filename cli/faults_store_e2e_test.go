package cli_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/store"
)

// What the controller does with a history store it cannot use is written
// down in docs/operations.md ("The history store"): it never stops
// deploying for it, and it says what is wrong where an operator looks.
func TestFaultStoreCorruptUnopenableOrFullIsSaidAndDeploysGoOn(t *testing.T) {
	docker := harness.RequireSwarm(t)
	e := newFaultEnv(t, docker, mainSocket(t))
	first := e.repo.Head(t, "main")
	image, revisions := e.v1, 1 // what runs once the subtests before ran

	t.Run("a corrupt database at start is moved aside and a new one kept", func(t *testing.T) {
		data := filepath.Join(e.dir, "corrupt")
		garbage := strings.Repeat("this is not an SQLite database\n", 64)
		if err := os.MkdirAll(data, 0o755); err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, filepath.Join(data, store.FileName), garbage)
		ctl := e.startController(t, data)
		e.waitConverged(t, first, e.v1, 2*time.Minute)
		st := e.status(t)
		if st.Store == nil || !st.Store.Kept || st.Store.MovedAside == "" || !strings.Contains(st.Store.Error, "not a database") {
			t.Fatalf("status store %+v, want kept, with the corrupt file moved aside and why", st.Store)
		}
		if b, err := os.ReadFile(st.Store.MovedAside); err != nil || string(b) != garbage {
			t.Errorf("the corrupt file is not kept at %s (%v)", st.Store.MovedAside, err)
		}
		if out := ctl.output.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, st.Store.MovedAside) {
			t.Errorf("the controller's log does not say at error level where the corrupt store went:\n%s", out)
		}
		if got := syncsOf(e.history(t)); !slices.Equal(got, []string{"succeeded"}) {
			t.Errorf("sync history %v in the new store, want [succeeded]", got)
		}
		if out := e.cli.ok(t, "status"); !strings.Contains(out, "moved aside") {
			t.Errorf("skep status does not say the store was moved aside:\n%s", out)
		}
		e.current.stop(t, syscall.SIGTERM, 30*time.Second)
	})

	t.Run("a database that cannot be opened: deploys go on, the status and the history say nothing is kept", func(t *testing.T) {
		data := filepath.Join(e.dir, "unopenable")
		// A directory where the database file should be: not corrupt, so
		// nothing is moved, but nothing can be kept either.
		if err := os.MkdirAll(filepath.Join(data, store.FileName), 0o755); err != nil {
			t.Fatal(err)
		}
		e.startController(t, data)
		st := e.status(t)
		if st.Store == nil || st.Store.Kept || !strings.Contains(st.Store.Error, store.FileName) {
			t.Fatalf("status store %+v, want not kept, naming the file", st.Store)
		}
		second := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
		e.cli.ok(t, "app", "refresh", "stack")
		e.waitConverged(t, second, e.v2, 2*time.Minute)
		image, revisions = e.v2, 2
		if h := e.history(t); len(h.Releases[0].Revisions) != 2 || !strings.Contains(h.SyncsError, "not kept") {
			t.Errorf("history %+v, want the revisions from the swarm and a syncs error saying nothing is kept", h)
		}
		if _, errOut, code := e.cli.run(t, e.cli.env, "events"); code == 0 || !strings.Contains(errOut, "not kept") {
			t.Errorf("skep events exit %d (%s), want a failure saying events are not kept", code, errOut)
		}
		e.current.stop(t, syscall.SIGTERM, 30*time.Second)
	})

	t.Run("the data directory's disk full: git and the store fail and say so, nothing is lost once there is room", func(t *testing.T) {
		data := filepath.Join(e.dir, "full")
		if err := os.MkdirAll(data, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", data).CombinedOutput(); err != nil {
			t.Skipf("no tmpfs to fill (%v: %s): this subtest needs root", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("umount", "-l", data).Run() })
		e.startController(t, data)
		before := e.waitConverged(t, e.repo.Head(t, "main"), image, 2*time.Minute)
		kept := len(e.events(t, ""))
		events := e.followEvents(t)
		fill := filepath.Join(data, "filler")
		// dd stops at ENOSPC: exactly what is wanted.
		_ = exec.Command("dd", "if=/dev/zero", "of="+fill, "bs=64k").Run()
		// Something happens that needs nothing new from git: a service
		// scaled by hand is put back. Its event is streamed live, and
		// either kept or counted as not kept: never lost without a word.
		s1 := before.services[e.ns+"_s1"]
		two := uint64(2)
		spec := s1.Spec
		spec.Mode.Replicated.Replicas = &two
		if _, err := docker.ServiceUpdate(t.Context(), s1.ID, s1.Version, spec, dswarm.ServiceUpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, events, "drift-converged", "", time.Minute)
		st := e.status(t).Store
		keptIt := len(e.events(t, "drift-converged")) > 0
		if !keptIt && (st == nil || st.FailedWrites == 0) {
			t.Errorf("the drift-converged event is neither kept nor counted as failed: store %+v", st)
		}
		t.Logf("with the disk full, the event was kept: %t; store %+v", keptIt, st)
		// A commit needs a fetch, which needs room: the status says so.
		third := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v1 + "\n", "settings.txt": "two\n"})
		e.cli.ok(t, "app", "refresh", "stack")
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			a := e.app(t).Application
			return strings.Contains(a.LastError, "no space left on device"), fmt.Sprintf("last error %s: %q", a.LastErrorClass, a.LastError)
		})
		now, err := listObjects(t.Context(), docker, e.ns)
		if err != nil {
			t.Fatal(err)
		}
		e.checkObjects(t, now, revisions)
		if err := os.Remove(fill); err != nil {
			t.Fatal(err)
		}
		e.waitConverged(t, third, e.v1, 2*time.Minute)
		if got := len(e.events(t, "sync-succeeded")); got == 0 || len(e.events(t, "")) <= kept {
			t.Errorf("no new event kept once the disk had room (%d kept before)", kept)
		}
		e.current.stop(t, syscall.SIGTERM, 30*time.Second)
	})
}

package cli_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/harness"
)

func TestFaultGitServerFailuresChangeNothingAndConverge(t *testing.T) {
	slowFault(t)
	docker := harness.RequireSwarm(t)
	e := newFaultEnv(t, docker, mainSocket(t))
	first := e.repo.Head(t, "main")
	e.startController(t, filepath.Join(e.dir, "data"), "--git-timeout", "3s")
	before := e.waitConverged(t, first, e.v1, 2*time.Minute)
	handMade := e.handMade(t, e.ns, "handmade")
	bystander := e.handMade(t, e.ns+"-hm", "web")
	before, err := listObjects(t.Context(), docker, e.ns)
	if err != nil {
		t.Fatal(err)
	}
	revisions := 1

	// unmoved fails t when a service of the release was written since
	// before, or the hand-made ones are gone.
	unmoved := func(t *testing.T) {
		t.Helper()
		now, err := listObjects(t.Context(), docker, e.ns)
		if err != nil {
			t.Fatal(err)
		}
		e.checkObjects(t, now, revisions, handMade)
		if b, a := versions(before), versions(now); !maps.Equal(b, a) {
			t.Errorf("services written while git failed: before %v, after %v", b, a)
		}
		if s, err := harness.ServiceNamed(t.Context(), docker, bystander); err != nil || s == nil {
			t.Errorf("the hand-made service of another stack is gone (%v)", err)
		}
	}
	// converged waits for commit and image, then takes the objects as the
	// new before.
	converged := func(t *testing.T, commit, image string) {
		t.Helper()
		revisions++
		objs := e.waitConverged(t, commit, image, 2*time.Minute)
		e.checkObjects(t, objs, revisions, handMade)
		before = objs
	}

	t.Run("a git server answering 500 is a transient error that says so and writes nothing", func(t *testing.T) {
		e.git.Fail(http.StatusInternalServerError)
		second := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
		e.cli.ok(t, "app", "refresh", "stack")
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			a := e.app(t).Application
			return a.LastErrorClass == "transient" && strings.Contains(a.LastError, "500") && strings.Contains(a.LastError, e.repo.URL),
				fmt.Sprintf("last error %s: %q", a.LastErrorClass, a.LastError)
		})
		unmoved(t)
		if got := e.app(t).Application; got.Health != "healthy" {
			t.Errorf("health %s (%s) while only git fails, want healthy", got.Health, got.HealthMessage)
		}
		e.git.Heal()
		converged(t, second, e.v2)
		if a := e.app(t).Application; a.LastError != "" {
			t.Errorf("last error %q after git answered again", a.LastError)
		}
	})

	t.Run("a git server that never answers is given up after --git-timeout, and converges once it answers", func(t *testing.T) {
		e.git.Hang()
		third := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v1 + "\n"})
		e.cli.ok(t, "app", "refresh", "stack")
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			a := e.app(t).Application
			return a.LastErrorClass == "transient" && strings.Contains(a.LastError, "no answer within 3s") && strings.Contains(a.LastError, e.repo.URL),
				fmt.Sprintf("last error %s: %q (phase %s)", a.LastErrorClass, a.LastError, a.Phase)
		})
		unmoved(t)
		e.git.Heal()
		converged(t, third, e.v1)
	})

	t.Run("a force-push that rewinds the branch deploys the older commit as a new revision", func(t *testing.T) {
		second := e.history(t).Releases[0].Revisions[1].Commit
		e.repo.MoveBranch(t, "main", second)
		e.cli.ok(t, "app", "refresh", "stack")
		converged(t, second, e.v2)
		h := e.history(t)
		var commits []string
		for _, r := range h.Releases[0].Revisions {
			commits = append(commits, r.Commit)
		}
		if len(commits) != 4 || commits[0] != first || commits[3] != second || commits[1] != second {
			t.Errorf("revision commits %.12q, want %.12s, %.12s, the one after, %.12s again", commits, first, second, second)
		}
	})

	t.Run("a deleted branch the app set names stalls with the reason and deletes nothing", func(t *testing.T) {
		release := e.repo.Commit(t, "release", map[string]string{".env": "IMAGE=" + e.v1 + "\n"})
		e.reloadApps(t, "release")
		converged(t, release, e.v1)
		failedBefore := len(e.events(t, "sync-failed"))
		e.repo.DeleteBranch(t, "release")
		e.cli.ok(t, "app", "refresh", "stack")
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			a := e.app(t).Application
			return a.LastErrorClass == "stalled" && strings.Contains(a.LastError, `"release"`),
				fmt.Sprintf("last error %s: %q", a.LastErrorClass, a.LastError)
		})
		// A few ticks more: the stalled revision is reported once, and
		// nothing is pruned although the release cannot be rendered.
		start := time.Now()
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			a := e.app(t).Application
			return a.LastReconcile != nil && a.LastReconcile.After(start.Add(11*time.Second)), fmt.Sprint(a.LastReconcile)
		})
		if failed := e.events(t, "sync-failed"); len(failed)-failedBefore != 1 {
			t.Errorf("sync-failed events for the deleted branch: %+v, want one", failed[failedBefore:])
		}
		unmoved(t)
		again := e.repo.Commit(t, "release", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
		e.cli.ok(t, "app", "refresh", "stack")
		converged(t, again, e.v2)
	})

	if evs := e.events(t, "resources-pruned"); len(evs) > 0 {
		t.Errorf("resources-pruned events while git misbehaved: %+v", evs)
	}
}

package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/skep-cd/skep/harness"
)

// receiver is a webhook endpoint that records the event types it got.
type receiver struct {
	mu    sync.Mutex
	types []string // "type revision", in arrival order
}

func (r *receiver) got(typ, revision string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.types, typ+" "+revision)
}

func TestFaultHangingNotifierAndSIGTERMMidApply(t *testing.T) {
	docker := harness.RequireSwarm(t)
	e := newFaultEnv(t, docker, mainSocket(t))
	first := e.repo.Head(t, "main")

	// The hanging receiver answers nothing until the test ends.
	var hung, answered atomic.Int64
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hung.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		answered.Add(1)
	}))
	t.Cleanup(func() { close(release); hang.Close() })
	fast := &receiver{}
	fastSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct{ Type, Revision string }
		if err := json.NewDecoder(r.Body).Decode(&ev); err == nil {
			fast.mu.Lock()
			fast.types = append(fast.types, ev.Type+" "+ev.Revision)
			fast.mu.Unlock()
		}
	}))
	t.Cleanup(fastSrv.Close)
	writeTestFile(t, filepath.Join(e.dir, "hang.url"), hang.URL+"\n")
	writeTestFile(t, filepath.Join(e.dir, "fast.url"), fastSrv.URL+"\n")
	notifications := filepath.Join(e.dir, "notifications.yaml")
	writeTestFile(t, notifications, `apiVersion: skep/v1
kind: Notifications
notifiers:
  - name: hangs
    webhook: {url: {file: hang.url}}
    timeout: 5m
    retries: 0
  - name: answers
    webhook: {url: {file: fast.url}}
`)
	data := filepath.Join(e.dir, "data")
	e.startController(t, data, "--notifications", notifications)

	t.Run("a receiver that hangs delays neither the deploy nor the other notifier", func(t *testing.T) {
		e.waitConverged(t, first, e.v1, 2*time.Minute)
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			return fast.got("sync-succeeded", first), fmt.Sprintf("the answering receiver got %v", fast.types)
		})
		if hung.Load() == 0 || answered.Load() != 0 {
			t.Errorf("the hanging receiver got %d requests, %d of them ended: want its first still hanging", hung.Load(), answered.Load())
		}
	})

	handMade := e.handMade(t, e.ns, "handmade")
	t.Run("SIGTERM in the middle of an apply: the controller exits within 10s, the sync is interrupted, not failed, and finished after", func(t *testing.T) {
		events := e.followEvents(t)
		e.proxy.slow(2 * time.Second)
		base := e.proxy.writes.Load()
		second := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
		e.cli.ok(t, "app", "refresh", "stack")
		waitEvent(t, events, "sync-started", second, time.Minute)
		e.proxy.waitWrites(t, base, 2)
		ctl := e.current
		took := ctl.stop(t, syscall.SIGTERM, 10*time.Second)
		if ctl.err != nil || !strings.Contains(ctl.output.String(), "controller stopped") {
			t.Errorf("controller exited with %v after SIGTERM, want 0 after its clean stop", ctl.err)
		}
		t.Logf("stopped %s after SIGTERM", took.Round(time.Millisecond))
		objs, err := listObjects(t.Context(), docker, e.ns)
		if err != nil {
			t.Fatal(err)
		}
		var upgraded int
		for _, s := range objs.services {
			if s.Spec.TaskTemplate.ContainerSpec.Image == e.v2 {
				upgraded++
			}
		}
		t.Logf("%d of %d services upgraded when it stopped; revisions %v", upgraded, faultServices, objs.revisions)

		e.proxy.slow(0)
		e.startController(t, data, "--notifications", notifications)
		objs = e.waitConverged(t, second, e.v2, 2*time.Minute)
		e.checkObjects(t, objs, 2, handMade)
		// A sync cut short by a stop did not fail: no sync-failed (a forge
		// would mark the commit failed), and the history says interrupted.
		for _, ev := range append(e.events(t, "sync-failed"), nil...) {
			t.Errorf("sync-failed raised for a sync the stop cut short: %+v", ev)
		}
		for _, ev := range events.events() {
			if ev["type"] == "sync-failed" {
				t.Errorf("sync-failed streamed for a sync the stop cut short: %v", ev)
			}
		}
		h := e.history(t)
		if got := syncsOf(h); !slices.Equal(got, []string{"succeeded", "interrupted", "succeeded"}) {
			t.Errorf("sync history %v, want [succeeded interrupted succeeded]", got)
		}
		if len(h.Syncs) == 3 && (h.Syncs[1].Revision != second || h.Syncs[1].FinishedAt == nil || h.Syncs[1].Error == "") {
			t.Errorf("the stopped sync %+v, want at %.12s, ended, saying why", h.Syncs[1], second)
		}
		if got := fast.got("sync-failed", second); got {
			t.Error("the answering notifier was told the stopped sync failed")
		}
	})
}

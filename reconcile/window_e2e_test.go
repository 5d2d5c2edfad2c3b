package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
)

// clock is a settable clock for reconcile.Options.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// reconciles counts the reconciles the controller ran.
type reconciles struct{ n atomic.Int64 }

func (r *reconciles) ObserveReconcile(reconcile.Observation) { r.n.Add(1) }

// withWindows appends syncWindows to an app-set document.
func withWindows(set string, windows ...string) string {
	return set + "syncWindows:\n" + strings.Join(windows, "")
}

// A deny window holds the install, live-drift corrections and, with
// manualSync: false, manual syncs, all judged at the injected clock; as the
// clock leaves the window, the held commit deploys and the drift is put
// right.
func TestDenyWindowHoldsSyncsAndCorrectionsAtTheInjectedClock(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	commit := e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: time.Date(2025, 1, 15, 23, 0, 0, 0, berlin)}
	apps := withWindows(appSet(e.liveApp("web", true)),
		"  - {kind: deny, schedule: '0 22 * * *', duration: 8h, applications: ['w*'], timeZone: Europe/Berlin, manualSync: false}\n")
	var count reconciles
	ctrl := e.controllerWith(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", apps)}, reconcile.Options{Now: clk.Now, Observer: &count})
	run(t, ctrl)

	const why = "held by sync window deny 0 22 * * * (until 06:00 Europe/Berlin)"
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Revision == commit && s.Phase == reconcile.PhaseIdle })
	if st.Window.Message != why || st.Sync != reconcile.OutOfSync || st.Window.ManualSync {
		t.Errorf("status in the window = %+v, want out-of-sync, %q, manual syncs refused", st, why)
	}
	if s, err := e.service(t.Context(), "web"); err != nil || s != nil {
		t.Fatalf("the window let the install through: %v, %v", s, err)
	}
	if got := e.events.of(notify.DriftDetected); len(got) != 1 || !strings.HasPrefix(got[0].Message, why+": ") {
		t.Errorf("drift-detected events = %+v, want one saying %q", got, why)
	}
	if _, err := ctrl.Sync(notify.WithActor(t.Context(), "alice"), "web", reconcile.SyncOptions{}); !errors.Is(err, reconcile.ErrSyncWindow) || !strings.Contains(err.Error(), why) {
		t.Errorf("manual sync in a manualSync: false window = %v, want ErrSyncWindow naming the window", err)
	}

	// 06:00: the window closed, and the held commit deploys on the next tick.
	clk.set(time.Date(2025, 1, 16, 6, 0, 0, 0, berlin))
	if err := ctrl.Refresh(t.Context(), "web"); err != nil {
		t.Fatal(err)
	}
	svc := e.waitImage(t, e.v1, 2*time.Minute)
	harness.WaitRunning(t, e.cli, svc.ID, 1, 2*time.Minute)
	st = waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.DeployedRevision == commit })
	if st.Window.Message != "" {
		t.Errorf("status after the window = %q, want no window", st.Window.Message)
	}

	// The next night, live drift is reported and left alone.
	clk.set(time.Date(2025, 1, 16, 22, 30, 0, 0, berlin))
	e.update(t, "web", func(s *swarm.ServiceSpec) {
		two := uint64(2)
		s.Mode.Replicated.Replicas = &two
	})
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		return len(e.events.of(notify.LiveDriftDetected)) > 0, "no live-drift-detected"
	})
	seen := count.n.Load()
	if err := ctrl.Refresh(t.Context(), "web"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
		return count.n.Load() > seen && s.Phase == reconcile.PhaseIdle && len(s.Findings) > 0
	})
	if s, err := e.service(t.Context(), "web"); err != nil || replicas(s) != 2 {
		t.Errorf("the window let the drift be corrected: replicas %d, %v", replicas(s), err)
	}
	if got := e.events.of(notify.DriftConverged); len(got) != 0 {
		t.Errorf("drift-converged in the window: %+v", got)
	}

	clk.set(time.Date(2025, 1, 17, 6, 0, 0, 0, berlin))
	if err := ctrl.Refresh(t.Context(), "web"); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		s, err := e.service(ctx, "web")
		return err == nil && replicas(s) == 1, fmt.Sprintf("replicas %d, %v", replicas(s), err)
	})
	if got := e.events.of(notify.DriftConverged); len(got) != 1 {
		t.Errorf("drift-converged events after the window = %+v, want one", got)
	}
}

// A deny window open now, for about 25 seconds of real time, holds a new
// application's install until it closes: the swarm's own timestamp of the
// service is no earlier than the end of the window.
func TestDenyWindowHoldsACommitUntilItClosesThenDeploys(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	commit := e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	// The window opens at the start of this minute and closes 25 seconds
	// from now.
	now := time.Now().UTC()
	window := fmt.Sprintf("  - {kind: deny, schedule: '%d %d * * *', duration: %ds, applications: [web]}\n", now.Minute(), now.Hour(), now.Second()+25)
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", withWindows(appSet(e.app("web", true)), window))})
	run(t, ctrl)

	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Revision == commit && s.Window.Message != "" })
	if !strings.HasPrefix(st.Window.Message, "held by sync window deny ") || st.Window.Until.IsZero() {
		t.Fatalf("status in the window = %+v, want held until a time", st.Window)
	}
	if s, err := e.service(t.Context(), "web"); err != nil || s != nil {
		t.Fatalf("the window let the install through: %v, %v", s, err)
	}
	svc := e.waitImage(t, e.v1, 2*time.Minute)
	if svc.CreatedAt.Before(st.Window.Until) {
		t.Errorf("service created at %s, before the window closed at %s", svc.CreatedAt, st.Window.Until)
	}
	st = waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.DeployedRevision == commit })
	if st.Window.Message != "" {
		t.Errorf("status after the window = %+v, want none", st.Window)
	}
}

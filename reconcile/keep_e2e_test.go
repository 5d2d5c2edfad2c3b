package reconcile_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/stack"
)

// liveApp is an application entry with live drift detection and extra
// sync-policy lines.
func (e *env) liveApp(name string, automated bool, policy ...string) string {
	s := e.app(name, automated) + "    driftDetection: live\n"
	if len(policy) > 0 {
		s = strings.Replace(s, "    syncPolicy:\n", "    syncPolicy:\n      "+strings.Join(policy, "\n      ")+"\n", 1)
	}
	return s
}

// twoServices is a stack with a web service (host port) and a worker.
func twoServices(port uint32, withWorker bool) string {
	s := compose(port)
	if withWorker {
		s = strings.Replace(s, "configs:\n  settings:", `  worker:
    image: ${IMAGE}
    environment:
      ROLE: worker
    deploy:
      endpoint_mode: dnsrr
      replicas: 1
configs:
  settings:`, 1)
	}
	return s
}

func (e *env) update(t *testing.T, name string, change func(*swarm.ServiceSpec)) {
	t.Helper()
	s, err := e.service(t.Context(), name)
	if err != nil || s == nil {
		t.Fatalf("service %s: %v", name, err)
	}
	spec := s.Spec
	change(&spec)
	if _, err := e.cli.ServiceUpdate(t.Context(), s.ID, s.Version, spec, swarm.ServiceUpdateOptions{}); err != nil {
		t.Fatalf("out-of-band update of %s: %v", name, err)
	}
}

func replicas(s *swarm.Service) uint64 {
	if s == nil || s.Spec.Mode.Replicated == nil || s.Spec.Mode.Replicated.Replicas == nil {
		return 0
	}
	return *s.Spec.Mode.Replicated.Replicas
}

// An install must not look like live drift: the snapshot the next tick
// reads may predate the write, and would show every new service missing.
func TestInstallRaisesNoLiveDrift(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": twoServices(port, true), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.liveApp("web", true)))})
	run(t, ctrl)
	svc := e.waitImage(t, e.v1, 2*time.Minute)
	harness.WaitRunning(t, e.cli, svc.ID, 1, 2*time.Minute)
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Health == health.Healthy })
	// Let the snapshot catch up and a few more ticks run (live drift wakes
	// the application on every snapshot change, and the interval is 10s).
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
		return s.LastReconcile.After(st.LastReconcile.Add(12 * time.Second))
	})
	if got := e.events.of(notify.LiveDriftDetected); len(got) != 0 {
		t.Errorf("live-drift-detected after an install: %+v", got)
	}
	if got := e.events.of(notify.DriftConverged); len(got) != 0 {
		t.Errorf("drift-converged after an install: %+v", got)
	}
	for _, name := range []string{"web", "worker"} {
		s, err := e.service(t.Context(), name)
		if err != nil || s == nil {
			t.Fatalf("service %s: %v", name, err)
		}
		if s.PreviousSpec != nil {
			t.Errorf("service %s was written again after its install (version %d)", name, s.Version.Index)
		}
	}
}

func TestLiveDriftIsCorrectedOnAnAutomatedApp(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	// An interval of an hour: every correction comes from the change's
	// own wake, also one made while the last correction still waited for
	// health, never from a tick.
	apps := strings.Replace(appSet(e.liveApp("web", true)), "interval: 10s", "interval: 1h", 1)
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", apps)})
	run(t, ctrl)
	svc := e.waitImage(t, e.v1, 2*time.Minute)
	harness.WaitRunning(t, e.cli, svc.ID, 1, 2*time.Minute)

	for _, tc := range []struct {
		name    string
		change  func(*swarm.ServiceSpec)
		remove  bool
		rollout bool // the correction restarts the service's tasks
		field   string
		fixed   func(*swarm.Service) bool
	}{
		{name: "deleted service", remove: true, field: "missing",
			fixed: func(s *swarm.Service) bool { return s != nil && replicas(s) == 1 }},
		{name: "removed port", field: "ports", rollout: true,
			change: func(s *swarm.ServiceSpec) { s.EndpointSpec.Ports = nil },
			fixed:  func(s *swarm.Service) bool { return s.Spec.EndpointSpec != nil && len(s.Spec.EndpointSpec.Ports) == 1 }},
		{name: "replicas", field: "replicas",
			change: func(s *swarm.ServiceSpec) { three := uint64(3); s.Mode.Replicated.Replicas = &three },
			fixed:  func(s *swarm.Service) bool { return replicas(s) == 1 }},
		{name: "image", field: "image", rollout: true,
			change: func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Image = e.v2 },
			fixed:  func(s *swarm.Service) bool { return s.Spec.TaskTemplate.ContainerSpec.Image == e.v1 }},
		{name: "env added", field: "env", rollout: true,
			change: func(s *swarm.ServiceSpec) {
				s.TaskTemplate.ContainerSpec.Env = append(s.TaskTemplate.ContainerSpec.Env, "DEBUG=1")
			},
			fixed: func(s *swarm.Service) bool {
				return !strings.Contains(strings.Join(s.Spec.TaskTemplate.ContainerSpec.Env, ","), "DEBUG")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.events.of(notify.DriftConverged))
			adverts := e.git.RefAdvertisements()
			if tc.remove {
				s, err := e.service(t.Context(), "web")
				if err != nil || s == nil {
					t.Fatal(err)
				}
				if err := e.cli.ServiceRemove(t.Context(), s.ID); err != nil {
					t.Fatal(err)
				}
			} else {
				e.update(t, "web", tc.change)
			}
			harness.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
				s, err := e.service(ctx, "web")
				if err != nil || s == nil {
					return false, fmt.Sprint(err)
				}
				return tc.fixed(s), "not corrected yet"
			})
			live := e.events.of(notify.LiveDriftDetected)
			if len(live) == 0 || !strings.Contains(live[len(live)-1].Message, tc.field) {
				t.Errorf("live-drift-detected events %+v, want the last naming %q", live, tc.field)
			}
			harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
				return len(e.events.of(notify.DriftConverged)) > before, "no drift-converged event"
			})
			// A wake by the swarm compares it with the commit git last
			// named: the correction waits on no git server. One that
			// starts a rollout waits for it on retries, which are ticks
			// and ask git.
			if n := e.git.RefAdvertisements() - adverts; n != 0 && !tc.rollout {
				t.Errorf("the correction asked git for refs %d times, want none", n)
			}
		})
	}
	revs, err := apply.Revisions(t.Context(), e.cli, stack.Owner{Controller: e.id, Application: "web", Release: e.ns})
	if err != nil {
		t.Fatal(err)
	}
	if len(revs) != 1 {
		t.Errorf("corrections wrote revisions: %d recorded, want 1", len(revs))
	}
}

func TestLiveDriftIsOnlyReportedOnAManualApp(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.liveApp("web", false)))})
	run(t, ctrl)
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) { return ctrl.Loaded(), "not loaded" })
	if err := ctrl.SyncNow("web", "alice"); err != nil {
		t.Fatal(err)
	}
	e.waitImage(t, e.v1, 2*time.Minute)
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Sync == reconcile.Synced })

	e.update(t, "web", func(s *swarm.ServiceSpec) { two := uint64(2); s.Mode.Replicated.Replicas = &two })
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Drift == reconcile.DriftLive })
	if st.Sync != reconcile.OutOfSync || !strings.Contains(fmt.Sprint(st.Findings), "replicas") {
		t.Errorf("manual app status = %+v, want out-of-sync with a replicas finding", st)
	}
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.LastReconcile.After(st.LastReconcile) })
	if s, _ := e.service(t.Context(), "web"); replicas(s) != 2 {
		t.Errorf("manual app corrected drift on its own: replicas %d", replicas(s))
	}
	if n := len(e.events.of(notify.DriftConverged)); n != 0 {
		t.Errorf("manual app raised %d drift-converged events", n)
	}
	if n := len(e.events.of(notify.LiveDriftDetected)); n != 1 {
		t.Errorf("live-drift-detected raised %d times for one change, want once", n)
	}
}

func TestRolledBackRolloutFailsTheSyncOnceAndIsNotRedeployed(t *testing.T) {
	e := newEnv(t)
	bad := harness.TestImage(t, e.cli, harness.ImageOptions{Version: "bad", Unhealthy: true})
	port := harness.FreePort(t)
	withRollback := strings.Replace(compose(port), "      replicas: 1\n", `      replicas: 1
      update_config:
        failure_action: rollback
        monitor: 30s
        order: stop-first
`, 1)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": withRollback, "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml",
		appSet(e.liveApp("web", true, "wait: true", "timeout: 2m")))})
	run(t, ctrl)
	first := waitStatus(t, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool { return s.Health == health.Healthy })

	badCommit := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + bad + "\n"})
	st := waitStatus(t, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Revision == badCommit && s.LastError != ""
	})
	if !strings.Contains(st.LastError, "rolled back") {
		t.Errorf("last error = %q, want the rollback named", st.LastError)
	}
	failed := e.events.of(notify.SyncFailed)
	if len(failed) != 1 || failed[0].Revision != badCommit {
		t.Fatalf("sync-failed events = %+v, want one for %s", failed, badCommit)
	}
	svc, err := e.service(t.Context(), "web")
	if err != nil || svc == nil || svc.Spec.TaskTemplate.ContainerSpec.Image != e.v1 {
		t.Fatalf("after the rollback the service runs %v, want %s", svc, e.v1)
	}
	// Two more reconciles: neither redeploys the failing spec.
	starts := len(e.events.of(notify.SyncStarted))
	last := st.LastReconcile
	for range 2 {
		s := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.LastReconcile.After(last) })
		last = s.LastReconcile
	}
	if n := len(e.events.of(notify.SyncStarted)); n != starts {
		t.Errorf("the rolled-back revision was redeployed: %d sync-started events, want %d", n, starts)
	}
	now, err := e.service(t.Context(), "web")
	if err != nil || !unwritten(svc, now) {
		t.Errorf("the rolled-back service was written to again")
	}
	_ = first
}

func TestPruneResourcesRemovesWhatGitDroppedAndSparesAHandMadeService(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": twoServices(port, true), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml",
		appSet(e.liveApp("web", true, "pruneResources: true")))})
	run(t, ctrl)
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		s, err := e.service(ctx, "worker")
		return s != nil && err == nil, "worker not deployed"
	})
	one := uint64(1)
	hand, err := e.cli.ServiceCreate(t.Context(), swarm.ServiceSpec{
		Annotations:  swarm.Annotations{Name: e.ns + "_handmade", Labels: map[string]string{stack.LabelNamespace: e.ns}},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: e.v1}},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &one}},
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR},
	}, swarm.ServiceCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	e.repo.Commit(t, "main", map[string]string{"compose.yaml": twoServices(port, false)})
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		s, err := e.service(ctx, "worker")
		return s == nil && err == nil, "worker still there"
	})
	pruned := e.events.of(notify.ResourcesPruned)
	if len(pruned) == 0 || !strings.Contains(pruned[0].Message, e.ns+"_worker") {
		t.Errorf("resources-pruned events = %+v, want one naming %s_worker", pruned, e.ns)
	}
	if _, _, err := e.cli.ServiceInspectWithRaw(t.Context(), hand.ID, swarm.ServiceInspectOptions{}); err != nil {
		t.Errorf("the hand-made service was touched: %v", err)
	}
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return len(s.Unmanaged) > 0 })
	if !strings.Contains(strings.Join(st.Unmanaged, " "), e.ns+"_handmade") {
		t.Errorf("unmanaged = %v, want the hand-made service reported", st.Unmanaged)
	}
}

func TestRemovedApplicationIsPrunedOnlyWithThePruneFlag(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	dir := t.TempDir()
	apps := writeFile(t, dir, "apps.yaml", appSet(e.app("web", true)))
	ctrl := e.controllerWith(t, appset.FileSource{Path: apps}, reconcile.Options{PruneApplications: false})
	if _, err := ctrl.LoadAppSet(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := ctrl.ReconcileOnce(t.Context(), "web", reconcile.Request{Sync: true}); err != nil {
		t.Fatal(err)
	}

	// Another application with a release of its own, so that the set is not
	// empty and nothing else declares web's release.
	other := strings.Replace(e.app("other", false), "release: "+e.ns, "release: "+e.ns+"-other", 1)
	for _, tc := range []struct {
		name      string
		set       string
		prune     bool
		broken    bool   // the set never loads
		orphan    string // the reason web's release is listed as orphaned
		wantGone  bool
		wantEvent bool
	}{
		{name: "an app set that fails to load prunes nothing and lists what runs", set: "applications: [", prune: true, broken: true,
			orphan: "app set not loaded: "},
		{name: "an empty app set prunes nothing even with the flag", set: appSet(), prune: true, orphan: "app set is empty; pruning held"},
		{name: "without the flag the removed application stays", set: appSet(other), prune: false,
			orphan: "application left the app set; kept: the controller runs without --prune"},
		{name: "with the flag the removed application is pruned", set: appSet(other), prune: true, wantGone: true, wantEvent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeFile(t, dir, "apps.yaml", tc.set)
			e.events = &recorder{}
			c := e.controllerWith(t, appset.FileSource{Path: apps}, reconcile.Options{PruneApplications: tc.prune})
			run(t, c)
			if tc.orphan != "" {
				// The status shows the release left running and why, read
				// from the live swarm, whatever the app set says.
				harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
					got := c.Overview().Orphans
					ok := slices.ContainsFunc(got, func(o reconcile.Orphan) bool {
						return o.Application == "web" && o.Release == e.ns && strings.Contains(o.Reason, tc.orphan)
					})
					return ok, fmt.Sprintf("orphans = %+v, want web's release %s saying %q", got, e.ns, tc.orphan)
				})
			}
			if tc.broken {
				if c.Loaded() || len(c.Applications()) != 0 {
					t.Errorf("a broken app set loaded %d applications", len(c.Applications()))
				}
				if s, err := e.service(t.Context(), "web"); err != nil || s == nil {
					t.Errorf("web was pruned: %v", err)
				}
				return
			}
			harness.Eventually(t, time.Minute, func(context.Context) (bool, string) { return c.Loaded(), "not loaded" })
			if tc.wantGone {
				harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
					s, err := e.service(ctx, "web")
					return s == nil && err == nil, "web still deployed"
				})
				// The event follows the deletion the test may see first.
				harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
					got := e.events.of(notify.ResourcesPruned)
					return len(got) > 0 && got[0].Application == "web", fmt.Sprintf("resources-pruned = %+v, want one for web", got)
				})
				harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
					got := c.Overview().Orphans
					return len(got) == 0, fmt.Sprintf("orphans after the prune = %+v, want none", got)
				})
				return
			}
			// Let every application reconcile and the controller look for
			// releases to prune twice after that; then nothing may be gone.
			for _, a := range c.Applications() {
				waitStatus(t, c, a.Name, time.Minute, func(s reconcile.AppStatus) bool { return !s.LastReconcile.IsZero() })
			}
			waitPruneChecks(t, c, 2)
			if s, err := e.service(t.Context(), "web"); err != nil || s == nil {
				t.Errorf("web was pruned: %v", err)
			}
			if got := e.events.of(notify.ResourcesPruned); len(got) != 0 {
				t.Errorf("resources-pruned = %+v, want none", got)
			}
		})
	}
}

func TestManualSyncAttributesItsPruneToTheActorAndATickToNobody(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": twoServices(port, true), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml",
		appSet(e.liveApp("web", false, "pruneResources: true")))})
	run(t, ctrl)
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) { return ctrl.Loaded(), "not loaded" })
	if err := ctrl.SyncNow("web", "alice"); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		s, err := e.service(ctx, "worker")
		return s != nil && err == nil, "worker not deployed"
	})
	drop := e.repo.Commit(t, "main", map[string]string{"compose.yaml": twoServices(port, false)})
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Revision == drop })
	if got := e.events.of(notify.DriftDetected); len(got) == 0 || got[len(got)-1].Actor != "" {
		t.Errorf("drift-detected on a tick = %+v, want it with no actor", got)
	}
	e.events = resetEvents(e.events)
	if err := ctrl.SyncNow("web", "bob"); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, func(context.Context) (bool, string) {
		return len(e.events.of(notify.ResourcesPruned)) > 0 && len(e.events.of(notify.SyncSucceeded)) > 0, "no prune yet"
	})
	for _, ty := range []notify.EventType{notify.SyncStarted, notify.ResourcesPruned, notify.SyncSucceeded} {
		got := e.events.of(ty)
		if len(got) == 0 || got[0].Actor != "bob" || got[0].Revision != drop {
			t.Errorf("%s events = %+v, want one by bob for %s", ty, got, drop)
		}
	}
}

// resetEvents forgets what r recorded so far and returns it.
func resetEvents(r *recorder) *recorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = nil
	return r
}

func TestRenamedApplicationKeepsItsStackInPlace(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	dir := t.TempDir()
	apps := writeFile(t, dir, "apps.yaml", appSet(e.liveApp("web", true, "pruneResources: true")))
	ctrl := e.controllerWith(t, appset.FileSource{Path: apps}, reconcile.Options{PruneApplications: true})
	run(t, ctrl)
	before := e.waitImage(t, e.v1, 2*time.Minute)

	// Same release, new application name: the objects are re-labelled, not
	// deleted by the removed application's prune nor recreated.
	writeFile(t, dir, "apps.yaml", appSet(e.liveApp("site", true, "pruneResources: true")))
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		s, err := e.service(ctx, "web")
		if err != nil || s == nil {
			return false, fmt.Sprintf("service gone: %v", err)
		}
		return s.Spec.Labels[stack.LabelApplication] == "site", "labels name " + s.Spec.Labels[stack.LabelApplication]
	})
	after, err := e.service(t.Context(), "web")
	if err != nil || after == nil || after.ID != before.ID {
		t.Fatalf("the service was recreated: %v → %v (%v)", before.ID, after, err)
	}
	waitStatus(t, ctrl, "site", time.Minute, func(s reconcile.AppStatus) bool { return s.Sync == reconcile.Synced })
	if got := e.events.of(notify.ResourcesPruned); len(got) != 0 {
		t.Errorf("a rename pruned something: %+v", got)
	}
}

func TestRollbackHoldSurvivesAControllerRestart(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	apps := appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.app("web", true)))}
	first := e.controller(t, apps)
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = first.Run(ctx) }()
	e.waitImage(t, e.v1, 2*time.Minute)
	e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
	e.waitImage(t, e.v2, time.Minute)

	if _, err := first.Rollback(notify.WithActor(t.Context(), "alice"), "web", "", 1); err != nil {
		t.Fatal(err)
	}
	e.waitImage(t, e.v1, time.Minute)
	stop()
	<-done

	second := e.controller(t, apps) // a restart: nothing carried over in memory
	run(t, second)
	st := waitStatus(t, second, "web", time.Minute, func(s reconcile.AppStatus) bool { return !s.LastReconcile.IsZero() })
	if st.Held.Revision == "" || st.Held.Actor != "alice" {
		t.Fatalf("after a restart the hold is %+v, want the rollback by alice", st.Held)
	}
	waitStatus(t, second, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.LastReconcile.After(st.LastReconcile) })
	if s, _ := e.service(t.Context(), "web"); s == nil || s.Spec.TaskTemplate.ContainerSpec.Image != e.v1 {
		t.Fatalf("the restarted controller undid the rollback: %v", s)
	}

	if err := second.Unhold(t.Context(), "web"); err != nil {
		t.Fatal(err)
	}
	e.waitImage(t, e.v2, time.Minute)
}

// appObserver counts the reconciles of each application.
type appObserver struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *appObserver) ObserveReconcile(ob reconcile.Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[ob.Application]++
}

func (o *appObserver) count(app string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[app]
}

// A change in the swarm wakes only the live-drift application whose own
// objects changed: another stack's update, or another application's
// drift, costs the others no reconcile.
func TestLiveDriftWakesOnlyTheApplicationWhoseObjectsChanged(t *testing.T) {
	e := newEnv(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(harness.FreePort(t)), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	// Two applications of the same source, an hour between their ticks,
	// so that only a wake makes them reconcile.
	other := e.ns + "-other"
	harness.CleanupStack(t, e.cli, other)
	web := strings.Replace(e.liveApp("web", true), "interval: 10s", "interval: 1h", 1)
	quiet := strings.Replace(strings.Replace(e.liveApp("quiet", true), "interval: 10s", "interval: 1h", 1), "release: "+e.ns, "release: "+other, 1)
	obs := &appObserver{n: map[string]int{}}
	ctrl := e.controllerWith(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(web, quiet))}, reconcile.Options{Observer: obs})
	run(t, ctrl)
	e.waitImage(t, e.v1, 2*time.Minute)
	harness.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		s, err := harness.ServiceNamed(ctx, e.cli, other+"_web")
		return err == nil && s != nil, fmt.Sprintf("%s_web: %v", other, err)
	})
	// Let the installs' own wakes settle: quiet's count unchanged over
	// eight polls (two seconds, four snapshot refreshes).
	settled, polls := -1, 0
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		now := obs.count("quiet")
		if now != settled {
			settled, polls = now, 0
		}
		polls++
		return polls >= 8 && now > 0, fmt.Sprintf("quiet reconciled %d times", now)
	})
	// A hand-made service and an out-of-band change to web's service.
	bystander := harness.Name(t, "bystander")
	spec := swarm.ServiceSpec{Annotations: swarm.Annotations{Name: bystander},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: e.v1}}}
	created, err := e.cli.ServiceCreate(t.Context(), spec, swarm.ServiceCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.cli.ServiceRemove(context.WithoutCancel(t.Context()), created.ID) })
	e.update(t, "web", func(s *swarm.ServiceSpec) { three := uint64(3); s.Mode.Replicated.Replicas = &three })
	harness.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		s, err := e.service(ctx, "web")
		return err == nil && replicas(s) == 1, "web not corrected yet"
	})
	if got := obs.count("quiet"); got != settled {
		t.Errorf("quiet reconciled %d more times for changes that were not its own", got-settled)
	}
}

// quietObserver records whether each reconcile of an application was quiet.
type quietObserver struct {
	mu    sync.Mutex
	quiet []bool
}

func (o *quietObserver) ObserveReconcile(ob reconcile.Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.quiet = append(o.quiet, ob.Quiet)
}

func (o *quietObserver) last() (n int, quiet bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.quiet) == 0 {
		return 0, false
	}
	return len(o.quiet), o.quiet[len(o.quiet)-1]
}

// A tick whose inputs are those of the last tick that found nothing to do
// renders nothing; a commit, or a change on the swarm, makes the next one
// run in full again.
func TestATickWithUnchangedInputsIsQuiet(t *testing.T) {
	e := newEnv(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(harness.FreePort(t)), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	obs := &quietObserver{}
	dir := t.TempDir()
	ctrl := e.controllerWith(t, appset.FileSource{Path: writeFile(t, dir, "apps.yaml", appSet(e.liveApp("web", true)))}, reconcile.Options{Observer: obs})
	run(t, ctrl)
	svc := e.waitImage(t, e.v1, 2*time.Minute)
	harness.WaitRunning(t, e.cli, svc.ID, 1, 2*time.Minute)
	tick := func(wantQuiet bool) {
		t.Helper()
		before, _ := obs.last()
		// Refresh queues a plain tick; the refs are read again.
		if err := ctrl.Refresh(t.Context(), "web"); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			n, quiet := obs.last()
			return n > before && quiet == wantQuiet, fmt.Sprintf("%d reconciles, last quiet %v", n, quiet)
		})
	}
	// Until a full tick finds nothing to do, nothing is quiet; then ticks
	// are, as long as nothing changes.
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		_ = ctrl.Refresh(t.Context(), "web")
		_, quiet := obs.last()
		return quiet, "no quiet tick yet"
	})
	tick(true)
	e.repo.Commit(t, "main", map[string]string{"settings.txt": "two\n"})
	tick(false)
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		_ = ctrl.Refresh(t.Context(), "web")
		_, quiet := obs.last()
		return quiet, "no quiet tick after the commit"
	})
	if st, _ := ctrl.Statuses().Get("web"); st.Sync != reconcile.Synced || st.DeployedRevision != e.repo.Head(t, "main") {
		t.Errorf("status after quiet ticks = %s at %s, want synced at the new commit", st.Sync, st.DeployedRevision)
	}
	// A new definition, at the same commit and with nothing moved on the
	// swarm, is rendered: the worker keeps its definition's digest only
	// while the set it read it from stands. The commit's rollout ends
	// first: a task of it moving the snapshot would render anyway.
	harness.WaitRunning(t, e.cli, svc.ID, 1, 2*time.Minute)
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Health == health.Healthy })
	tick(true)
	writeFile(t, dir, "apps.yaml", appSet(strings.Replace(e.liveApp("web", true), "      revision: main\n",
		"      revision: main\n      variables: {IMAGE: "+e.v2+"}\n", 1)))
	e.waitImage(t, e.v2, 2*time.Minute)
}

// An application that left the set stays out of the status (and so out of
// the metrics): health, recomputed for every rendered release at each
// change of the swarm, once brought it back at the next change.
func TestApplicationThatLeftTheSetStaysOutOfTheStatus(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	dir := t.TempDir()
	apps := writeFile(t, dir, "apps.yaml", appSet(e.app("web", true), e.bystander()))
	ctrl := e.controller(t, appset.FileSource{Path: apps})
	run(t, ctrl)
	waitStatus(t, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Sync == reconcile.Synced && s.Health == health.Healthy
	})
	waitStatus(t, ctrl, "bystander", time.Minute, func(s reconcile.AppStatus) bool { return s.Plan != nil })

	writeFile(t, dir, "apps.yaml", appSet(e.app("web", true)))
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		_, ok := ctrl.Statuses().Get("bystander")
		return !ok, "bystander is still in the status"
	})
	e.update(t, "web", func(s *swarm.ServiceSpec) { two := uint64(2); s.Mode.Replicated.Replicas = &two })
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Desired == 2 })
	if st, ok := ctrl.Statuses().Get("bystander"); ok {
		t.Errorf("the application that left the set is back in the status after a change of the swarm: %+v", st)
	}
}

// A wake by the swarm asks git nothing, so it must not put off the tick
// that does: with the application's objects changed every two seconds,
// a push still lands on the application's 10 s interval.
func TestSwarmWakesDoNotPutOffTheGitTick(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.liveApp("web", true)))})
	run(t, ctrl)
	svc := e.waitImage(t, e.v1, 2*time.Minute)
	harness.WaitRunning(t, e.cli, svc.ID, 1, 2*time.Minute)

	// Someone scales the service by hand every two seconds; each scale
	// wakes the application, which scales it back.
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			s, _, err := e.cli.ServiceInspectWithRaw(ctx, svc.ID, swarm.ServiceInspectOptions{})
			if err != nil || s.Spec.Mode.Replicated == nil {
				continue
			}
			three := uint64(3)
			s.Spec.Mode.Replicated.Replicas = &three
			_, _ = e.cli.ServiceUpdate(ctx, s.ID, s.Version, s.Spec, swarm.ServiceUpdateOptions{}) // a lost race with the correction is fine
		}
	})
	harness.Eventually(t, 20*time.Second, func(context.Context) (bool, string) {
		return len(e.events.of(notify.DriftConverged)) > 0, "no correction yet"
	})
	e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
	// Two intervals and the rollout: a tick put off by every wake never comes.
	e.waitImage(t, e.v2, time.Minute)
}

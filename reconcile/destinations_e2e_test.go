package reconcile_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	skepswarm "github.com/skep-cd/skep/swarm"
)

// TestAMovedReleaseStaysUntilItsMoveIsSynced: the app set moves an
// application (syncPolicy.prune on, automated off) from the local swarm to
// a second one. However many prune checks run before its sync, the old
// release stays: the sync that installs it at the new swarm must still find
// it, to say where it moved from. Once the move is synced, the old release
// goes. Before this held, a prune check that fell between the app-set reload
// and the sync removed the old release and the sync said "install" (seen in
// CI, in TestOneControllerKeepsTwoSwarms).
func TestAMovedReleaseStaysUntilItsMoveIsSynced(t *testing.T) {
	e := newEnv(t)
	second := harness.RequireSwarm2(t)
	harness.TestImage(t, second.Client, harness.ImageOptions{Version: "v1"})
	harness.CleanupStack(t, second.Client, e.ns)
	e.repo.Commit(t, "main", map[string]string{
		"compose.yaml": "services:\n  web:\n    image: ${IMAGE}\n    deploy: {endpoint_mode: dnsrr, replicas: 1}\n",
		".env":         "IMAGE=" + e.v1 + "\n"})
	entry := func(swarmName string, automated bool) string {
		return appSet(fmt.Sprintf(`  - name: web
    release: %s
    source: {repo: %s, revision: main}
    destination: {swarm: %q}
    syncPolicy: {automated: %t, interval: 10s, resolveImage: never, prune: true}
`, e.ns, e.repo.URL, swarmName, automated))
	}
	dir := t.TempDir()
	apps := writeFile(t, dir, "apps.yaml", entry("", true))

	edge, err := skepswarm.Connect(t.Context(), skepswarm.Options{Destination: skepswarm.Destination{Name: "edge",
		Managers: []skepswarm.Manager{{Host: second.Sock}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = edge.Close() })
	ctrl := e.controllerWith(t, appset.FileSource{Path: apps}, reconcile.Options{Destinations: map[string]reconcile.Remote{
		"edge": {Engine: edge, Live: skepswarm.NewWatcher(edge, skepswarm.WatcherOptions{})}}})
	run(t, ctrl)
	e.waitImage(t, e.v1, 2*time.Minute)

	writeFile(t, dir, "apps.yaml", entry("edge", false))
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		got := ctrl.Applications()
		return len(got) == 1 && got[0].Destination.Swarm == "edge", fmt.Sprintf("applications %+v", got)
	})
	// The move waits for a manual sync: prune checks run meanwhile.
	waitPruneChecks(t, ctrl, 2)
	if s, err := e.service(t.Context(), "web"); err != nil || s == nil {
		t.Fatalf("the old release was pruned before its move was synced (%v)", err)
	}
	orphans := ctrl.Overview().Orphans
	if !slices.ContainsFunc(orphans, func(o reconcile.Orphan) bool {
		return o.Application == "web" && o.Swarm == "" && strings.Contains(o.Reason, `moved to swarm "edge"; kept until the move is synced there`)
	}) {
		t.Errorf("orphans = %+v, want web's old release kept until the move is synced", orphans)
	}

	if err := ctrl.SyncNow("web", "alice"); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		s, err := harness.ServiceNamed(ctx, second.Client, e.ns+"_web")
		return err == nil && s != nil, fmt.Sprintf("web not on the second swarm (%v)", err)
	})
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		s, err := e.service(ctx, "web")
		return err == nil && s == nil, fmt.Sprintf("the old release is still on the local swarm (%v)", err)
	})
	started := e.events.of(notify.SyncStarted)
	if !slices.ContainsFunc(started, func(ev notify.Event) bool {
		return ev.Swarm == "edge" && ev.Actor == "alice" && strings.Contains(ev.Message, `moved from the local swarm to swarm "edge"`)
	}) {
		t.Errorf("sync-started events %+v, want alice's sync on edge saying the release moved", started)
	}
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		got := ctrl.Overview().Orphans
		return len(got) == 0, fmt.Sprintf("orphans after the move = %+v, want none", got)
	})
}

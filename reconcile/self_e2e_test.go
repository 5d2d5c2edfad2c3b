package reconcile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	skepswarm "github.com/skep-cd/skep/swarm"
)

// selfApp is e's application marked self, with prune on.
func (e *env) selfApp() string {
	return strings.Replace(e.app("skep", true), "  - name: skep\n", "  - name: skep\n    self: true\n", 1) +
		"      prune: true\n"
}

// controllerAndWeb is a release of the controller's service and a web.
func controllerAndWeb(controller, web string) string {
	return fmt.Sprintf("services:\n  controller:\n    image: %s\n    deploy: {endpoint_mode: dnsrr, replicas: 1}\n  web:\n    image: %s\n    deploy: {endpoint_mode: dnsrr, replicas: 1}\n", controller, web)
}

// A self application stalls, writing nothing, while the controller runs
// as no swarm service: it would start a second controller.
func TestSelfApplicationStallsWhenTheControllerRunsAsNoService(t *testing.T) {
	e := newEnv(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": controllerAndWeb(e.v1, e.v1)})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.selfApp()))})
	run(t, ctrl)
	st := waitStatus(t, ctrl, "skep", time.Minute, func(s reconcile.AppStatus) bool { return s.LastError != "" })
	if !strings.Contains(st.LastError, "runs as no swarm service") {
		t.Errorf("status error = %q, want it to say the controller runs as no service", st.LastError)
	}
	time.Sleep(12 * time.Second) // another interval: reported once, not per tick
	if failed := e.events.of(notify.SyncFailed); len(failed) != 1 {
		t.Errorf("sync-failed events = %+v, want one", failed)
	}
	if s, err := e.serviceNamed(t, e.ns+"_web"); err != nil || s != nil {
		t.Errorf("the stalled self application deployed web: %v, %v", s, err)
	}
}

// The controller's own service (here a hand-made one the controller is
// told it runs as) is taken over with one self-update-issued, a release
// that drops it is refused, and when the application leaves the set the
// rest of its release is pruned but the controller's service stays.
func TestSelfApplicationTakesTheControllerOverAndNeverPrunesIt(t *testing.T) {
	e := newEnv(t)
	replicas := uint64(1)
	resp, err := e.cli.ServiceCreate(t.Context(), swarm.ServiceSpec{
		Annotations:  swarm.Annotations{Name: e.ns + "_controller", Labels: map[string]string{"com.docker.stack.namespace": e.ns}},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{Image: e.v1}},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &replicas}},
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR},
	}, swarm.ServiceCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	self := skepswarm.Self{ServiceID: resp.ID, ServiceName: e.ns + "_controller"}
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": controllerAndWeb(e.v2, e.v1)})
	dir := t.TempDir()
	apps := writeFile(t, dir, "apps.yaml", appSet(e.selfApp()))
	ctrl := e.controllerWith(t, appset.FileSource{Path: apps}, reconcile.Options{PruneApplications: true, Self: self})
	run(t, ctrl)

	waitService(t, e, e.ns+"_controller", e.v2)
	waitStatus(t, ctrl, "skep", time.Minute, func(s reconcile.AppStatus) bool { return s.Sync == reconcile.Synced && s.LastError == "" })
	issued := e.events.of(notify.SelfUpdateIssued)
	if len(issued) != 1 || !strings.Contains(issued[0].Message, e.v1+" → "+e.v2) {
		t.Errorf("self-update-issued events = %+v, want one from v1 to v2", issued)
	}
	if s, err := e.serviceNamed(t, e.ns+"_web"); err != nil || s == nil {
		t.Fatalf("web: %v, %v", s, err)
	}

	// A commit without the controller's service would prune it: refused.
	dropped := e.repo.Commit(t, "main", map[string]string{"compose.yaml": fmt.Sprintf("services:\n  web:\n    image: %s\n    deploy: {endpoint_mode: dnsrr, replicas: 1}\n", e.v1)})
	st := waitStatus(t, ctrl, "skep", time.Minute, func(s reconcile.AppStatus) bool { return s.Revision == dropped && s.LastError != "" })
	if !strings.Contains(st.LastError, "does not declare") {
		t.Errorf("status error = %q, want the release refused for dropping the controller", st.LastError)
	}

	// The application leaves the set: its web goes, the controller stays.
	if err := os.WriteFile(filepath.Join(dir, "apps.yaml"), []byte(appSet(e.bystander())), 0o644); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		s, err := e.serviceNamed(t, e.ns+"_web")
		return err == nil && s == nil, fmt.Sprintf("web still there: %v", err)
	})
	if s, err := e.serviceNamed(t, e.ns+"_controller"); err != nil || s == nil || s.ID != resp.ID {
		t.Errorf("the controller's own service after its application left: %v, %v; want it kept", s, err)
	}
}

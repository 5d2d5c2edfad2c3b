package cli_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	dswarm "github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	skepclient "github.com/skep-cd/skep/client"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/wire"
)

// selfEnv is a controller that runs as a swarm service deployed from its
// own app set: the ops repository holds the app set (a self application
// and a web application) and the controller's stack file.
type selfEnv struct {
	docker *client.Client
	ns     string // the controller's release and stack
	repo   *harness.Repo
	api    *skepclient.Client
	images map[string]string // by version: v1, v2 and broken controllers
	web    string            // the test application's image
	addr   string            // where the controller listens, on the host network
	socket string            // the Engine's socket on the host
	secret string            // the admin token's swarm secret
}

// skepImage builds a FROM-scratch image of the static skep binary, its tag
// taken from the content; broken makes an image whose entrypoint does not
// exist, so its container never starts.
func skepImage(t *testing.T, docker *client.Client, version string, broken bool) string {
	t.Helper()
	bin, err := os.ReadFile(skepBinary)
	if err != nil {
		t.Fatal(err)
	}
	entry := `["/skep"]`
	if broken {
		entry = `["/not-skep"]`
	}
	dockerfile := fmt.Sprintf("FROM scratch\nCOPY skep /skep\nLABEL io.skep.test.version=%s\nENTRYPOINT %s\n", version, entry)
	return harness.BuildImage(t, docker, "skep-self-e2e", version, map[string][]byte{"Dockerfile": []byte(dockerfile), "skep": bin})
}

// controllerStack is the controller's own stack file at image: on the
// host network (it reaches the test's git server on 127.0.0.1), with the
// Engine's socket, its data in a volume and its token from a secret.
// Swarm rolls an update back when the new task does not start.
func (e *selfEnv) controllerStack(image string) string {
	return fmt.Sprintf(`services:
  controller:
    image: %s
    command:
      - controller
      - --appset-repo=%s
      - --appset-revision=main
      - --appset-path=apps.yaml
      - --data=/var/lib/skep
      - --listen=%s
      - --controller-id=%s
      - --log-level=debug
    environment:
      SKEP_ADMIN_TOKEN_FILE: /run/secrets/admin
    secrets:
      - {source: admin, target: admin}
    volumes:
      - {type: bind, source: %s, target: /var/run/docker.sock}
      - {type: volume, source: data, target: /var/lib/skep}
    networks: [hostnet]
    deploy:
      replicas: 1
      update_config: {order: stop-first, failure_action: rollback, monitor: 5s}
      rollback_config: {order: stop-first}
networks:
  hostnet: {external: true, name: host}
secrets:
  admin: {external: true, name: %s}
volumes:
  data: {}
`, image, e.repo.URL, e.addr, e.ns, e.socket, e.secret)
}

// appSet is the ops repository's app set: the controller itself, and a
// web application it must leave alone while it upgrades itself.
func (e *selfEnv) appSet() string {
	return fmt.Sprintf(`apiVersion: skep/v1
applications:
  - name: skep
    self: true
    release: %s
    source: {repo: %s, revision: main, path: deploy}
    syncPolicy: {automated: true, prune: true, interval: 10s, resolveImage: never}
    allow: {hostPaths: [%s], secrets: [%s], networks: [host]}
  - name: web
    release: %s-web
    source: {repo: %s, revision: main, path: web}
    syncPolicy: {automated: true, interval: 10s, resolveImage: never}
`, e.ns, e.repo.URL, e.socket, e.secret, e.ns, e.repo.URL)
}

func newSelfEnv(t *testing.T) *selfEnv {
	t.Helper()
	if skepBinary == "" {
		t.Skip("no skep binary in -short mode")
	}
	docker := harness.RequireSwarm(t)
	git := harness.StartGitServer(t, harness.GitServerOptions{})
	e := &selfEnv{
		docker: docker,
		ns:     harness.Name(t, "self"),
		web:    harness.TestImage(t, docker, harness.ImageOptions{Version: "v1"}),
		addr:   freeAddr(t),
		images: map[string]string{},
	}
	e.secret = e.ns + "-admin-token"
	host := docker.DaemonHost()
	if !strings.HasPrefix(host, "unix://") {
		t.Fatalf("the controller service needs the Engine's unix socket; DOCKER_HOST is %s", host)
	}
	e.socket = strings.TrimPrefix(host, "unix://")
	for _, v := range []string{"v1", "v2"} {
		e.images[v] = skepImage(t, docker, v, false)
	}
	e.images["broken"] = skepImage(t, docker, "broken", true)

	// Removed last (cleanups run in reverse): the volume and the secret
	// once the stacks' tasks are gone.
	t.Cleanup(func() { e.removeLeftovers(t) })
	// The controller goes first: removed while it still ran, the web
	// application was deployed again by it, and outlived the test.
	harness.CleanupStack(t, docker, e.ns+"-web")
	harness.CleanupStack(t, docker, e.ns)
	token := "self-e2e-" + e.ns
	if _, err := docker.SecretCreate(t.Context(), dswarm.SecretSpec{Annotations: dswarm.Annotations{Name: e.secret}, Data: []byte(token)}); err != nil {
		t.Fatal(err)
	}
	api, err := skepclient.New(skepclient.Options{Server: "http://" + e.addr, Token: wire.NewToken(token)})
	if err != nil {
		t.Fatal(err)
	}
	e.api = api
	e.repo = git.CreateRepo(t, "ops")
	return e
}

// removeLeftovers removes the controller's data volume and token secret,
// retrying while the removed service's task drains.
func (e *selfEnv) removeLeftovers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
	defer cancel()
	for {
		verr := e.docker.VolumeRemove(ctx, e.ns+"_data", true)
		serr := e.docker.SecretRemove(ctx, e.secret)
		if (verr == nil || cerrdefs.IsNotFound(verr)) && (serr == nil || cerrdefs.IsNotFound(serr)) {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("cleanup: volume: %v; secret: %v", verr, serr)
			return
		case <-time.After(time.Second):
		}
	}
}

// commit writes the controller's stack at image, with the app set and the
// web application, and returns the commit.
func (e *selfEnv) commit(t *testing.T, image string) string {
	t.Helper()
	return e.repo.Commit(t, "main", map[string]string{
		"apps.yaml":        e.appSet(),
		"deploy/stack.yml": e.controllerStack(image),
		"web/compose.yaml": fmt.Sprintf("services:\n  web:\n    image: %s\n    deploy: {endpoint_mode: dnsrr, replicas: 1}\n", e.web),
	})
}

// controllerService reads the controller's own service.
func (e *selfEnv) controllerService(t *testing.T) dswarm.Service {
	t.Helper()
	s, err := harness.ServiceNamed(t.Context(), e.docker, e.ns+"_controller")
	if err != nil || s == nil {
		t.Fatalf("controller service: %v, %v", s, err)
	}
	return *s
}

// runningImage returns the image of the controller's running task, ""
// while none runs.
func (e *selfEnv) runningImage(ctx context.Context, serviceID string) string {
	tasks, err := e.docker.TaskList(ctx, dswarm.TaskListOptions{})
	if err != nil {
		return ""
	}
	for _, tk := range tasks {
		if tk.ServiceID == serviceID && tk.Status.State == dswarm.TaskStateRunning && tk.DesiredState == dswarm.TaskStateRunning {
			return tk.Spec.ContainerSpec.Image
		}
	}
	return ""
}

// events lists the controller's events of typ for app, oldest first.
func (e *selfEnv) events(ctx context.Context, app, typ string) ([]wire.EventItem, error) {
	list, err := e.api.Events(ctx, skepclient.EventQuery{Applications: []string{app}, Types: []string{typ}, Limit: 1000})
	if err != nil {
		return nil, err
	}
	return list.Events, nil
}

// waitSynced waits until the controller answers and app is synced at
// commit with no error.
func (e *selfEnv) waitSynced(t *testing.T, app, commit string, timeout time.Duration) {
	t.Helper()
	harness.Eventually(t, timeout, func(ctx context.Context) (bool, string) {
		d, err := e.api.Application(ctx, app)
		if err != nil {
			return false, err.Error()
		}
		a := d.Application
		return a.Sync == "synced" && a.DeployedRevision == commit && a.LastError == "",
			fmt.Sprintf("%s: sync %s at %s (want %s), error %q", app, a.Sync, a.DeployedRevision, commit, a.LastError)
	})
}

func ofRevision(items []wire.EventItem, commit string) []wire.EventItem {
	var out []wire.EventItem
	for _, it := range items {
		if it.Revision == commit {
			out = append(out, it)
		}
	}
	return out
}

// The controller, deployed by hand from its stack file and then kept by
// its own app set, upgrades itself from a commit (one self-update-issued,
// the new task running, nothing else rewritten, history kept), and an
// upgrade to an image that does not start is rolled back by Swarm and
// reported once by the controller that comes back.
func TestControllerUpgradesItselfFromItsOwnAppSet(t *testing.T) {
	e := newSelfEnv(t)
	first := e.commit(t, e.images["v1"])
	e.deployByHand(t, e.controllerStack(e.images["v1"]))

	// It takes its own stack over (one write of the labels, no restart)
	// and deploys the web application.
	e.waitSynced(t, "skep", first, 3*time.Minute)
	e.waitSynced(t, "web", first, 2*time.Minute)
	if d, err := e.api.Application(t.Context(), "skep"); err != nil || !d.Application.Self {
		t.Errorf("GET skep: self = %v (%v), want true", d.Application.Self, err)
	}
	adopted := e.controllerService(t)
	if adopted.Spec.Labels["io.skep.controller"] != e.ns {
		t.Errorf("controller service labels after the takeover: %v, want io.skep.controller=%s", adopted.Spec.Labels, e.ns)
	}
	web, err := harness.ServiceNamed(t.Context(), e.docker, e.ns+"-web_web")
	if err != nil || web == nil {
		t.Fatalf("web service: %v, %v", web, err)
	}
	before, err := e.events(t.Context(), "web", "sync-succeeded")
	if err != nil || len(before) == 0 {
		t.Fatalf("web's sync-succeeded before the upgrade: %v, %v", before, err)
	}

	t.Run("a commit upgrades the controller: one self-update-issued, the new task, nothing else rewritten", func(t *testing.T) {
		second := e.commit(t, e.images["v2"])
		harness.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
			img := e.runningImage(ctx, adopted.ID)
			return img == e.images["v2"], "running " + img
		})
		e.waitSynced(t, "skep", second, 2*time.Minute)
		// Two more intervals of the new controller: it must find nothing
		// to write, the upgrade included.
		time.Sleep(25 * time.Second)
		issued, err := e.events(t.Context(), "skep", "self-update-issued")
		if err != nil {
			t.Fatal(err)
		}
		if got := ofRevision(issued, second); len(got) != 1 || !strings.Contains(got[0].Message, e.images["v1"]+" → "+e.images["v2"]) {
			t.Errorf("self-update-issued at the upgrade: %+v, want one from v1 to v2", got)
		}
		if ok, err := e.events(t.Context(), "skep", "sync-succeeded"); err != nil || len(ofRevision(ok, second)) != 1 {
			t.Errorf("sync-succeeded at the upgrade: %+v, %v; want one", ofRevision(ok, second), err)
		}
		svc := e.controllerService(t)
		if svc.ID != adopted.ID || svc.PreviousSpec == nil || svc.PreviousSpec.TaskTemplate.ContainerSpec.Image != e.images["v1"] {
			t.Errorf("controller service after the upgrade: id %s (was %s), previous spec %+v; want the same service, last written from v1", svc.ID, adopted.ID, svc.PreviousSpec)
		}
		if now, err := harness.ServiceNamed(t.Context(), e.docker, e.ns+"-web_web"); err != nil || now == nil || writeMark(*now) != writeMark(*web) {
			t.Errorf("web was rewritten during the upgrade: %v, %v (%v before)", now, err, web)
		}
		// History survives: what the old controller recorded, the new one
		// serves.
		after, err := e.events(t.Context(), "web", "sync-succeeded")
		if err != nil || len(after) < len(before) || after[0].ID != before[0].ID {
			t.Errorf("web's history after the upgrade: %+v, %v; want it to start with %+v", after, err, before)
		}
		h, err := e.api.History(t.Context(), "skep")
		if err != nil || len(h.Releases) != 1 || len(h.Releases[0].Revisions) < 2 || len(h.Syncs) < 2 {
			t.Errorf("skep's history: %+v, %v; want the takeover and the upgrade, as revisions and syncs", h, err)
		}
	})

	t.Run("an upgrade to an image that does not start is rolled back by Swarm and reported once", func(t *testing.T) {
		third := e.commit(t, e.images["broken"])
		harness.Eventually(t, 4*time.Minute, func(ctx context.Context) (bool, string) {
			svc, _, err := e.docker.ServiceInspectWithRaw(ctx, adopted.ID, dswarm.ServiceInspectOptions{})
			if err != nil {
				return false, err.Error()
			}
			state := ""
			if svc.UpdateStatus != nil {
				state = string(svc.UpdateStatus.State)
			}
			img := e.runningImage(ctx, adopted.ID)
			return state == string(dswarm.UpdateStateRollbackCompleted) && img == e.images["v2"], "update " + state + ", running " + img
		})
		harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
			failed, err := e.events(ctx, "skep", "sync-failed")
			if err != nil {
				return false, err.Error()
			}
			got := ofRevision(failed, third)
			return len(got) > 0 && strings.Contains(got[len(got)-1].Message, "rolled back"), fmt.Sprintf("sync-failed at the broken commit: %+v", got)
		})
		// The controller that came back must not push the failing spec again.
		time.Sleep(25 * time.Second)
		issued, err := e.events(t.Context(), "skep", "self-update-issued")
		if err != nil {
			t.Fatal(err)
		}
		if got := ofRevision(issued, third); len(got) != 1 {
			t.Errorf("self-update-issued at the broken commit: %+v, want exactly one", got)
		}
		if failed, _ := e.events(t.Context(), "skep", "sync-failed"); len(ofRevision(failed, third)) != 1 {
			t.Errorf("sync-failed at the broken commit: %+v, want one", ofRevision(failed, third))
		}
		if img := e.runningImage(t.Context(), adopted.ID); img != e.images["v2"] {
			t.Errorf("controller runs %q after the rollback, want %s", img, e.images["v2"])
		}
	})
}

// deployByHand deploys the controller's first stack as an operator does,
// with docker stack deploy, and dumps its logs if the test fails.
func (e *selfEnv) deployByHand(t *testing.T, stack string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "stack.yml")
	if err := os.WriteFile(file, []byte(stack), 0o600); err != nil {
		t.Fatal(err)
	}
	deploy := exec.CommandContext(t.Context(), "docker", "stack", "deploy", "--resolve-image", "never", "-c", file, e.ns)
	if out, err := deploy.CombinedOutput(); err != nil {
		t.Fatalf("docker stack deploy: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			e.dumpLogs(t)
		}
	})
}

// dumpLogs prints the controller service's logs for a failed test.
func (e *selfEnv) dumpLogs(t *testing.T) {
	out, err := exec.Command("docker", "service", "logs", "--raw", "--tail", "200", e.ns+"_controller").CombinedOutput()
	t.Logf("controller logs (%v):\n%s", err, out)
}

package cli_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	dswarm "github.com/docker/docker/api/types/swarm"

	skepclient "github.com/skep-cd/skep/client"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/lease"
	"github.com/skep-cd/skep/wire"
)

// haSelf is a selfEnv whose controller runs as two replicas with leader
// election, both on this one node: each on the host network at a port of
// its own and with a data directory of its own, which Swarm's templates
// ({{.Task.Slot}}) give them through the environment and the mount.
type haSelf struct {
	*selfEnv
	peer string // the replicas' shared token's swarm secret
	base int    // replica n listens on port base*10+n
	data string // replica n keeps its data in data/n
}

func newHASelf(t *testing.T) *haSelf {
	t.Helper()
	e := &haSelf{selfEnv: newSelfEnv(t), base: freePortBase(t), data: t.TempDir()}
	for _, slot := range []string{"1", "2"} {
		// Swarm mounts a bind source that exists; the controller runs as
		// root in its scratch image.
		if err := os.Mkdir(filepath.Join(e.data, slot), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	e.peer = e.ns + "-peer-token"
	if _, err := e.docker.SecretCreate(t.Context(), dswarm.SecretSpec{Annotations: dswarm.Annotations{Name: e.peer}, Data: []byte("peer-" + e.ns)}); err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: these after the stack is gone.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 2*time.Minute)
		defer cancel()
		// Before newSelfEnv's cleanups: the replicas hold the secret.
		if err := harness.RemoveStack(ctx, e.docker, e.ns); err != nil {
			t.Errorf("cleanup of the controller's stack: %v", err)
		}
		for {
			err := e.docker.SecretRemove(ctx, e.peer)
			if err == nil || cerrdefs.IsNotFound(err) || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Second)
		}
		if err := e.docker.ConfigRemove(ctx, lease.ConfigName(e.ns)); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("cleanup: the lease: %v", err)
		}
	})
	api, err := skepclient.New(skepclient.Options{Server: "http://" + e.replicaAddr(1), Token: wire.NewToken("self-e2e-" + e.ns)})
	if err != nil {
		t.Fatal(err)
	}
	e.api = api
	return e
}

// freePortBase finds a base whose ports base*10+1 and base*10+2 are both
// free on 127.0.0.1.
func freePortBase(t *testing.T) int {
	t.Helper()
	for base := 2000 + os.Getpid()%3000; base < 6000; base += 7 {
		free := true
		for _, n := range []int{1, 2} {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base*10+n)))
			if err != nil {
				free = false
				break
			}
			ln.Close()
		}
		if free {
			return base
		}
	}
	t.Fatal("no pair of free ports")
	return 0
}

func (e *haSelf) replicaAddr(slot int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(e.base*10+slot))
}

// stack is deploy/stack-ha.yml's shape at image for this one node: two
// replicas, one at a time stopped first on an update (the leader's stop
// hands the lease over), rolled back when the new task does not start.
func (e *haSelf) stack(image string) string {
	return fmt.Sprintf(`services:
  controller:
    image: %[1]s
    command:
      - controller
      - --leader-election
      - --appset-repo=%[2]s
      - --appset-revision=main
      - --appset-path=apps.yaml
      - --data=/var/lib/skep
      - --controller-id=%[3]s
      - --log-level=debug
    environment:
      SKEP_ADMIN_TOKEN_FILE: /run/secrets/admin
      SKEP_PEER_TOKEN_FILE: /run/secrets/peer
      SKEP_LISTEN: "127.0.0.1:%[4]d{{.Task.Slot}}"
      SKEP_ADVERTISE_ADDR: "127.0.0.1:%[4]d{{.Task.Slot}}"
    secrets:
      - {source: admin, target: admin}
      - {source: peer, target: peer}
    volumes:
      - {type: bind, source: %[5]s, target: /var/run/docker.sock}
      - {type: bind, source: "%[6]s/{{.Task.Slot}}", target: /var/lib/skep}
    networks: [hostnet]
    deploy:
      replicas: 2
      update_config: {parallelism: 1, order: stop-first, failure_action: rollback, monitor: 5s}
      rollback_config: {parallelism: 1, order: stop-first}
networks:
  hostnet: {external: true, name: host}
secrets:
  admin: {external: true, name: %[7]s}
  peer: {external: true, name: %[8]s}
`, image, e.repo.URL, e.ns, e.base, e.socket, e.data, e.secret, e.peer)
}

// commit writes the app set, the replicated controller's stack at image
// and the web application, and returns the commit.
func (e *haSelf) commit(t *testing.T, image string) string {
	t.Helper()
	apps := strings.Replace(e.appSet(), "allow: {hostPaths: ["+e.socket+"], secrets: ["+e.secret+"]",
		"allow: {hostPaths: ["+e.socket+", "+e.data+"], secrets: ["+e.secret+", "+e.peer+"]", 1)
	if apps == e.appSet() {
		t.Fatal("the app set's allow key moved: the replicas' data and token would be refused")
	}
	return e.repo.Commit(t, "main", map[string]string{
		"apps.yaml":        apps,
		"deploy/stack.yml": e.stack(image),
		"web/compose.yaml": fmt.Sprintf("services:\n  web:\n    image: %s\n    deploy: {endpoint_mode: dnsrr, replicas: 1}\n", e.web),
	})
}

// runningImages counts the controller's running tasks by image.
func (e *haSelf) runningImages(ctx context.Context, serviceID string) map[string]int {
	tasks, err := e.docker.TaskList(ctx, dswarm.TaskListOptions{})
	if err != nil {
		return nil
	}
	out := map[string]int{}
	for _, tk := range tasks {
		if tk.ServiceID == serviceID && tk.Status.State == dswarm.TaskStateRunning && tk.DesiredState == dswarm.TaskStateRunning {
			out[tk.Spec.ContainerSpec.Image]++
		}
	}
	return out
}

// leadership samples, from either replica, who leads: the terms seen, in
// order, and the longest stretch in which no replica named a leader.
type leadership struct {
	mu      sync.Mutex
	terms   []int64
	leaders map[int64]string
	last    time.Time
	gap     time.Duration
}

func (l *leadership) sample(ctx context.Context, clients []*skepclient.Client) {
	now := time.Now()
	led := false
	for _, c := range clients {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := c.Status(cctx)
		cancel()
		if err != nil || st.Replication == nil || st.Replication.Leader == nil {
			continue
		}
		led = true
		r := st.Replication
		l.mu.Lock()
		if n := len(l.terms); n == 0 || l.terms[n-1] < r.Term {
			l.terms = append(l.terms, r.Term)
		}
		if was, ok := l.leaders[r.Term]; ok && was != r.Leader.Name {
			l.leaders[r.Term] = was + " and " + r.Leader.Name
		} else {
			l.leaders[r.Term] = r.Leader.Name
		}
		l.mu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if led {
		if !l.last.IsZero() {
			l.gap = max(l.gap, now.Sub(l.last))
		}
		l.last = now
	}
}

// TestReplicatedControllerUpgradesItselfOneReplicaAtATime: two replicas
// of a controller that keeps itself (self: true). A commit of a new
// image is issued once by the leader; Swarm replaces one replica at a
// time, and each stopped leader hands the lease over at once; through
// the hand-overs the upgrade is not issued again, its sync succeeds once,
// the web application is not rewritten, each term has one leader, and
// no stretch without a leader lasts as long as a lease.
func TestReplicatedControllerUpgradesItselfOneReplicaAtATime(t *testing.T) {
	e := newHASelf(t)
	first := e.commit(t, e.images["v1"])
	e.deployByHand(t, e.stack(e.images["v1"]))
	e.waitSynced(t, "skep", first, 3*time.Minute)
	e.waitSynced(t, "web", first, 2*time.Minute)
	adopted := e.controllerService(t)
	web, err := harness.ServiceNamed(t.Context(), e.docker, e.ns+"-web_web")
	if err != nil || web == nil {
		t.Fatalf("web service: %v, %v", web, err)
	}
	var clients []*skepclient.Client
	for _, slot := range []int{1, 2} {
		c, err := skepclient.New(skepclient.Options{Server: "http://" + e.replicaAddr(slot), Token: wire.NewToken("self-e2e-" + e.ns)})
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	// A standby forwards the status to the leader, which lists itself and
	// each standby that follows it.
	harness.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		st, err := clients[1].Status(cctx)
		if err != nil || st.Replication == nil {
			return false, fmt.Sprintf("status: %v (replication %v)", err, st.Replication)
		}
		roles := map[string]int{}
		for _, r := range st.Replication.Replicas {
			roles[r.Role]++
		}
		return roles[wire.RoleLeader] == 1 && roles[wire.RoleStandby] == 1, fmt.Sprintf("replicas %+v", st.Replication.Replicas)
	})

	lead := &leadership{leaders: map[int64]string{}}
	sampling, stopSampling := context.WithCancel(t.Context())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampling.Err() == nil {
			lead.sample(sampling, clients)
			select {
			case <-sampling.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()

	second := e.commit(t, e.images["v2"])
	harness.Eventually(t, 4*time.Minute, func(ctx context.Context) (bool, string) {
		imgs := e.runningImages(ctx, adopted.ID)
		return imgs[e.images["v2"]] == 2 && len(imgs) == 1, fmt.Sprintf("running %v", imgs)
	})
	e.waitSynced(t, "skep", second, 2*time.Minute)
	// Two more intervals of the new leader: it must find nothing to write.
	time.Sleep(25 * time.Second)
	stopSampling()
	<-sampled

	issued, err := e.events(t.Context(), "skep", "self-update-issued")
	if err != nil {
		t.Fatal(err)
	}
	if got := ofRevision(issued, second); len(got) != 1 {
		t.Errorf("self-update-issued at the upgrade: %+v, want one", got)
	}
	if ok, err := e.events(t.Context(), "skep", "sync-succeeded"); err != nil || len(ofRevision(ok, second)) != 1 {
		t.Errorf("sync-succeeded at the upgrade: %+v, %v; want one", ofRevision(ok, second), err)
	}
	svc := e.controllerService(t)
	if svc.PreviousSpec == nil || svc.PreviousSpec.TaskTemplate.ContainerSpec.Image != e.images["v1"] {
		t.Errorf("controller service after the upgrade: previous spec %+v; want it last written from v1, once", svc.PreviousSpec)
	}
	if now, err := harness.ServiceNamed(t.Context(), e.docker, e.ns+"-web_web"); err != nil || now == nil || writeMark(*now) != writeMark(*web) {
		t.Errorf("web was rewritten during the upgrade: %v, %v", now, err)
	}

	lead.mu.Lock()
	defer lead.mu.Unlock()
	t.Logf("terms %v, leaders %v, longest stretch without a leader %s", lead.terms, lead.leaders, lead.gap.Round(time.Millisecond))
	if len(lead.terms) < 2 {
		t.Errorf("terms seen %v, want a hand-over to the upgraded replica", lead.terms)
	}
	for term, who := range lead.leaders {
		if strings.Contains(who, " and ") {
			t.Errorf("term %d had two leaders: %s", term, who)
		}
	}
	if lead.gap >= lease.DefaultDuration {
		t.Errorf("%s without a leader, want a stopped leader to hand over before its lease (%s) runs out", lead.gap, lease.DefaultDuration)
	}
}

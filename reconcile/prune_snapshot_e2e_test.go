package reconcile_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/stack"
	skepswarm "github.com/skep-cd/skep/swarm"
)

// laggingReader lets a test hold the live snapshot's lists where a slow
// manager leaves them: once armed, a full list's configs wait (its
// services were listed already) until lag is called; from then on every
// services or tasks list waits until catchUp, so the snapshot that list
// published stays the current one.
type laggingReader struct {
	skepswarm.Reader

	mu      sync.Mutex
	armed   bool
	lagging bool
	held    chan struct{} // closed when an armed config list waits
	stale   chan struct{} // closed when a list after lag waits
	lagged  chan struct{} // closed by lag
	caught  chan struct{} // closed by catchUp
}

func newLaggingReader(r skepswarm.Reader) *laggingReader {
	return &laggingReader{Reader: r, held: make(chan struct{}), stale: make(chan struct{}),
		lagged: make(chan struct{}), caught: make(chan struct{})}
}

func (l *laggingReader) arm() { l.mu.Lock(); l.armed = true; l.mu.Unlock() }

// lag lets the held config list through and holds every later list.
func (l *laggingReader) lag() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.lagging {
		l.lagging = true
		close(l.lagged)
	}
}

// catchUp lets every list through again.
func (l *laggingReader) catchUp() {
	l.lag()
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.caught:
	default:
		close(l.caught)
	}
}

func (l *laggingReader) ConfigList(ctx context.Context, o swarm.ConfigListOptions) ([]swarm.Config, error) {
	l.mu.Lock()
	armed := l.armed
	l.armed = false
	l.mu.Unlock()
	if armed {
		close(l.held)
		select {
		case <-l.lagged:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return l.Reader.ConfigList(ctx, o)
}

// waitCaughtUp holds a list made after lag until catchUp.
func (l *laggingReader) waitCaughtUp(ctx context.Context) error {
	l.mu.Lock()
	lagging := l.lagging
	select {
	case <-l.caught:
		lagging = false
	default:
	}
	if lagging {
		select {
		case <-l.stale:
		default:
			close(l.stale)
		}
	}
	l.mu.Unlock()
	if !lagging {
		return nil
	}
	select {
	case <-l.caught:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *laggingReader) ServiceList(ctx context.Context, o swarm.ServiceListOptions) ([]swarm.Service, error) {
	if err := l.waitCaughtUp(ctx); err != nil {
		return nil, err
	}
	return l.Reader.ServiceList(ctx, o)
}

func (l *laggingReader) TaskList(ctx context.Context, o swarm.TaskListOptions) ([]swarm.Task, error) {
	if err := l.waitCaughtUp(ctx); err != nil {
		return nil, err
	}
	return l.Reader.TaskList(ctx, o)
}

// TestPruneWaitsForASnapshotThatSawTheReleasesServices pins "prune only
// what it provably created" against a lagging live snapshot: application a
// deploys while the snapshot's lists straddle its write (services listed
// before it, configs after it, as on a busy manager) and leaves the app set
// at once. The snapshot shows a's revision but not its service; pruning on
// it would remove the records and leave the service running, an orphan
// nothing proves is Skep's. The prune must wait for a snapshot that saw
// a's write, then remove service and records together, and leave b alone.
func TestPruneWaitsForASnapshotThatSawTheReleasesServices(t *testing.T) {
	e := newEnv(t)
	relB := e.ns + "-b"
	harness.CleanupStack(t, e.cli, relB)
	var live *laggingReader
	e.watch = func(r skepswarm.Reader) skepswarm.Reader {
		live = newLaggingReader(r)
		return live
	}
	t.Cleanup(func() { live.catchUp() })
	stackOf := func(image string) string {
		return fmt.Sprintf("services:\n  web:\n    image: %s\n    deploy: {replicas: 1, endpoint_mode: dnsrr}\n", image)
	}
	e.repo.Commit(t, "main", map[string]string{"a/compose.yaml": stackOf(e.v1), "b/compose.yaml": stackOf(e.v1)})
	inDir := func(app, dir string) string {
		return strings.Replace(app, "      revision: main\n", "      revision: main\n      path: "+dir+"\n", 1)
	}
	appA := inDir(e.app("a", true), "a")
	appB := inDir(strings.Replace(e.app("b", true), "    release: "+e.ns+"\n", "    release: "+relB+"\n", 1), "b")
	apps := writeFile(t, t.TempDir(), "apps.yaml", appSet(appB))
	ctrl := e.controllerWith(t, appset.FileSource{Path: apps}, reconcile.Options{PruneApplications: true})
	run(t, ctrl)

	svcB := waitService(t, e, relB+"_web", e.v1)
	waitStatus(t, ctrl, "b", time.Minute, func(s reconcile.AppStatus) bool { return !s.LastReconcile.IsZero() })
	recordsB := waitRecords(t, e, "b", func(n int) bool { return n > 0 })

	// A list starts and lists the services; its configs wait. A config of
	// no release makes the event that starts it.
	live.arm()
	poke, err := e.cli.ConfigCreate(t.Context(), swarm.ConfigSpec{Annotations: swarm.Annotations{Name: e.ns + "-poke"}, Data: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.cli.ConfigRemove(context.WithoutCancel(t.Context()), poke.ID) })
	waitClosed(t, live.held, "a list waiting for its configs")

	// a deploys its first release while that list waits, and leaves the
	// app set as soon as its revision is recorded.
	writeFile(t, filepath.Dir(apps), "apps.yaml", appSet(appA, appB))
	svcA := waitService(t, e, e.ns+"_web", e.v1)
	waitRecords(t, e, "a", func(n int) bool { return n > 0 })
	writeFile(t, filepath.Dir(apps), "apps.yaml", appSet(appB))
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		_, ok := ctrl.Statuses().Get("a")
		return !ok, "a still in the controller's app set"
	})

	// The list ends: its snapshot shows a's revision, not a's service, and
	// stays current while prune checks run on it.
	live.lag()
	waitClosed(t, live.stale, "the lagging snapshot published")
	waitPruneChecks(t, ctrl, 2)
	if s, err := e.serviceNamed(t, e.ns+"_web"); err != nil || s == nil || s.ID != svcA.ID {
		t.Fatalf("a's service while the snapshot lags = %v, %v; want it still there", s, err)
	}
	if n := countRecords(t, e, "a"); n == 0 {
		t.Errorf("a's revision records were removed while its service %s still runs; want them kept until the service is pruned", svcA.ID)
	}

	// A snapshot that saw a's write prunes service and records together.
	live.catchUp()
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		s, err := e.service(ctx, "web")
		return s == nil && err == nil, "a's service still deployed"
	})
	waitRecords(t, e, "a", func(n int) bool { return n == 0 })

	// Nothing of b was touched.
	waitPruneChecks(t, ctrl, 2)
	if s, err := e.serviceNamed(t, relB+"_web"); err != nil || !unwritten(svcB, s) {
		t.Errorf("b's service after a was pruned = %v, %v; want %s untouched", s, err, svcB.ID)
	}
	if n := countRecords(t, e, "b"); n != recordsB {
		t.Errorf("b's revision records after a was pruned: %d, want its %d", n, recordsB)
	}
}

// countRecords counts the revision records this controller keeps for app.
func countRecords(t *testing.T, e *env, app string) int {
	t.Helper()
	f := filters.NewArgs(filters.Arg("label", stack.LabelController+"="+e.id),
		filters.Arg("label", stack.LabelApplication+"="+app), filters.Arg("label", stack.LabelKind+"="+stack.KindRevision))
	list, err := e.cli.ConfigList(t.Context(), swarm.ConfigListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// waitRecords waits until the number of app's revision records satisfies
// cond, and returns it.
func waitRecords(t *testing.T, e *env, app string, cond func(int) bool) int {
	t.Helper()
	var n int
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		n = countRecords(t, e, app)
		return cond(n), fmt.Sprintf("%s has %d revision records", app, n)
	})
	return n
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("no %s within a minute", what)
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
}

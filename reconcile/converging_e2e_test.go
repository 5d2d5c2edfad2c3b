package reconcile_test

import (
	"context"
	"sync"
	"testing"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	skepswarm "github.com/skep-cd/skep/swarm"
)

// pausedReader is a live snapshot's reader whose service lists wait while
// it is paused: the snapshot stops following the swarm.
type pausedReader struct {
	skepswarm.Reader
	mu     sync.Mutex
	resume chan struct{} // nil while not paused
}

func (p *pausedReader) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resume = make(chan struct{})
}

func (p *pausedReader) unpause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume != nil {
		close(p.resume)
		p.resume = nil
	}
}

func (p *pausedReader) ServiceList(ctx context.Context, o dswarm.ServiceListOptions) ([]dswarm.Service, error) {
	p.mu.Lock()
	resume := p.resume
	p.mu.Unlock()
	if resume != nil {
		select {
		case <-resume:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return p.Reader.ServiceList(ctx, o)
}

// A sync ends when its write did; the live snapshot API readers see
// follows. Until it shows the write, Converging says so, and once it is ""
// the live services are the written ones: what `skep app sync --wait`
// waits for before it says the services converged.
func TestConvergingUntilTheLiveViewShowsTheWrite(t *testing.T) {
	e := newEnv(t)
	reader := &pausedReader{}
	t.Cleanup(reader.unpause)
	e.watch = func(r skepswarm.Reader) skepswarm.Reader { reader.Reader = r; return reader }
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": "services:\n  web:\n    image: ${IMAGE}\n    deploy: {endpoint_mode: dnsrr, replicas: 1}\n",
		".env": "IMAGE=" + e.v1 + "\n"})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.app("web", false)))})
	run(t, ctrl)
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return !s.LastReconcile.IsZero() })
	synced := func(want string) { syncAs(t, ctrl, "alice", want) }
	// converges waits until Converging is "" and checks that the live
	// service then runs image.
	converges := func(image string) {
		t.Helper()
		harness.Eventually(t, 2*time.Minute, func(context.Context) (bool, string) {
			why, err := ctrl.Converging("web")
			return err == nil && why == "", why
		})
		services, err := ctrl.LiveServices(t.Context(), "web")
		if err != nil || len(services) != 1 || services[0].Spec.TaskTemplate.ContainerSpec.Image != image {
			t.Fatalf("live services once Converging is empty = %+v, %v; want one on %s", services, err, image)
		}
	}

	synced(e.repo.Head(t, "main"))
	converges(e.v1)

	// The snapshot stops following the swarm: the sync of v2 ends, and the
	// live view still shows v1.
	reader.pause()
	second := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
	if err := ctrl.Refresh(t.Context(), "web"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Revision == second })
	synced(second)
	if why, err := ctrl.Converging("web"); err != nil || why == "" {
		t.Errorf("Converging after a sync the live snapshot has not seen = %q, %v; want why not", why, err)
	}
	reader.unpause()
	converges(e.v2)
}

// A requested sync deploys what git declares when it is asked for: a
// commit pushed a moment after the controller last read the branch is the
// one deployed, however long ls-remote answers are reused otherwise.
func TestSyncReadsTheBranchAfresh(t *testing.T) {
	e := newEnv(t)
	e.refsMaxAge = time.Hour
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": "services:\n  web:\n    image: ${IMAGE}\n    deploy: {endpoint_mode: dnsrr, replicas: 1}\n",
		".env": "IMAGE=" + e.v1 + "\n"})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.app("web", false)))})
	run(t, ctrl)
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return !s.LastReconcile.IsZero() })
	synced := func(want string) { syncAs(t, ctrl, "alice", want) }
	synced(e.repo.Head(t, "main"))
	// The branch was read moments ago, well within the cache's hour.
	synced(e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"}))
}

// syncAs asks for a sync of web as actor and fails t unless it succeeds at
// want, the branch's head when it was asked for.
func syncAs(t *testing.T, ctrl *reconcile.Controller, actor, want string) {
	t.Helper()
	q, err := ctrl.Sync(notify.WithActor(t.Context(), actor), "web", reconcile.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool {
		return s.LastRequestedSync.ID >= q.ID && s.LastRequestedSync.Outcome != reconcile.SyncRunning
	})
	if r := st.LastRequestedSync; r.Outcome != reconcile.SyncSucceeded || r.Revision != want {
		t.Fatalf("sync #%d = %+v, want it to succeed at %.12s, the branch's head when it was asked for", q.ID, r, want)
	}
}

package reconcile_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/reconcile"
	skepswarm "github.com/skep-cd/skep/swarm"
)

// slowFirstNodes is a Reader whose first node list takes a while, as a
// loaded manager's can.
type slowFirstNodes struct {
	skepswarm.Reader
	once sync.Once
}

func (s *slowFirstNodes) NodeList(ctx context.Context, opts swarm.NodeListOptions) ([]swarm.Node, error) {
	s.once.Do(func() {
		select {
		case <-time.After(3 * time.Second):
		case <-ctx.Done():
		}
	})
	return s.Reader.NodeList(ctx, opts)
}

// outcomes records the outcome class of each reconcile.
type outcomes struct {
	mu  sync.Mutex
	all []outcome.Class
}

func (o *outcomes) ObserveReconcile(ob reconcile.Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.all = append(o.all, ob.Outcome)
}

func (o *outcomes) list() []outcome.Class {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]outcome.Class(nil), o.all...)
}

// A controller's first pass, which starts before its swarm has been
// listed, waits for that list and writes the release checked against the
// nodes: it is not held back "waiting for the snapshot" by the placement
// check, nor written unchecked.
func TestTheFirstPassWaitsForTheSwarmsFirstListAndWrites(t *testing.T) {
	e := newEnv(t)
	e.watch = func(r skepswarm.Reader) skepswarm.Reader { return &slowFirstNodes{Reader: r} }
	port := harness.FreePort(t)
	commit := e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	obs := &outcomes{}
	ctrl := e.controllerWith(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.app("web", true)))}, reconcile.Options{Observer: obs})
	run(t, ctrl)
	waitStatus(t, ctrl, "web", 2*time.Minute, func(s reconcile.AppStatus) bool { return s.DeployedRevision == commit && s.Sync == reconcile.Synced })
	got := obs.list()
	if len(got) == 0 || got[0] != outcome.OK {
		t.Errorf("outcomes of the passes = %v, want the first to succeed", got)
	}
}

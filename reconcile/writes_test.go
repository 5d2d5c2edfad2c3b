package reconcile

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"
)

// slowCreator is an Engine whose service creates block until released,
// counting how many are in flight at once.
type slowCreator struct {
	Engine         // nil: any other call panics
	inFlight, most atomic.Int32
	release        chan struct{}
}

func (s *slowCreator) ServiceCreate(context.Context, dswarm.ServiceSpec, dswarm.ServiceCreateOptions) (dswarm.ServiceCreateResponse, error) {
	n := s.inFlight.Add(1)
	for {
		m := s.most.Load()
		if n <= m || s.most.CompareAndSwap(m, n) {
			break
		}
	}
	<-s.release
	s.inFlight.Add(-1)
	return dswarm.ServiceCreateResponse{ID: "x"}, nil
}

func TestWritesWaitForOneOfTheSwarmsSlots(t *testing.T) {
	slow := &slowCreator{release: make(chan struct{})}
	eng := limitWrites(slow, 3)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			_, err := eng.ServiceCreate(t.Context(), dswarm.ServiceSpec{}, dswarm.ServiceCreateOptions{})
			errs <- err
		})
	}
	for slow.inFlight.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	// A write that gives up while it waits says why and sends nothing.
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errors.New("reconcile stopped"))
	if _, err := eng.ServiceCreate(ctx, dswarm.ServiceSpec{}, dswarm.ServiceCreateOptions{}); err == nil || err.Error() != "reconcile stopped" {
		t.Errorf("a write cancelled while waiting = %v, want the cancel's cause", err)
	}
	close(slow.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("write: %v", err)
		}
	}
	if got := slow.most.Load(); got != 3 {
		t.Errorf("at most %d writes in flight, want 3", got)
	}
	if limitWrites(nil, 3) != nil {
		t.Error("a destination without a client got one")
	}
}

package reconcile

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/syncpass"
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
	eng := limitWrites(slow, 3, nil)
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
	if limitWrites(nil, 3, nil) != nil {
		t.Error("a destination without a client got one")
	}
}

// TestFencedWritesReachNoEngine: once the fence refuses, no write of any
// kind is sent, and the error says why as ErrFenced, a transient outcome.
func TestFencedWritesReachNoEngine(t *testing.T) {
	var refused atomic.Bool
	why := errors.New("lease expired")
	fence := func() error {
		if refused.Load() {
			return why
		}
		return nil
	}
	slow := &slowCreator{release: make(chan struct{})}
	close(slow.release)
	eng := limitWrites(slow, 3, fence)
	if _, err := eng.ServiceCreate(t.Context(), dswarm.ServiceSpec{}, dswarm.ServiceCreateOptions{}); err != nil {
		t.Fatalf("write under a valid lease: %v", err)
	}
	refused.Store(true)
	// Any other write would reach slow's nil Engine and panic: the fence
	// must answer first.
	for name, write := range map[string]func() error{
		"service create": func() error {
			_, err := eng.ServiceCreate(t.Context(), dswarm.ServiceSpec{}, dswarm.ServiceCreateOptions{})
			return err
		},
		"service remove": func() error { return eng.ServiceRemove(t.Context(), "x") },
		"config create": func() error {
			_, err := eng.ConfigCreate(t.Context(), dswarm.ConfigSpec{})
			return err
		},
		"secret remove":  func() error { return eng.SecretRemove(t.Context(), "x") },
		"network remove": func() error { return eng.NetworkRemove(t.Context(), "x") },
		"volume remove":  func() error { return eng.VolumeRemove(t.Context(), "x", false) },
	} {
		err := write()
		if !errors.Is(err, syncpass.ErrFenced) || !errors.Is(err, why) || outcome.Of(err) != outcome.Transient {
			t.Errorf("%s under an expired lease = %v, want ErrFenced wrapping the reason, transient", name, err)
		}
	}
	if got := slow.most.Load(); got != 1 {
		t.Errorf("%d creates reached the engine, want the one before the fence closed", got)
	}
}

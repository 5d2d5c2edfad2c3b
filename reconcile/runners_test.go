package reconcile

import (
	"testing"
	"time"
)

// idleRunners is how many runners wait for work.
func (r *runners) idleRunners() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.idle)
}

func TestRunnersReuseAWarmRunnerAndNeverMakeWorkWait(t *testing.T) {
	var r runners
	ran := 0
	r.do(func() { ran++ })
	r.do(func() { ran++ })
	if ran != 2 {
		t.Fatalf("ran %d of 2 functions by the time do returned", ran)
	}
	if n := r.idleRunners(); n != 1 {
		t.Errorf("%d idle runners after two reconciles one after the other, want the one reused", n)
	}

	// A reconcile that blocks (one waiting for health) takes its runner;
	// the next one starts on another at once.
	release, started := make(chan struct{}), make(chan struct{})
	go r.do(func() { close(started); <-release })
	<-started
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.do(func() {})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a reconcile waited for another one's runner")
	}
	close(release)
}

func TestIdleRunnersEnd(t *testing.T) {
	r := runners{idleFor: 10 * time.Millisecond}
	r.do(func() {})
	deadline := time.Now().Add(10 * time.Second)
	for r.idleRunners() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d runners still idle 10 s after their last work, want none past idleFor", r.idleRunners())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The pool works on after its runners ended.
	ran := false
	r.do(func() { ran = true })
	if !ran {
		t.Error("do returned without running its function")
	}
}

package reconcile

import (
	"cmp"
	"sync"
	"time"
)

// runnerIdle is how long a runner with nothing to do waits for work
// before it ends.
const runnerIdle = time.Minute

// runners run the workers' reconciles on a few goroutines kept warm, so
// that the hundreds of workers of a large app set stay parked on small
// stacks. A worker that ran its reconcile itself had its stack shrunk by
// each GC while it waited for its next tick, and grown again (copied,
// frame by frame) by that tick: at 500 applications, a fifth of the
// controller's CPU at rest. A reconcile never waits for a free runner:
// when none is idle, a new one starts.
type runners struct {
	mu sync.Mutex
	// idle are the runners waiting for work, the most recently idle last:
	// work goes to it, whose stack is still grown, and the others end
	// after runnerIdle.
	idle []chan task
	// idleFor is how long an idle runner waits for work; 0 means runnerIdle.
	idleFor time.Duration
}

// do runs f on a runner and returns when it has returned.
func (r *runners) do(f func()) {
	t := task{f: f, done: make(chan struct{})}
	r.mu.Lock()
	if n := len(r.idle); n > 0 {
		runner := r.idle[n-1]
		r.idle = r.idle[:n-1]
		r.mu.Unlock()
		runner <- t
	} else {
		r.mu.Unlock()
		go r.run(t)
	}
	<-t.done
}

// task is one function for a runner, and how it tells that it returned.
type task struct {
	f    func()
	done chan struct{}
}

// run is one runner: it runs t, then whatever do hands it, until it has
// waited idleFor for work. It is idle again before it says a task is
// done, so that the caller's next task finds it.
func (r *runners) run(t task) {
	work := make(chan task, 1) // do never blocks handing work over
	wait := cmp.Or(r.idleFor, runnerIdle)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		t.f()
		r.mu.Lock()
		r.idle = append(r.idle, work)
		r.mu.Unlock()
		close(t.done)
		timer.Reset(wait)
		select {
		case t = <-work:
			continue
		case <-timer.C:
		}
		r.mu.Lock()
		i := len(r.idle) - 1
		for i >= 0 && r.idle[i] != work {
			i--
		}
		if i >= 0 {
			r.idle = append(r.idle[:i], r.idle[i+1:]...)
			r.mu.Unlock()
			return
		}
		// do took this runner as the timer fired: its task is on the way.
		r.mu.Unlock()
		t = <-work
	}
}

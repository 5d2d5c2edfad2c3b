package notify

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Runner is implemented by notifiers that deliver from goroutines of their
// own (the Recorder, webhooks, chat). The controller calls Run once, with a
// context it cancels at shutdown; Run returns after draining what it can
// within its own deadline. Until Run is called, events queue and, once the
// queue is full, are dropped and counted.
type Runner interface {
	Run(ctx context.Context) error
}

// RunAll runs every Runner among ns until ctx is done, and returns when all
// of them have returned, with their errors joined.
func RunAll(ctx context.Context, ns []Notifier) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, n := range ns {
		r, ok := n.(Runner)
		if !ok {
			continue
		}
		wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Stats counts what a notifier did with the events it was given, for
// metrics. Every count only grows.
type Stats struct {
	// Delivered counts events that reached the sink.
	Delivered uint64
	// Failed counts events the sink refused or could not be reached for,
	// after every retry.
	Failed uint64
	// Dropped counts events discarded because the notifier's queue was full.
	Dropped uint64
	// Suppressed counts events not sent on purpose: routing did not match,
	// or a repeat fell within the suppression window.
	Suppressed uint64
}

// Counted is implemented by notifiers that report Stats. Stats is safe to
// call concurrently with Notify.
type Counted interface {
	Stats() Stats
}

// counters is the atomic form of Stats that notifiers embed.
type counters struct {
	delivered, failed, dropped, suppressed atomic.Uint64
}

// snapshot reads each counter atomically; the four are not read as one,
// so a snapshot taken mid-delivery may be off by one between fields.
func (c *counters) snapshot() Stats {
	return Stats{
		Delivered:  c.delivered.Load(),
		Failed:     c.failed.Load(),
		Dropped:    c.dropped.Load(),
		Suppressed: c.suppressed.Load(),
	}
}

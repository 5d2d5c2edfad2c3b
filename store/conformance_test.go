package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/notify/notifytest"
)

// gatedStore stalls writes to a real store on a gate.
type gatedStore struct {
	gate  *notifytest.Gate
	store *Store
}

func (g gatedStore) Insert(ctx context.Context, r notify.Record) error {
	g.gate.Pass()
	return g.store.Insert(ctx, r)
}

func TestRecorderOverTheStoreConforms(t *testing.T) {
	notifytest.Run(t, func(t *testing.T) notifytest.Subject {
		s := open(t, filepath.Join(t.TempDir(), FileName), Options{})
		var gate notifytest.Gate
		r := notify.NewRecorder(notify.RecorderOptions{Store: gatedStore{&gate, s}, Logger: quiet()})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return notifytest.Subject{
			Notifier: r,
			Stall:    gate.Stall,
			Received: func() []notify.Event {
				recs, err := s.Events(context.Background(), Query{Limit: MaxLimit})
				if err != nil {
					t.Errorf("read events: %v", err)
				}
				var out []notify.Event
				for _, rec := range recs {
					out = append(out, rec.Event)
				}
				return out
			},
		}
	})
}

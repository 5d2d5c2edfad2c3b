package notify

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeAppender keeps inserted records, or fails with err.
type fakeAppender struct {
	mu   sync.Mutex
	recs []Record
	err  error
}

func (f *fakeAppender) Insert(_ context.Context, r Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.recs = append(f.recs, r)
	return nil
}

func (f *fakeAppender) has(id int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.ContainsFunc(f.recs, func(r Record) bool { return r.ID == id })
}

// publishLog records what was published and whether it was stored first.
type publishLog struct {
	mu       sync.Mutex
	store    *fakeAppender
	ids      []int64
	unstored []int64
}

func (p *publishLog) Publish(r Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids = append(p.ids, r.ID)
	if p.store != nil && !p.store.has(r.ID) {
		p.unstored = append(p.unstored, r.ID)
	}
}

var fixedStart = time.Unix(1_000, 0)

func fixedNow() time.Time { return fixedStart }

// runRecorder runs r in the bubble and returns a function that stops it and
// waits for Run to return.
func runRecorder(t *testing.T, r *Recorder) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}
}

func TestRecorderIDsContinueAboveTheStoreAndTheStartTime(t *testing.T) {
	floor := fixedStart.UnixMicro()
	for _, tc := range []struct {
		name   string
		lastID int64
		want   []int64
	}{
		{name: "a store behind the clock continues from the start time", lastID: 7, want: []int64{floor + 1, floor + 2, floor + 3}},
		{name: "a store ahead of the clock continues from its last id", lastID: floor + 500, want: []int64{floor + 501, floor + 502, floor + 503}},
		{name: "no store continues from the start time", want: []int64{floor + 1, floor + 2, floor + 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &fakeAppender{}
				pub := &publishLog{store: store}
				r := NewRecorder(RecorderOptions{Store: store, Publish: pub, LastID: tc.lastID, Now: fixedNow, Logger: slog.New(slog.DiscardHandler)})
				stop := runRecorder(t, r)
				for range 3 {
					r.Notify(t.Context(), Event{Application: "web", Type: SyncStarted})
				}
				synctest.Wait()
				stop()
				if d := cmp.Diff(tc.want, pub.ids); d != "" {
					t.Errorf("published ids (-want +got):\n%s", d)
				}
				if len(pub.unstored) > 0 {
					t.Errorf("published before stored: %v", pub.unstored)
				}
				if got := r.Stats().Delivered; got != 3 {
					t.Errorf("Stats().Delivered = %d, want 3", got)
				}
			})
		})
	}
}

func TestRecorderPublishesWhenTheStoreFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		store := &fakeAppender{err: errors.New("disk I/O error")}
		pub := &publishLog{}
		r := NewRecorder(RecorderOptions{Store: store, Publish: pub, Now: fixedNow, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		stop := runRecorder(t, r)
		r.Notify(t.Context(), Event{Application: "web", Type: SyncFailed})
		r.Notify(t.Context(), Event{Application: "web", Type: SyncStarted})
		synctest.Wait()
		stop()
		if len(pub.ids) != 2 {
			t.Errorf("published %v, want both events", pub.ids)
		}
		if got := r.Stats(); got.Failed != 2 || got.Delivered != 0 {
			t.Errorf("Stats() = %+v, want 2 failed", got)
		}
		if !strings.Contains(logs.String(), "level=WARN msg=\"event not stored\"") || !strings.Contains(logs.String(), "disk I/O error") {
			t.Errorf("write failure not logged at warn with its cause:\n%s", logs.String())
		}
	})
}

func TestRecorderDropsWhenItsQueueIsFullWithoutBlocking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		store := &fakeAppender{}
		pub := &publishLog{store: store}
		r := NewRecorder(RecorderOptions{Store: store, Publish: pub, Queue: 2, Now: fixedNow, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		// Run is not running: the queue fills after two events.
		returned := make(chan struct{})
		go func() {
			for range 5 {
				r.Notify(t.Context(), Event{Application: "web", Type: SyncStarted})
			}
			close(returned)
		}()
		<-returned
		if got := r.Stats().Dropped; got != 3 {
			t.Errorf("Stats().Dropped = %d, want 3", got)
		}
		if n := strings.Count(logs.String(), "event dropped"); n != 1 {
			t.Errorf("drops logged %d times, want once per run of drops:\n%s", n, logs.String())
		}
		stop := runRecorder(t, r)
		synctest.Wait() // Run has emptied the queue
		r.Notify(t.Context(), Event{Application: "web", Type: SyncSucceeded})
		synctest.Wait()
		stop()
		floor := fixedStart.UnixMicro()
		// Dropped events take no id, so published ids stay contiguous.
		if d := cmp.Diff([]int64{floor + 1, floor + 2, floor + 3}, pub.ids); d != "" {
			t.Errorf("published ids (-want +got):\n%s", d)
		}
	})
}

func TestRecorderDrainsItsQueueAtShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &fakeAppender{}
		r := NewRecorder(RecorderOptions{Store: store, Now: fixedNow, Logger: slog.New(slog.DiscardHandler)})
		for range 4 {
			r.Notify(t.Context(), Event{Application: "web", Type: SyncStarted})
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := r.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if len(store.recs) != 4 {
			t.Errorf("stored %d of 4 queued events at shutdown", len(store.recs))
		}
		for _, rec := range store.recs {
			if rec.At.IsZero() {
				t.Errorf("record %d stored with a zero At", rec.ID)
			}
		}
	})
}

func TestRecorderTermsStartAboveEveryEarlierID(t *testing.T) {
	floor := fixedStart.UnixMicro()
	for _, tc := range []struct {
		name  string
		store int64 // the store's last id when the term begins
		want  []int64
	}{
		{name: "a copied history ahead of this recorder's ids", store: floor + 900, want: []int64{floor + 901, floor + 902}},
		{name: "a copied history behind the clock", store: 12, want: []int64{floor + 1, floor + 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pub := &publishLog{}
				r := NewRecorder(RecorderOptions{Publish: pub, Now: fixedNow, Logger: slog.New(slog.DiscardHandler)})
				stop := runRecorder(t, r)
				r.BeginTerm(4, tc.store)
				r.Notify(t.Context(), Event{Application: "web", Type: SyncStarted})
				r.Notify(t.Context(), Event{Application: "web", Type: SyncSucceeded})
				if err := r.Flush(t.Context()); err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(tc.want, pub.ids); d != "" {
					t.Errorf("ids published once Flush returned (-want +got):\n%s", d)
				}
				if got := r.Recorded(); got != tc.want[1] {
					t.Errorf("Recorded = %d, want %d", got, tc.want[1])
				}
				stop()
			})
		})
	}
}

func TestRecorderStampsTheTermOnEachRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &fakeAppender{}
		r := NewRecorder(RecorderOptions{Store: store, Now: fixedNow, Logger: slog.New(slog.DiscardHandler)})
		stop := runRecorder(t, r)
		r.Notify(t.Context(), Event{Application: "web", Type: SyncStarted})
		r.BeginTerm(7, 0)
		r.Notify(t.Context(), Event{Application: "web", Type: SyncSucceeded})
		synctest.Wait()
		stop()
		var terms []int64
		for _, rec := range store.recs {
			terms = append(terms, rec.Term)
		}
		if d := cmp.Diff([]int64{0, 7}, terms); d != "" {
			t.Errorf("terms stored (-want +got):\n%s", d)
		}
	})
}

func TestRecorderFlushWithNothingQueuedReturnsAtOnce(t *testing.T) {
	r := NewRecorder(RecorderOptions{Logger: slog.New(slog.DiscardHandler)})
	if err := r.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

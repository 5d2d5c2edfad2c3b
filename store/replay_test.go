package store

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/notify"
)

// controller is the part of a controller's wiring this test restarts: the
// store, a recorder feeding a broker, and the recorder's goroutine.
type controller struct {
	store    *Store
	broker   *notify.Broker
	recorder *notify.Recorder
	stop     func()
}

func startController(t *testing.T, path string, now time.Time) *controller {
	t.Helper()
	s, err := Open(t.Context(), path, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	last, err := s.LastID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b := notify.NewBroker(notify.BrokerOptions{Logger: quiet()})
	r := notify.NewRecorder(notify.RecorderOptions{Store: s, Publish: b, LastID: last, Logger: quiet(),
		Now: func() time.Time { return now }})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	c := &controller{store: s, broker: b, recorder: r}
	c.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("recorder Run = %v", err)
		}
		b.Close()
		s.Close()
	}
	return c
}

// client is an SSE client: Stream into a buffer, until disconnect.
type client struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	stop func()
}

func (c *client) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

// frames returns the (id, application) of every event frame received.
func (c *client) frames() [][2]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out [][2]string
	for frame := range strings.SplitSeq(c.buf.String(), "\n\n") {
		var id, app string
		for line := range strings.SplitSeq(frame, "\n") {
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				id = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				_, rest, _ := strings.Cut(v, `"application":"`)
				app, _, _ = strings.Cut(rest, `"`)
			}
		}
		if id != "" {
			out = append(out, [2]string{id, app})
		}
	}
	return out
}

func connect(t *testing.T, c *controller, lastEventID int64) *client {
	t.Helper()
	filter := notify.Filter{}
	sub := c.broker.Subscribe(filter)
	cl := &client{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- notify.Stream(ctx, cl, sub, notify.StreamOptions{AfterID: lastEventID, Replay: c.store.Replay(filter), Logger: quiet()})
	}()
	cl.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Stream = %v", err)
		}
		sub.Close()
	}
	return cl
}

func waitFrames(t *testing.T, cl *client, n int) [][2]string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f := cl.frames()
		if len(f) >= n {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %d frames, want %d: %v", len(f), n, f)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func notifyApp(c *controller, app string) {
	c.recorder.Notify(context.Background(), notify.Event{Application: app, Type: notify.SyncStarted})
}

func TestReconnectAfterRestartReplaysExactlyTheMissedEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

	run1 := startController(t, path, start)
	cl := connect(t, run1, 0)
	notifyApp(run1, "seen-1")
	notifyApp(run1, "seen-2")
	seen := waitFrames(t, cl, 2)
	cl.stop() // the client goes away
	notifyApp(run1, "missed-1")
	notifyApp(run1, "missed-2")
	waitStored(t, run1.store, 4)
	run1.stop()

	// A restart whose clock went back: ids still continue above the store.
	run2 := startController(t, path, start.Add(-time.Hour))
	notifyApp(run2, "missed-3")
	waitStored(t, run2.store, 5)
	lastEventID, _ := strconv.ParseInt(seen[1][0], 10, 64)
	cl = connect(t, run2, lastEventID)
	waitFrames(t, cl, 3)
	notifyApp(run2, "live-1")
	got := waitFrames(t, cl, 4)
	cl.stop()
	run2.stop()

	var apps []string
	var prev int64 = lastEventID
	for _, f := range got {
		apps = append(apps, f[1])
		id, _ := strconv.ParseInt(f[0], 10, 64)
		if id <= prev {
			t.Errorf("id %s does not follow %d", f[0], prev)
		}
		prev = id
	}
	if d := cmp.Diff([]string{"missed-1", "missed-2", "missed-3", "live-1"}, apps); d != "" {
		t.Errorf("events after reconnecting with Last-Event-ID %d (-want +got):\n%s", lastEventID, d)
	}
}

func waitStored(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, err := s.Events(t.Context(), Query{})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored %d events, want %d", len(recs), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

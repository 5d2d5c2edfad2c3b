package notify_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/notify/notifytest"
	"github.com/skep-cd/skep/wire"
)

// runLoop runs n's delivery loop until the test ends.
func runLoop(t *testing.T, n notify.Runner) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

// wireReceiver is a local HTTP endpoint decoding wire JSON bodies.
func wireReceiver(t *testing.T, gate *notifytest.Gate, got *notifytest.Collector) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gate.Pass()
		var event wire.Event
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &event); err != nil {
			t.Errorf("receiver: body %q: %v", body, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		got.Add(notify.FromWire(event))
	}))
	t.Cleanup(srv.Close)
	return srv
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func TestNotifierConformance(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name string
		new  func(t *testing.T) notifytest.Subject
	}{
		{name: "log", new: func(t *testing.T) notifytest.Subject {
			var buf lockedBuffer
			return notifytest.Subject{
				Notifier:  notify.NewLog(slog.New(slog.NewJSONHandler(&buf, nil))),
				IgnoresAt: true,
				Received: func() []notify.Event {
					var out []notify.Event
					for _, line := range buf.lines() {
						var rec map[string]string
						_ = json.Unmarshal([]byte(line), &rec) // level and time are not strings; the rest are
						out = append(out, notify.Event{Application: rec["app"], Type: notify.EventType(rec["type"]),
							Revision: rec["revision"], Message: rec["message"], Swarm: rec["swarm"], Actor: rec["actor"]})
					}
					return out
				},
			}
		}},
		{name: "event stream broker", new: func(t *testing.T) notifytest.Subject {
			b := notify.NewBroker(notify.BrokerOptions{Logger: quiet})
			sub := b.Subscribe(notify.Filter{})
			var gate notifytest.Gate
			var got notifytest.Collector
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					gate.Pass()
					r, ok := <-sub.C()
					if !ok {
						return
					}
					got.Add(r.Event)
				}
			}()
			t.Cleanup(func() { b.Close(); <-done })
			return notifytest.Subject{Notifier: b, Received: got.Events, Stall: gate.Stall}
		}},
		{name: "recorder", new: func(t *testing.T) notifytest.Subject {
			var gate notifytest.Gate
			var got notifytest.Collector
			store := appendFunc(func(_ context.Context, r notify.Record) error {
				gate.Pass()
				got.Add(r.Event)
				return nil
			})
			r := notify.NewRecorder(notify.RecorderOptions{Store: store, Logger: quiet})
			runLoop(t, r)
			return notifytest.Subject{Notifier: r, Received: got.Events, Stall: gate.Stall}
		}},
		{name: "webhook", new: func(t *testing.T) notifytest.Subject {
			var gate notifytest.Gate
			var got notifytest.Collector
			srv := wireReceiver(t, &gate, &got)
			w, err := notify.NewWebhook(notify.WebhookOptions{Name: "hook", URL: srv.URL, Secret: []byte("k"), Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			runLoop(t, w)
			return notifytest.Subject{Notifier: w, Received: got.Events, Stall: gate.Stall}
		}},
		{name: "chat", new: func(t *testing.T) notifytest.Subject {
			var gate notifytest.Gate
			var got notifytest.Collector
			srv := wireReceiver(t, &gate, &got)
			c, err := notify.NewChat(notify.ChatOptions{Name: "chat", URL: "generic+" + srv.URL, Template: "{{json .}}", Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			runLoop(t, c)
			return notifytest.Subject{Notifier: c, Received: got.Events, Stall: gate.Stall}
		}},
		{name: "forge", new: func(t *testing.T) notifytest.Subject {
			var gate notifytest.Gate
			var got notifytest.Collector
			// A status carries only part of an event; its target URL is
			// templated to the whole event's wire JSON, as chat's text is.
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gate.Pass()
				var status struct {
					TargetURL string `json:"target_url"`
				}
				var event wire.Event
				body, _ := io.ReadAll(r.Body)
				if err := json.Unmarshal(body, &status); err != nil || json.Unmarshal([]byte(status.TargetURL), &event) != nil {
					t.Errorf("forge: %s %s: body %q", r.Method, r.URL, body)
					w.WriteHeader(http.StatusBadRequest)
					return
				}
				got.Add(notify.FromWire(event))
				w.WriteHeader(http.StatusCreated)
			}))
			t.Cleanup(srv.Close)
			f, err := notify.NewForge(notify.ForgeOptions{Name: "forge", Provider: notify.GitHub, URL: srv.URL, Token: "t",
				Repositories: map[string]string{"*": "acme/all"}, TargetURL: "{{json .}}", Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			runLoop(t, f)
			takes := func(e notify.Event) bool {
				return e.Revision != "" && (e.Type == notify.SyncStarted || e.Type == notify.SyncSucceeded || e.Type == notify.SyncFailed)
			}
			return notifytest.Subject{Notifier: f, Received: got.Events, Stall: gate.Stall, Takes: takes}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { notifytest.Run(t, tc.new) })
	}
}

type appendFunc func(ctx context.Context, r notify.Record) error

func (f appendFunc) Insert(ctx context.Context, r notify.Record) error { return f(ctx, r) }

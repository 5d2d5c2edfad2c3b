package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) Notify(_ context.Context, e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func TestEventTypeStringsAreTheContract(t *testing.T) {
	want := []string{"sync-started", "sync-succeeded", "sync-failed", "drift-detected",
		"live-drift-detected", "drift-converged", "resources-pruned", "prune-failed",
		"swarm-unreachable", "swarm-reachable", "self-update-issued", "release-rolled-back",
		"incident-opened", "incident-resolved", "tasks-rebalanced", "canary-step", "canary-promoted", "canary-aborted"}
	var got []string
	for _, ty := range Types() {
		got = append(got, string(ty))
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("event types (-want +got):\n%s", d)
	}
}

func TestActorTravelsInContextAndIsEmptyWithout(t *testing.T) {
	if got := ActorFrom(context.Background()); got != "" {
		t.Errorf("ActorFrom(background) = %q, want empty", got)
	}
	ctx := WithActor(context.Background(), "alice")
	if got := ActorFrom(ctx); got != "alice" {
		t.Errorf("ActorFrom = %q, want alice", got)
	}
	// A plain string key must not collide with the unexported one.
	//lint:ignore SA1029 the collision with a plain string key is what this checks
	ctx = context.WithValue(context.Background(), "actor", "mallory")
	if got := ActorFrom(ctx); got != "" {
		t.Errorf("ActorFrom read a foreign key: %q", got)
	}
}

func TestRegisterAddsAndNeverRemoves(t *testing.T) {
	var reg Registry
	a, b := &recorder{}, &recorder{}
	reg.Register(a)
	reg.Register(b)
	got := reg.Notifiers()
	got[0] = nil // a caller's copy must not reach the registry
	reg.Dispatch(context.Background(), Event{Application: "web", Type: SyncStarted})
	if len(a.events) != 1 || len(b.events) != 1 {
		t.Fatalf("deliveries a=%d b=%d, want 1 each", len(a.events), len(b.events))
	}
	if a.events[0].At.IsZero() {
		t.Error("Dispatch left At zero")
	}
}

func TestLogNotifierLevelsAndOptionalKeys(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		event     Event
		wantLevel string
		wantKeys  []string
		absent    []string
	}{
		{name: "sync failed logs at error", event: Event{Application: "web", Type: SyncFailed, Message: "boom", At: at},
			wantLevel: "ERROR", wantKeys: []string{"message"}, absent: []string{"swarm", "revision", "actor"}},
		{name: "pruned logs at warn with actor", event: Event{Application: "web", Type: ResourcesPruned, Actor: "alice", Revision: "abc", At: at},
			wantLevel: "WARN", wantKeys: []string{"actor", "revision"}, absent: []string{"swarm", "message"}},
		{name: "prune failed logs at warn", event: Event{Application: "web", Type: PruneFailed, At: at}, wantLevel: "WARN"},
		{name: "live drift logs at warn", event: Event{Application: "web", Type: LiveDriftDetected, Swarm: "prod", At: at},
			wantLevel: "WARN", wantKeys: []string{"swarm"}},
		{name: "drift converged logs at warn", event: Event{Application: "web", Type: DriftConverged, At: at}, wantLevel: "WARN"},
		{name: "sync started logs at info", event: Event{Application: "web", Type: SyncStarted, At: at}, wantLevel: "INFO"},
		{name: "git drift logs at info", event: Event{Application: "web", Type: DriftDetected, At: at}, wantLevel: "INFO"},
		{name: "sync succeeded logs at info", event: Event{Application: "web", Type: SyncSucceeded, At: at}, wantLevel: "INFO"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			NewLog(slog.New(slog.NewJSONHandler(&buf, nil))).Notify(context.Background(), tc.event)
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != 1 {
				t.Fatalf("got %d lines, want 1: %q", len(lines), buf.String())
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
				t.Fatal(err)
			}
			if rec["level"] != tc.wantLevel {
				t.Errorf("level = %v, want %s", rec["level"], tc.wantLevel)
			}
			if rec["app"] != "web" || rec["type"] != string(tc.event.Type) {
				t.Errorf("app/type = %v/%v", rec["app"], rec["type"])
			}
			for _, k := range tc.wantKeys {
				if _, ok := rec[k]; !ok {
					t.Errorf("key %q missing from %s", k, lines[0])
				}
			}
			for _, k := range tc.absent {
				if _, ok := rec[k]; ok {
					t.Errorf("empty key %q present in %s", k, lines[0])
				}
			}
		})
	}
}

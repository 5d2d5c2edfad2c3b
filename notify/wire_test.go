package notify

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/wire"
)

func TestWireShape(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		event Event
		want  string
	}{
		{
			name:  "swarm is present when empty and the three optional keys are absent",
			event: Event{Application: "web", Type: DriftDetected, At: at},
			want:  `{"application":"web","swarm":"","type":"drift-detected","at":"2026-03-04T05:06:07Z"}`,
		},
		{
			name: "every field set appears in the contract's order",
			event: Event{Application: "web", Type: SyncSucceeded, Revision: "a1b2c3", Message: "2 services updated",
				At: at, Swarm: "prod", Actor: "alice"},
			want: `{"application":"web","swarm":"prod","type":"sync-succeeded","revision":"a1b2c3","message":"2 services updated","actor":"alice","at":"2026-03-04T05:06:07Z"}`,
		},
		{
			name:  "actor alone is kept and revision and message dropped",
			event: Event{Application: "api", Type: ResourcesPruned, Actor: "bob", At: at},
			want:  `{"application":"api","swarm":"","type":"resources-pruned","actor":"bob","at":"2026-03-04T05:06:07Z"}`,
		},
		{
			name:  "at is converted to UTC and keeps sub-second precision",
			event: Event{Application: "web", Type: SyncStarted, At: time.Date(2026, 3, 4, 7, 6, 7, 500_000_000, time.FixedZone("CEST", 2*3600))},
			want:  `{"application":"web","swarm":"","type":"sync-started","at":"2026-03-04T05:06:07.5Z"}`,
		},
		{
			name: "a failure's cause and shared dependency follow the actor",
			event: Event{Application: "web", Type: SyncFailed, Message: "apply web", Actor: "alice", Cause: "web_api: exit code 1",
				Shared: "registry 127.0.0.1:5000", At: at},
			want: `{"application":"web","swarm":"","type":"sync-failed","message":"apply web","actor":"alice","cause":"web_api: exit code 1","shared":"registry 127.0.0.1:5000","at":"2026-03-04T05:06:07Z"}`,
		},
		{
			name:  "html characters in a message are not escaped",
			event: Event{Application: "web", Type: SyncFailed, Message: `a<b & "c"`, At: at},
			want:  `{"application":"web","swarm":"","type":"sync-failed","message":"a<b & \"c\"","at":"2026-03-04T05:06:07Z"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MarshalWire(tc.event)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("MarshalWire =\n%s\nwant\n%s", got, tc.want)
			}
			var back wire.Event
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			want := tc.event
			want.At = want.At.UTC()
			if d := cmp.Diff(want, FromWire(back)); d != "" {
				t.Errorf("decoded wire differs (-want +got):\n%s", d)
			}
		})
	}
}

// TestWireShapeOfARecordCarriesItsTerm: a replicated controller's
// records say their leader term; a single controller's (term 0) keep the
// contract's bytes.
func TestWireShapeOfARecordCarriesItsTerm(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	rec := Record{ID: 9, Term: 3, Event: Event{Application: "web", Type: SyncStarted, At: at}}
	var buf bytes.Buffer
	if err := WriteSSE(&buf, rec); err != nil {
		t.Fatal(err)
	}
	want := "id: 9\nevent: sync-started\ndata: {\"application\":\"web\",\"swarm\":\"\",\"type\":\"sync-started\",\"at\":\"2026-03-04T05:06:07Z\",\"term\":3}\n\n"
	if buf.String() != want {
		t.Errorf("frame =\n%q\nwant\n%q", buf.String(), want)
	}
	if d := cmp.Diff(rec, RecordFromWire(9, rec.Wire())); d != "" {
		t.Errorf("record back from the wire (-want +got):\n%s", d)
	}
}

func TestWriteSSEFrames(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tc := range []struct {
		name string
		rec  Record
		want string
	}{
		{
			name: "a record is an id, event and data line and a blank line",
			rec:  Record{ID: 42, Event: Event{Application: "web", Type: SyncFailed, Message: "line one\nline two", At: at}},
			want: "id: 42\nevent: sync-failed\ndata: {\"application\":\"web\",\"swarm\":\"\",\"type\":\"sync-failed\",\"message\":\"line one\\nline two\",\"at\":\"2026-03-04T05:06:07Z\"}\n\n",
		},
		{
			name: "a record without an id has no id line",
			rec:  Record{Event: Event{Application: "web", Type: SyncStarted, At: at}},
			want: "event: sync-started\ndata: {\"application\":\"web\",\"swarm\":\"\",\"type\":\"sync-started\",\"at\":\"2026-03-04T05:06:07Z\"}\n\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &countingWriter{}
			if err := WriteSSE(w, tc.rec); err != nil {
				t.Fatal(err)
			}
			if w.String() != tc.want {
				t.Errorf("WriteSSE wrote\n%q\nwant\n%q", w.String(), tc.want)
			}
			if w.writes != 1 {
				t.Errorf("WriteSSE made %d writes, want 1 so a frame is never torn", w.writes)
			}
		})
	}
}

func TestWriteSSERefusesATypeThatWouldForgeAFrame(t *testing.T) {
	var buf bytes.Buffer
	err := WriteSSE(&buf, Record{ID: 1, Event: Event{Type: "sync-started\ndata: forged"}})
	if err == nil {
		t.Fatal("WriteSSE accepted a type with a line break")
	}
	if buf.Len() != 0 {
		t.Errorf("WriteSSE wrote %q before refusing", buf.String())
	}
}

func TestWriteHeartbeatIsACommentFrame(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteHeartbeat(&buf); err != nil {
		t.Fatal(err)
	}
	if buf.String() != ": heartbeat\n\n" {
		t.Errorf("heartbeat = %q", buf.String())
	}
	if err := WriteHeartbeat(failingWriter{}); !errors.Is(err, errWriteFailed) {
		t.Errorf("WriteHeartbeat on a broken writer = %v, want errWriteFailed", err)
	}
}

type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(b []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(b)
}

var errWriteFailed = errors.New("write failed")

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errWriteFailed }

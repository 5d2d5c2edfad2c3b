package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/skep-cd/skep/wire"
)

// Record is an event with the id it was published under. Ids are positive
// and strictly increasing in publication order; see Recorder for how they
// stay so across restarts and leader terms. The zero ID means "not
// assigned".
type Record struct {
	// ID is the SSE id clients send back as Last-Event-ID.
	ID int64
	// Term is the leader term of the replicated controller that recorded
	// the event (Recorder.BeginTerm); 0 without leader election.
	Term int64
	Event
}

// Wire returns the record's event in its wire shape, with its term.
func (r Record) Wire() wire.Event {
	w := WireOf(r.Event)
	w.Term = r.Term
	return w
}

// RecordFromWire returns the record of an event read from the stream
// under id: the event and its term.
func RecordFromWire(id int64, w wire.Event) Record {
	return Record{ID: id, Term: w.Term, Event: FromWire(w)}
}

// WireOf returns e in its wire shape (wire.Event, the JSON of an event on
// every outbound channel), with At converted to UTC.
func WireOf(e Event) wire.Event {
	return wire.Event{
		Application: e.Application,
		Swarm:       e.Swarm,
		Type:        string(e.Type),
		Revision:    e.Revision,
		Message:     e.Message,
		Actor:       e.Actor,
		Cause:       e.Cause,
		Shared:      e.Shared,
		At:          e.At.UTC(),
	}
}

// FromWire returns the event w describes.
func FromWire(w wire.Event) Event {
	return Event{
		Application: w.Application,
		Type:        EventType(w.Type),
		Revision:    w.Revision,
		Message:     w.Message,
		At:          w.At,
		Swarm:       w.Swarm,
		Actor:       w.Actor,
		Cause:       w.Cause,
		Shared:      w.Shared,
	}
}

// MarshalWire returns the wire JSON of e, without a trailing newline and
// without HTML escaping (a message naming "a<b" stays readable).
func MarshalWire(e Event) ([]byte, error) { return marshalWire(WireOf(e)) }

// marshalWire encodes w as MarshalWire does.
func marshalWire(w wire.Event) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// WriteSSE writes rec as one server-sent event:
//
//	id: <ID>
//	event: <Type>
//	data: <wire JSON>
//	<blank line>
//
// in a single Write, so a frame is never torn by a concurrent heartbeat
// writer that serialises on w. The id line is left out when rec.ID is zero.
// It refuses a type containing a line break, which would forge a frame.
func WriteSSE(w io.Writer, rec Record) error {
	if strings.ContainsAny(string(rec.Type), "\r\n") {
		return fmt.Errorf("write event %d: type %q contains a line break", rec.ID, rec.Type)
	}
	data, err := marshalWire(rec.Wire())
	if err != nil {
		return fmt.Errorf("write event %d: %w", rec.ID, err)
	}
	var buf bytes.Buffer
	if rec.ID != 0 {
		buf.WriteString("id: ")
		buf.WriteString(strconv.FormatInt(rec.ID, 10))
		buf.WriteByte('\n')
	}
	buf.WriteString("event: ")
	buf.WriteString(string(rec.Type))
	buf.WriteString("\ndata: ")
	buf.Write(data)
	buf.WriteString("\n\n")
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write event %d: %w", rec.ID, err)
	}
	return nil
}

// Heartbeat is the SSE comment frame WriteHeartbeat writes. Clients ignore
// it; proxies see traffic and keep the connection open.
const Heartbeat = ": heartbeat\n\n"

// WriteHeartbeat writes the heartbeat comment frame.
func WriteHeartbeat(w io.Writer) error {
	if _, err := io.WriteString(w, Heartbeat); err != nil {
		return fmt.Errorf("write heartbeat: %w", err)
	}
	return nil
}

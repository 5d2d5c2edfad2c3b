package wire

import "time"

// Event is the JSON shape of an event on every outbound channel: the API's
// event stream and list, webhooks, and the store's consumers. Its field
// order and tags are the contract, pinned byte for byte by notify's
// TestWireShape.
//
// Swarm is always present because empty is itself the answer ("the swarm
// the controller runs in"); Revision, Message, Actor, Cause and Shared are
// omitted when empty because there the event has no answer to give. At is
// RFC 3339 in UTC. Type is one of the event types notify names. Cause is a
// failure's root cause in one line; Shared names the dependency several
// applications share whose failure it is. Term is the leader term of a
// replicated controller (--leader-election) that recorded the event, on
// the event stream and list; absent from a single controller's events and
// from outbound notifiers, so their bytes are those of the contract.
type Event struct {
	Application string    `json:"application"`
	Swarm       string    `json:"swarm"`
	Type        string    `json:"type"`
	Revision    string    `json:"revision,omitempty"`
	Message     string    `json:"message,omitempty"`
	Actor       string    `json:"actor,omitempty"`
	Cause       string    `json:"cause,omitempty"`
	Shared      string    `json:"shared,omitempty"`
	At          time.Time `json:"at"`
	Term        int64     `json:"term,omitempty"`
}

// EventItem is one kept event in the JSON list: its id and wire shape.
type EventItem struct {
	ID int64 `json:"id"`
	Event
}

// EventList is the JSON body of GET /api/v1/events.
type EventList struct {
	Events []EventItem `json:"events"`
}

// Package wire is the JSON model of Skep's HTTP API: the bodies the server
// writes and the client, the CLI and the web UI read, described field for
// field in api/openapi.yaml, and the event shape every outbound channel
// carries.
//
// It holds types and the few pure helpers that belong to them, nothing
// else. It must never import another package of Skep, so that a client
// links no server code: no reconcile loop, no SQLite, no Prometheus (see
// TestClientLinksNoServer). A field's JSON name, once released, never
// changes; new fields are added with omitempty when absence means "not
// known".
//
// Times are RFC 3339 in UTC; a time that may be absent is a pointer so that
// the zero time is omitted rather than sent as year 1.
package wire

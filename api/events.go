package api

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/store"
	"github.com/skep-cd/skep/wire"
)

// eventsRoute serves GET /api/v1/events: a server-sent event stream when
// the client accepts text/event-stream, the newest kept events as JSON
// otherwise. Both are filtered by ?app= and ?type= (repeatable or
// comma-separated), by ?swarm= (repeatable; present and empty is the
// local swarm) and by the subject's application scope.
func (s *Server) eventsRoute(w http.ResponseWriter, r *http.Request, subj Subject) {
	q := r.URL.Query()
	filter := notify.Filter{Applications: splitParams(q["app"])}
	// An unknown type is a 400, not a filter that matches nothing: a typo
	// must not look like a quiet stream.
	for _, t := range splitParams(q["type"]) {
		if !slices.Contains(notify.Types(), notify.EventType(t)) {
			writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("type: unknown event type %q", t))
			return
		}
		filter.Types = append(filter.Types, notify.EventType(t))
	}
	if ws, ok := q["swarm"]; ok {
		filter.Swarms = append([]string{}, ws...)
	}
	if subj.Scoped() {
		filter.Allow = subj.Sees
	}
	if AcceptsStream(r) {
		s.stream(w, r, filter)
		return
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > store.MaxLimit {
			writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("limit: want 1 to %d, got %q", store.MaxLimit, v))
			return
		}
		limit = n
	}
	if why := s.notKept(); why != "" && s.events == nil {
		s.fail(w, r, fmt.Errorf("%w: events are not kept: %s", ErrUnavailable, why))
		return
	}
	list := wire.EventList{Events: []wire.EventItem{}}
	if s.events != nil {
		recs, err := s.events.Events(r.Context(), store.Query{Applications: filter.Applications, Types: filter.Types, Swarms: filter.Swarms, Limit: limit, Newest: true})
		if err != nil {
			s.fail(w, r, fmt.Errorf("%w: %w", ErrUnavailable, err))
			return
		}
		for _, rec := range recs {
			if filter.Match(rec.Event) {
				list.Events = append(list.Events, wire.EventItem{ID: rec.ID, Event: rec.Wire()})
			}
		}
	}
	writeJSON(w, http.StatusOK, list)
}

// splitParams flattens repeated and comma-separated query values, so
// ?app=a&app=b and ?app=a,b mean the same, dropping empty ones.
func splitParams(values []string) []string {
	var out []string
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// AcceptsStream reports whether r's Accept header lists
// text/event-stream: the events route answers it with the stream.
// Quality values are ignored: a client that lists the stream at all is an
// EventSource or wants to behave like one.
func AcceptsStream(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
			return true
		}
	}
	return false
}

// stream writes the event stream until the client leaves or the broker
// closes (which is how the controller ends streams at shutdown, since
// http.Server.Shutdown does not). Last-Event-ID replays from the store.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, filter notify.Filter) {
	// An EventSource sends Last-Event-ID on reconnect with the last id it
	// saw, so a client that dropped misses nothing the store still keeps.
	var after int64
	v := r.Header.Get("Last-Event-ID")
	if v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("Last-Event-ID: want an event id, got %q", v))
			return
		}
		after = n
	}
	// Subscribe before the headers go out: a client that sees the stream
	// open must not miss an event published right after (see
	// TestEventStreamReplaysScopesAndFilters, which raced here).
	var sub *notify.Subscription
	if s.broker != nil {
		sub = s.broker.Subscribe(filter)
		defer sub.Close()
	}
	rc := http.NewResponseController(w)
	// The server's write timeout is for ordinary responses; a stream lives
	// as long as its client.
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	// nginx buffers proxied responses unless told not to, which would hold
	// events back until the buffer fills.
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flush := func() { _ = rc.Flush() }
	// Send the headers now: the client's EventSource reports the stream
	// open only when they arrive, not at the first event.
	flush()
	s.metrics.subscribers(1)
	defer s.metrics.subscribers(-1)

	if sub == nil {
		s.heartbeats(r.Context(), w, flush)
		return
	}
	opts := notify.StreamOptions{AfterID: after, Resume: v != "", Heartbeat: s.heartbeat, Flush: flush, Logger: s.log}
	if s.events != nil {
		opts.Replay = s.events.Replay(filter)
	}
	if err := notify.Stream(r.Context(), w, sub, opts); err != nil && r.Context().Err() == nil {
		s.log.Debug("event stream ended", "err", err)
	}
}

// heartbeats keeps a stream without a broker open until ctx ends or a
// write fails. The comments it writes keep proxies and load balancers from
// closing an idle connection.
func (s *Server) heartbeats(ctx context.Context, w http.ResponseWriter, flush func()) {
	every := s.heartbeat
	if every <= 0 {
		every = 15 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if notify.WriteHeartbeat(w) != nil {
				return
			}
			flush()
		}
	}
}

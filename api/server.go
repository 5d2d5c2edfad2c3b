package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/store"
	"github.com/skep-cd/skep/version"
	"github.com/skep-cd/skep/wire"
)

// DefaultMaxBody bounds a request body (JSON or webhook payload); a larger
// body answers 413, which refuses a forge's delivery too, so raise
// Options.MaxBody if a forge's push payloads are bigger.
const DefaultMaxBody = 1 << 20

// EventLog reads kept events; *store.Store implements it. Its methods are
// called concurrently from requests.
type EventLog interface {
	// Events returns the kept events q selects; the slice is the caller's.
	Events(ctx context.Context, q store.Query) ([]notify.Record, error)
	// Replay returns what an event stream replays after a Last-Event-ID,
	// filtered by f.
	Replay(f notify.Filter) notify.ReplayFunc
}

// SyncHistory reads the kept sync history; *store.Store implements it. It
// is called concurrently from requests.
type SyncHistory interface {
	// History returns up to limit of app's syncs, newest first.
	History(ctx context.Context, app string, limit int) ([]store.Sync, error)
}

// Options wire a Server. Reconciler and Authorizer are required; the zero
// value of every other field means its default or "not available".
type Options struct {
	// Reconciler answers every application and controller route.
	Reconciler Reconciler
	// Authorizer resolves the subject of every route that needs a role.
	Authorizer Authorizer
	// Metrics is served on /metrics (admins only) and counts requests;
	// nil means a fresh NewMetrics(MetricsOptions{}).
	Metrics *Metrics
	// Webhooks verifies inbound webhooks; nil configures no provider (each
	// answers 404, but the generic one still takes a bearer credential).
	Webhooks *Webhooks
	// SignIn, when set, offers sign-in at an OpenID provider under
	// /api/v1/auth/oidc/; nil answers those routes 404.
	SignIn SignIn
	// Broker streams live events; EventLog lists and replays kept ones.
	// Without a broker the stream sends heartbeats only.
	Broker   *notify.Broker
	EventLog EventLog
	// Syncs adds the store's sync history to the history route.
	Syncs SyncHistory
	// MaxBody bounds request bodies; 0 means DefaultMaxBody.
	MaxBody int64
	// Heartbeat is the event stream's heartbeat interval; 0 means 15s.
	Heartbeat time.Duration
	// UI, when set, serves GET / and everything under /ui/ without a
	// token (the page holds no data; each API call it makes needs one).
	// It sets its own security headers, Content-Security-Policy included;
	// the API's headers stay on every other response. nil leaves / a 404.
	UI http.Handler
	// Reviews plans pull requests (their webhook events) and revisions
	// (the plan route); nil answers pull-request deliveries "ignored", the
	// plan route 503 and every application's pull requests as none.
	Reviews Reviews
	// Notifiers names the registered notifiers for the status route; nil
	// leaves them out.
	Notifiers func() []string
	// Store reports the history store's state for the status route; nil
	// leaves it out. While it says nothing is kept, listing events answers
	// 503 and the history's syncsError says why, rather than an empty list
	// that reads as "nothing happened".
	Store func() wire.StoreStatus
	// Replication reports, for the status route, the leader lease and the
	// replicas of a replicated controller; nil (a single controller)
	// leaves it out.
	Replication func() *wire.Replication
	// Logger receives handler failures and panics; nil discards them.
	Logger *slog.Logger
}

// Server is the API's http.Handler. Build it with New; it is safe for
// concurrent use. Its fields are set by New and never change.
type Server struct {
	rec       Reconciler
	auth      Authorizer
	metrics   *Metrics
	webhooks  *Webhooks
	reviews   Reviews
	signIn    SignIn
	broker    *notify.Broker
	events    EventLog
	syncs     SyncHistory
	maxBody   int64
	heartbeat time.Duration
	ui        http.Handler
	notifiers func() []string
	store     func() wire.StoreStatus
	repl      func() *wire.Replication
	log       *slog.Logger
	mux       *http.ServeMux
	routes    []route
}

// New checks opts and builds the server with every route of the route
// table. Webhook deliveries are only queued until Run is started too.
func New(opts Options) (*Server, error) {
	if opts.Reconciler == nil {
		return nil, errors.New("api: no reconciler")
	}
	if opts.Authorizer == nil {
		return nil, errors.New("api: no authorizer")
	}
	s := &Server{
		rec: opts.Reconciler, auth: opts.Authorizer, metrics: opts.Metrics, webhooks: opts.Webhooks, reviews: opts.Reviews, signIn: opts.SignIn,
		broker: opts.Broker, events: opts.EventLog, syncs: opts.Syncs,
		maxBody: opts.MaxBody, heartbeat: opts.Heartbeat, ui: opts.UI, notifiers: opts.Notifiers, store: opts.Store, repl: opts.Replication, log: opts.Logger,
		mux: http.NewServeMux(),
	}
	if s.metrics == nil {
		s.metrics = NewMetrics(MetricsOptions{})
	}
	if s.webhooks == nil {
		// No provider, but a queue: a generic push with a bearer
		// credential needs one (see webhookByBearer).
		var err error
		if s.webhooks, err = NewWebhooks(nil, WebhooksOptions{}); err != nil {
			return nil, err
		}
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBody
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.routes = s.table()
	for _, rt := range s.routes {
		s.mux.Handle(rt.method+" "+rt.pattern, s.guard(rt))
	}
	return s, nil
}

// Route is one registered route, as Routes reports it.
type Route struct {
	Method, Pattern string
	// Role is the least role the route needs; "" means no token (health,
	// readiness and webhooks, which verify their own signature).
	Role Role
}

// Routes returns every registered route, in registration order; the slice
// is the caller's. Tests hold the OpenAPI document to it.
func (s *Server) Routes() []Route {
	out := make([]Route, len(s.routes))
	for i, rt := range s.routes {
		out[i] = Route{Method: rt.method, Pattern: rt.pattern, Role: rt.need}
	}
	return out
}

// route is one entry of the route table.
type route struct {
	method, pattern string
	need            Role // "" = public
	// app is set for routes with {name}: the subject must see it.
	app    bool
	handle func(w http.ResponseWriter, r *http.Request, subj Subject)
}

// securityHeaders are set on every response. The API serves JSON and
// never HTML, so nothing may sniff, frame or load anything from it, and
// its answers carry live state that no cache may keep.
var securityHeaders = map[string]string{
	"X-Content-Type-Options":  "nosniff",
	"X-Frame-Options":         "DENY",
	"Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
	"Referrer-Policy":         "no-referrer",
	"Cache-Control":           "no-store",
}

// ServeHTTP sets the security headers, answers unknown routes (404) and
// wrong methods (405 with Allow) in JSON, recovers a handler's panic as a
// 500, and counts the request by route pattern and code. The UI's paths
// (see Options.UI) go to the UI handler, which sets its own headers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h := w.Header()
	// Browsers ignore HSTS over plain HTTP (RFC 6797); sent there it would
	// only mislead whoever reads the headers.
	if r.TLS != nil {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	sw := &statusWriter{ResponseWriter: w}
	ui := s.isUI(r)
	if !ui {
		for k, v := range securityHeaders {
			h.Set(k, v)
		}
	}
	// ServeMux answers unmatched paths and methods in plain text; asking
	// for the pattern first lets the server answer both in JSON, and gives
	// the metrics a route label that does not grow with the paths asked.
	_, pattern := s.mux.Handler(r)
	route := pattern
	switch {
	case ui:
		route = "ui"
	case route == "":
		route = "unmatched"
	}
	defer func() {
		if v := recover(); v != nil {
			// ErrAbortHandler is net/http's way to abort a response; the
			// server needs to see it to drop the connection quietly.
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("api handler panicked", "route", route, "err", fmt.Sprint(v), "stack", string(debug.Stack()))
			// Once a status is written a JSON error would only corrupt
			// the body; the client sees a truncated response instead.
			if !sw.wrote {
				writeError(sw, http.StatusInternalServerError, wire.CodeInternal, "internal error; see the controller log")
			}
		}
		s.metrics.request(route, sw.code(), time.Since(start))
	}()
	if ui {
		s.ui.ServeHTTP(sw, r)
		return
	}
	if pattern != "" {
		s.mux.ServeHTTP(sw, r)
		return
	}
	if allow := s.allowed(r); len(allow) > 0 {
		h.Set("Allow", strings.Join(allow, ", "))
		writeError(sw, http.StatusMethodNotAllowed, wire.CodeMethodNotAllowed,
			fmt.Sprintf("%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
		return
	}
	writeError(sw, http.StatusNotFound, wire.CodeNotFound, "no route "+r.URL.Path)
}

// isUI reports whether r is for the UI handler: the page at / and its
// files under /ui/. Everything else, /api/ above all, stays the API's.
func (s *Server) isUI(r *http.Request) bool {
	return s.ui != nil && (r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/ui/"))
}

// allowed returns the methods the mux serves for r's path, for the Allow
// header of a 405. ServeMux does not say which methods a path has, so each
// is probed on a clone of r.
func (s *Server) allowed(r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := s.mux.Handler(probe); p != "" {
			out = append(out, m)
		}
	}
	return out
}

// guard authenticates the caller of a protected route, checks its role
// and, for an application route, its scope, and hands the subject to the
// handler. The decision uses the subject value only, never the context.
func (s *Server) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.need == "" {
			rt.handle(w, r, Subject{})
			return
		}
		subj, err := s.auth.Authenticate(r.Context(), r)
		if err != nil {
			s.refuse(w, rt.pattern, err)
			return
		}
		if !subj.Allows(rt.need) {
			writeError(w, http.StatusForbidden, wire.CodeForbidden,
				fmt.Sprintf("%s has role %s; %s %s needs %s", subj.Name, subj.Role, rt.method, rt.pattern, rt.need))
			return
		}
		if rt.app && !subj.Sees(r.PathValue("name")) {
			// The same answer whether or not the application exists.
			writeError(w, http.StatusForbidden, wire.CodeForbidden,
				fmt.Sprintf("%s may not access application %q", subj.Name, r.PathValue("name")))
			return
		}
		rt.handle(w, r, subj)
	})
}

// refuse answers an Authenticate error: 401 for no or an unknown
// credential, 403 for a credential that may not be used so (with the
// authorizer's reason), 503 when it cannot be checked now, 500 otherwise.
func (s *Server) refuse(w http.ResponseWriter, pattern string, err error) {
	switch {
	case errors.Is(err, ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", `Bearer realm="skep"`)
		writeError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "a valid bearer token or sign-in session is required")
	case errors.Is(err, ErrForbidden):
		writeError(w, http.StatusForbidden, wire.CodeForbidden, err.Error())
	case errors.Is(err, ErrUnavailable):
		writeError(w, http.StatusServiceUnavailable, wire.CodeUnavailable, err.Error())
	default:
		s.log.Error("authentication failed", "route", pattern, "err", err)
		writeError(w, http.StatusInternalServerError, wire.CodeInternal, "authentication failed; see the controller log")
	}
}

// statusWriter remembers the status code written, for metrics. It keeps
// Flush and the deadline setters reachable through http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

// WriteHeader remembers the first code, as net/http ignores later ones.
func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write counts an implicit 200, as net/http sends one before the body.
func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and the deadline
// setters of the underlying writer, which the event stream needs.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// code is the status sent, 200 for a handler that wrote nothing.
func (w *statusWriter) code() int {
	if !w.wrote {
		return http.StatusOK
	}
	return w.status
}

// writeJSON writes v with code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	// No browser renders these bodies as HTML (nosniff, JSON type);
	// escaping <, > and & would only garble messages and diff values.
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client went away; nothing left to tell it
}

// writeError writes the API's error object. msg reaches the client, so it
// must never hold a secret or an internal detail meant for the log.
func writeError(w http.ResponseWriter, code int, c wire.ErrorCode, msg string) {
	writeJSON(w, code, wire.Error{Code: c, Message: msg})
}

// fail answers err: the Reconciler's sentinels choose the code, and their
// messages, written for users, are shown; anything else is a 500 whose
// detail goes to the log only.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, wire.CodeNotFound, err.Error())
	case errors.Is(err, ErrInvalid):
		writeError(w, http.StatusBadRequest, wire.CodeBadRequest, err.Error())
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, fmt.Sprintf("request body larger than %d bytes", tooLarge.Limit))
	case errors.Is(err, ErrUnavailable):
		writeError(w, http.StatusServiceUnavailable, wire.CodeUnavailable, err.Error())
	case errors.Is(err, ErrConflict):
		writeError(w, http.StatusConflict, wire.CodeConflict, err.Error())
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client left; there is nobody to answer.
	default:
		s.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, wire.CodeInternal, "internal error; see the controller log")
	}
}

// decodeBody decodes a JSON body into v strictly (unknown fields and
// trailing data are errors). An empty body leaves v as it is.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	// No Content-Type is accepted: curl -X POST without a body sends none.
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return errUnsupportedMedia
		}
	}
	body := http.MaxBytesReader(w, r.Body, s.maxBody)
	data, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: body: %w", ErrInvalid, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: body: data after the JSON value", ErrInvalid)
	}
	return nil
}

// errUnsupportedMedia is decodeBody's error for a body that is not JSON,
// answered 415 by failBody.
var errUnsupportedMedia = errors.New("request body must be application/json")

// failBody answers a body decoding error.
func (s *Server) failBody(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errUnsupportedMedia) {
		writeError(w, http.StatusUnsupportedMediaType, wire.CodeUnsupportedMedia, err.Error())
		return
	}
	s.fail(w, r, err)
}

// capabilities lists what this server offers, for clients to adapt to: a
// client newer than the controller can check for a capability before
// using it, instead of comparing version numbers.
func (s *Server) capabilities() []string {
	out := []string{"applications", "sync", "sync.dry-run", "sync.revision", "sync.prune", "rollback", "refresh", "unhold", "canary", "events", "metrics"}
	if s.events != nil {
		out = append(out, "events.replay")
	}
	if s.syncs != nil {
		out = append(out, "history.syncs")
	}
	for _, p := range s.webhooks.Providers() {
		out = append(out, "webhook."+p)
	}
	out = append(out, "webhook.generic.bearer")
	if s.signIn != nil {
		out = append(out, "signin.oidc")
	}
	if s.reviews != nil {
		out = append(out, "plan", "pulls")
	}
	return out
}

// notKept returns why the history store keeps nothing, or "" when it
// keeps events or the server was not told.
func (s *Server) notKept() string {
	if s.store == nil {
		return ""
	}
	if st := s.store(); !st.Kept {
		return cmp.Or(st.Error, "no store")
	}
	return ""
}

// versionInfo is the body of the version route.
func (s *Server) versionInfo() wire.VersionInfo {
	v := version.Get()
	caps := s.capabilities()
	slices.Sort(caps)
	return wire.VersionInfo{Version: v.Version, Commit: v.Commit, GoVersion: v.GoVersion, APIVersion: "v1", Capabilities: caps}
}

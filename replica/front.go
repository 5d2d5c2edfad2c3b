package replica

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/wire"
)

// HeaderForwarded marks a request a standby forwarded to the leader, with
// the standby's name: a replica that does not lead answers it 503 rather
// than forward it again (the lease moved on the way).
const HeaderForwarded = "X-Skep-Forwarded-By"

// Front returns the handler a replica serves its API with, local being
// the API itself. On the leader every request goes to local. On a standby
// what the replica holds is served by local (health, readiness, metrics,
// the version, the UI's files, and the event stream and list to a bearer
// credential, from the history it copied); everything else, and every
// write, is forwarded to the leader as it came, credential and body
// included, so the leader authenticates, authorises and attributes it.
// A GET the leader cannot be reached for falls back to local (the status
// route answers there with what the standby knows); any other request
// answers 503 with Retry-After, as it does while no replica leads.
func (r *Replica) Front(local http.Handler) http.Handler {
	f := &front{r: r, local: local}
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			addr, _ := pr.In.Context().Value(leaderKey{}).(string)
			pr.Out.URL.Scheme, pr.Out.URL.Host = r.opts.Peer.Scheme, addr
			// The Host the caller used stays: the leader answers as the
			// service the caller asked for.
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			pr.Out.Header.Set(HeaderForwarded, r.self.Name)
		},
		Transport: r.opts.Peer.Transport,
		// Event streams pass frame by frame.
		FlushInterval: -1,
		ErrorHandler:  f.unreachable,
		ErrorLog:      slog.NewLogLogger(r.log.Handler(), slog.LevelDebug),
	}
	return f
}

// leaderKey carries the leader's address from ServeHTTP to Rewrite.
type leaderKey struct{}

type front struct {
	r     *Replica
	local http.Handler
	proxy *httputil.ReverseProxy
}

// ServeHTTP implements http.Handler.
func (f *front) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	obs := f.r.opts.Elector.Observed()
	switch {
	case obs.Leading:
		f.serveLeader(w, req)
		return
	case servedHere(req):
		f.local.ServeHTTP(w, req)
		return
	case req.Header.Get(HeaderForwarded) != "":
		retryLater(w, "forwarded to a replica that does not lead (the lease moved on the way); retry")
		return
	}
	addr := obs.Leader.Addr
	if obs.Leader.Released() || addr == "" || addr == f.r.self.Addr {
		retryLater(w, errNoLeader.Error())
		return
	}
	if api.AcceptsStream(req) {
		// A forwarded stream lives as long as its client, past the
		// server's write timeout.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	}
	f.proxy.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), leaderKey{}, addr)))
}

// serveLeader serves req on the leader, listing a standby that follows
// the event stream under the replicas' token while it does.
func (f *front) serveLeader(w http.ResponseWriter, req *http.Request) {
	name := req.Header.Get(HeaderReplica)
	if name == "" || req.URL.Path != "/api/v1/events" || !f.isPeer(req) {
		f.local.ServeHTTP(w, req)
		return
	}
	p := &follower{Name: name, Addr: req.Header.Get(HeaderReplicaAddr), Version: req.Header.Get(HeaderReplicaVersion)}
	f.r.peers.add(p)
	defer f.r.peers.remove(p)
	f.local.ServeHTTP(w, req)
}

// isPeer reports whether req carries the replicas' own token, compared
// by digest in constant time.
func (f *front) isPeer(req *http.Request) bool {
	presented, ok := api.Bearer(req)
	if !ok || f.r.opts.Peer.Token.Empty() {
		return false
	}
	got, want := presented.Digest(), f.r.opts.Peer.Token.Digest()
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// unreachable answers a request the leader could not be reached for: a
// read from what this replica holds, anything else 503.
func (f *front) unreachable(w http.ResponseWriter, req *http.Request, err error) {
	if req.Context().Err() != nil {
		return // the caller left
	}
	f.r.log.Debug("leader unreachable", "path", req.URL.Path, "err", err)
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		f.local.ServeHTTP(w, req)
		return
	}
	retryLater(w, "the leader does not answer (a take-over may be under way); retry")
}

// servedHere reports whether a standby answers req itself: health,
// readiness, metrics and the version of this replica; the UI's files,
// which hold no data; and the event stream and list to a bearer
// credential, from the history this replica copied (a sign-in session
// lives on the leader that made it, so its requests go there).
func servedHere(req *http.Request) bool {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return false
	}
	switch p := req.URL.Path; {
	case p == "/healthz", p == "/readyz", p == "/metrics", p == "/api/v1/version":
		return true
	case p == "/" || strings.HasPrefix(p, "/ui/"):
		return true
	case p == "/api/v1/events":
		_, bearer := api.Bearer(req)
		return bearer
	}
	return false
}

// retryLater answers 503 with the API's error shape and a Retry-After of
// one second: a take-over lasts seconds.
func retryLater(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(wire.Error{Code: wire.CodeUnavailable, Message: msg})
}

// follower is a standby following the leader's events, as it named
// itself.
type follower struct {
	Name, Addr, Version string
}

// followers are the standbys following this replica's events now; a
// standby with two streams open (a reconnect racing the old one's end)
// is listed once.
type followers struct {
	mu sync.Mutex
	m  map[*follower]struct{}
}

func (s *followers) add(p *follower) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[p] = struct{}{}
}

func (s *followers) remove(p *follower) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, p)
}

// list returns the standbys by name, each once.
func (s *followers) list() []wire.Replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []wire.Replica
	for p := range s.m {
		if !slices.ContainsFunc(out, func(r wire.Replica) bool { return r.Name == p.Name }) {
			out = append(out, wire.Replica{Name: p.Name, Role: wire.RoleStandby, Addr: p.Addr, Version: p.Version})
		}
	}
	slices.SortFunc(out, func(a, b wire.Replica) int { return strings.Compare(a.Name, b.Name) })
	return out
}

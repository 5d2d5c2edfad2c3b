package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards HTTP requests to an upstream server and counts them by
// class: the Engine API from a unix socket of its own to the real Engine
// socket (StartProxy), or git's smart HTTP from a loopback port to the git
// server (StartGitProxy). It is safe for concurrent use and stops when the
// benchmark ends.
type Proxy struct {
	// Socket is the path of the Engine proxy's unix socket: point
	// DOCKER_HOST at "unix://"+Socket to be counted.
	Socket string
	// URL is the git proxy's base address, "http://127.0.0.1:<port>".
	URL string

	classify func(*http.Request) string
	keep     bool // keep every request in requests (the git proxy's are few)
	mu       sync.Mutex
	counts   Counts
	requests []Request
	writes   []Write // every Engine write, with its outcome (StartProxy)
	logs     bool    // log writes (the Engine proxy)
	// slow delays each service write by this much before it is
	// forwarded; inflight counts those waiting or forwarded, unanswered.
	slow     atomic.Int64
	inflight atomic.Int64
}

// Write is one request that may change the Engine's state (every method
// but GET and HEAD), as the Engine proxy forwarded it: when it was sent
// and answered, and the answer's status. A config write's name and labels
// are read from its body: what a replica's leader lease and a release's
// revision say.
type Write struct {
	At, Done time.Time
	Method   string
	Path     string
	Status   int
	// Config and Labels are the name and labels of a config created or
	// updated; empty for any other write.
	Config string
	Labels map[string]string
}

// OK reports whether the Engine accepted the write.
func (w Write) OK() bool { return w.Status >= 200 && w.Status < 300 }

// Request is one request a proxy forwarded, as Requests returns it.
type Request struct {
	At    time.Time
	Class string
	Path  string
}

// StartProxy listens on a socket in a fresh temp directory and forwards to
// the Engine socket at engine until tb ends. Requests are counted by
// method and route (PathClass).
func StartProxy(tb testing.TB, engine string) *Proxy {
	tb.Helper()
	p := &Proxy{Socket: filepath.Join(tb.TempDir(), "engine.sock"), counts: Counts{}, logs: true,
		classify: func(r *http.Request) string { return r.Method + " " + PathClass(r.URL.Path) }}
	ln, err := net.Listen("unix", p.Socket)
	if err != nil {
		tb.Fatalf("proxy listen: %v", err)
	}
	transport := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", engine)
	}}
	p.serve(tb, ln, &url.URL{Scheme: "http", Host: "docker"}, transport)
	tb.Cleanup(func() { _ = os.Remove(p.Socket) })
	return p
}

// Git request classes: a ref advertisement starts every ls-remote and
// every fetch; an upload-pack POST is a fetch that downloads objects.
const (
	GitRefs  = "refs"
	GitFetch = "fetch"
	GitPush  = "push"
)

// StartGitProxy listens on a loopback port and forwards to the git server
// at upstream ("http://host:port") until tb ends. Requests are counted as
// GitRefs, GitFetch or GitPush, and kept for Requests.
func StartGitProxy(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		tb.Fatalf("git proxy: %v", err)
	}
	p := &Proxy{counts: Counts{}, classify: gitClass, keep: true}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("git proxy listen: %v", err)
	}
	p.URL = "http://" + ln.Addr().String()
	p.serve(tb, ln, target, http.DefaultTransport)
	return p
}

// gitClass classes a smart-HTTP request; anything else is its method and
// path.
func gitClass(r *http.Request) string {
	switch {
	case strings.HasSuffix(r.URL.Path, "/info/refs"):
		return GitRefs
	case strings.HasSuffix(r.URL.Path, "/git-upload-pack"):
		return GitFetch
	case strings.HasSuffix(r.URL.Path, "/git-receive-pack"):
		return GitPush
	}
	return r.Method + " " + r.URL.Path
}

// serve forwards what ln accepts to target until tb ends.
func (p *Proxy) serve(tb testing.TB, ln net.Listener, target *url.URL, transport http.RoundTripper) {
	forward := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
		},
		Transport: transport,
		// The events stream must reach the controller as it happens, not
		// when a buffer fills.
		FlushInterval: -1,
		// A client hanging up mid-stream is normal here, not news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.count(r)
		if !p.logs || r.Method == http.MethodGet || r.Method == http.MethodHead {
			forward.ServeHTTP(w, r)
			return
		}
		wr := Write{At: time.Now(), Method: r.Method, Path: r.URL.Path}
		wr.Config, wr.Labels = configOf(r)
		if strings.Contains(r.URL.Path, "/services/") {
			p.inflight.Add(1)
			defer p.inflight.Add(-1)
			select {
			case <-time.After(time.Duration(p.slow.Load())):
			case <-r.Context().Done():
			}
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		forward.ServeHTTP(sw, r)
		wr.Done, wr.Status = time.Now(), sw.status
		p.mu.Lock()
		p.writes = append(p.writes, wr)
		p.mu.Unlock()
	})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	tb.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			tb.Errorf("proxy: %v", err)
		}
	})
}

// Slow makes every later service write wait d before it is forwarded, so
// that a test can act while an apply is half done.
func (p *Proxy) Slow(d time.Duration) { p.slow.Store(int64(d)) }

// InFlight is how many service writes are waiting or forwarded and not
// answered yet.
func (p *Proxy) InFlight() int { return int(p.inflight.Load()) }

// Writes returns the Engine writes forwarded so far, in the order they
// were answered; the slice is the caller's.
func (p *Proxy) Writes() []Write {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.writes)
}

// maxConfigBody bounds the body read to learn a config write's labels: a
// lease's is under a kilobyte, a small release's revision a few.
const maxConfigBody = 1 << 20

// configOf reads the name and labels of a config create or update from
// r's body, which it puts back for the Engine; "" for any other request.
func configOf(r *http.Request) (string, map[string]string) {
	path := apiVersion.ReplaceAllString(r.URL.Path, "")
	if r.Method != http.MethodPost || !strings.HasPrefix(path, "/configs/") || r.ContentLength > maxConfigBody {
		return "", nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxConfigBody))
	if err != nil {
		return "", nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var spec struct {
		Name   string
		Labels map[string]string
	}
	if json.Unmarshal(body, &spec) != nil {
		return "", nil
	}
	return spec.Name, spec.Labels
}

// statusWriter remembers the status a response was answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets the reverse proxy flush through.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Counts returns a copy of the counts so far.
func (p *Proxy) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.counts)
}

func (p *Proxy) count(r *http.Request) {
	class, at := p.classify(r), time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[class]++
	if p.keep {
		p.requests = append(p.requests, Request{At: at, Class: class, Path: r.URL.Path})
	}
}

// Keep makes p keep every request from now on (the git proxy always
// does), or stop keeping them and drop those kept.
func (p *Proxy) Keep(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keep = on
	if !on {
		p.requests = nil
	}
}

// Requests returns the kept requests whose path starts with prefix made
// in [from, to), oldest first; see Keep.
func (p *Proxy) Requests(prefix string, from, to time.Time) []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Request
	for _, r := range p.requests {
		if strings.HasPrefix(r.Path, prefix) && !r.At.Before(from) && r.At.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

// Counts maps a request class ("GET /services/{id}") to how many were made.
type Counts map[string]int

// Since returns c minus an earlier snapshot: the requests made in between.
func (c Counts) Since(earlier Counts) Counts {
	out := Counts{}
	for class, n := range c {
		if d := n - earlier[class]; d > 0 {
			out[class] = d
		}
	}
	return out
}

// Total is the number of requests.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Writes is the number of requests that may change the Engine's state:
// every method but GET and HEAD.
func (c Counts) Writes() int {
	n := 0
	for class, v := range c {
		if !strings.HasPrefix(class, "GET ") && !strings.HasPrefix(class, "HEAD ") {
			n += v
		}
	}
	return n
}

// String lists the classes, most frequent first: "7 GET /services, 1 …".
func (c Counts) String() string {
	classes := slices.Collect(maps.Keys(c))
	slices.SortFunc(classes, func(a, b string) int {
		if c[a] != c[b] {
			return c[b] - c[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(classes))
	for i, class := range classes {
		parts[i] = strconv.Itoa(c[class]) + " " + class
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// apiVersion is the optional "/v1.41" prefix of an Engine API path.
var apiVersion = regexp.MustCompile(`^/v[0-9]+\.[0-9]+`)

// collectionVerbs are the second path segments that name an action on a
// collection, not an object.
var collectionVerbs = map[string]bool{"create": true, "json": true, "prune": true, "init": true,
	"join": true, "leave": true, "update": true, "unlock": true, "unlockkey": true, "df": true}

// PathClass reduces an Engine API path to its route: the version prefix
// dropped and object ids and names replaced by {id} ("/v1.41/services/x/update"
// is "/services/{id}/update"), image references in distribution and image
// routes by {image}.
func PathClass(path string) string {
	path = apiVersion.ReplaceAllString(path, "")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) == 0 || parts[0] == "":
		return "/"
	case parts[0] == "distribution" && len(parts) > 1:
		// The image reference may hold slashes: /distribution/{name}/json.
		return "/distribution/{image}/" + parts[len(parts)-1]
	case parts[0] == "images" && len(parts) > 2:
		return "/images/{image}/" + parts[len(parts)-1]
	}
	for i := 1; i < len(parts); i += 2 {
		// Collection verbs (/services/create, /swarm/init) sit where an id would.
		if i == 1 && collectionVerbs[parts[i]] {
			continue
		}
		parts[i] = "{id}"
	}
	return "/" + strings.Join(parts, "/")
}

package bench

import (
	"context"
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
	"testing"
)

// Proxy forwards the Engine API from a unix socket of its own to the real
// Engine socket and counts every request by method and path class. Point
// DOCKER_HOST at "unix://"+Socket to be counted. It is safe for concurrent
// use and stops when the benchmark ends.
type Proxy struct {
	// Socket is the path of the proxy's unix socket.
	Socket string

	mu     sync.Mutex
	counts Counts
}

// StartProxy listens on a socket in a fresh temp directory and forwards to
// the Engine socket at engine until tb ends.
func StartProxy(tb testing.TB, engine string) *Proxy {
	tb.Helper()
	p := &Proxy{Socket: filepath.Join(tb.TempDir(), "engine.sock"), counts: Counts{}}
	ln, err := net.Listen("unix", p.Socket)
	if err != nil {
		tb.Fatalf("proxy listen: %v", err)
	}
	forward := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: "docker"})
		},
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", engine)
		}},
		// The events stream must reach the controller as it happens, not
		// when a buffer fills.
		FlushInterval: -1,
		// A client hanging up mid-stream is normal here, not news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.count(r)
		forward.ServeHTTP(w, r)
	})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	tb.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			tb.Errorf("proxy: %v", err)
		}
		_ = os.Remove(p.Socket)
	})
	return p
}

// Counts returns a copy of the counts so far.
func (p *Proxy) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.counts)
}

func (p *Proxy) count(r *http.Request) {
	class := r.Method + " " + PathClass(r.URL.Path)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[class]++
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

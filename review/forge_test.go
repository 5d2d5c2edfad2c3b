package review_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// forgeToken is the API token the test's forge takes.
const forgeToken = "ghp_t0kenOnlyInTheHeader"

// request is one request the forge received.
type request struct {
	Method, URI string
	Body        map[string]any
}

// comment is one pull request comment the forge keeps.
type comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
}

// fakeGitHub stands in for GitHub's REST API: it keeps statuses and
// comments, answers as GitHub does, and fails the test on a request it
// does not know, one without the token in its Authorization header, or
// one carrying the token anywhere else.
type fakeGitHub struct {
	*httptest.Server
	t *testing.T

	mu       sync.Mutex
	requests []request
	comments map[int64][]comment // by pull request number
	nextID   int64
}

var (
	statusPath   = regexp.MustCompile(`^/repos/acme/shop/statuses/([0-9a-f]{40})$`)
	commentsPath = regexp.MustCompile(`^/repos/acme/shop/issues/(\d+)/comments$`)
	editPath     = regexp.MustCompile(`^/repos/acme/shop/issues/comments/(\d+)$`)
)

func newFakeGitHub(t *testing.T) *fakeGitHub {
	f := &fakeGitHub{t: t, comments: map[int64][]comment{}, nextID: 100}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeGitHub) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := r.Header.Get("Authorization"); got != "Bearer "+forgeToken {
		f.t.Errorf("%s %s: Authorization %q, want the token as a bearer", r.Method, r.RequestURI, got)
	}
	if strings.Contains(r.RequestURI, forgeToken) || strings.Contains(string(raw), forgeToken) {
		f.t.Errorf("%s %s carries the token outside its header", r.Method, r.RequestURI)
	}
	if r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("X-GitHub-Api-Version") == "" {
		f.t.Errorf("%s %s: headers %v, want GitHub's", r.Method, r.RequestURI, r.Header)
	}
	req := request{Method: r.Method, URI: r.RequestURI}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &req.Body); err != nil {
			f.t.Errorf("%s %s: body %q is not JSON", r.Method, r.RequestURI, raw)
		}
	}
	f.requests = append(f.requests, req)
	w.Header().Set("Content-Type", "application/json")
	path := r.URL.Path
	switch {
	case r.Method == "POST" && statusPath.MatchString(path):
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":1}`)
	case r.Method == "GET" && commentsPath.MatchString(path):
		if q := r.URL.Query(); q.Get("page") != "1" || q.Get("per_page") != "100" {
			f.t.Errorf("GET %s: want page=1&per_page=100", r.RequestURI)
		}
		n, _ := strconv.ParseInt(commentsPath.FindStringSubmatch(path)[1], 10, 64)
		_ = json.NewEncoder(w).Encode(append([]comment{{ID: 1, Body: "looks good"}}, f.comments[n]...))
	case r.Method == "POST" && commentsPath.MatchString(path):
		n, _ := strconv.ParseInt(commentsPath.FindStringSubmatch(path)[1], 10, 64)
		f.nextID++
		c := comment{ID: f.nextID, Body: fmt.Sprint(req.Body["body"])}
		f.comments[n] = append(f.comments[n], c)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(c)
	case r.Method == "PATCH" && editPath.MatchString(path):
		id, _ := strconv.ParseInt(editPath.FindStringSubmatch(path)[1], 10, 64)
		for n, list := range f.comments {
			for i := range list {
				if list[i].ID == id {
					list[i].Body = fmt.Sprint(req.Body["body"])
					f.comments[n] = list
					_ = json.NewEncoder(w).Encode(list[i])
					return
				}
			}
		}
		w.WriteHeader(http.StatusNotFound)
	default:
		f.t.Errorf("unexpected request %s %s", r.Method, r.RequestURI)
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"message":"Not Found"}`)
	}
}

// since returns the requests received after the first n.
func (f *fakeGitHub) since(n int) []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.requests[min(n, len(f.requests)):]...)
}

// count is how many requests were received.
func (f *fakeGitHub) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// commentsOf returns the comments the forge keeps on pull request n.
func (f *fakeGitHub) commentsOf(n int64) []comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]comment(nil), f.comments[n]...)
}

// statuses returns the statuses set on commit, in order.
func (f *fakeGitHub) statuses(commit string) []map[string]any {
	var out []map[string]any
	for _, r := range f.since(0) {
		if r.Method == "POST" && r.URI == "/repos/acme/shop/statuses/"+commit {
			out = append(out, r.Body)
		}
	}
	return out
}

package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/skep-cd/skep/api"
)

// FuzzRequests sends what a caller controls (a request body, a query
// string and a Last-Event-ID) to the routes that read them. Whatever the
// input, the server answers below 500 with a JSON error body, and never
// panics.
func FuzzRequests(f *testing.F) {
	s := newTestServer(f, api.Options{})
	for _, seed := range []struct {
		body          string
		query, lastID string
	}{
		{`{"dryRun":true}`, "app=web&type=sync-started&limit=5", "1"},
		{`{"revision":"0123456789abcdef0123456789abcdef01234567","prune":false}`, "type=nope", "x"},
		{`{"release":"web","number":2}`, "limit=-1", "-5"},
		{`[`, "app=%zz", "18446744073709551616"},
		{`{"dryRun":"yes","unknown":1}`, "swarm=&app=web,api", ""},
	} {
		f.Add([]byte(seed.body), seed.query, seed.lastID)
	}
	f.Fuzz(func(t *testing.T, body []byte, query, lastID string) {
		for _, path := range []string{"/api/v1/applications/web/sync", "/api/v1/applications/web/rollback", "/api/v1/applications/web/refresh"} {
			req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+adminToken)
			req.Header.Set("Content-Type", "application/json")
			check(t, s, req)
		}
		if _, err := url.ParseQuery(query); err == nil {
			for _, path := range []string{"/api/v1/events", "/api/v1/applications", "/api/v1/applications/web/diff"} {
				req := httptest.NewRequest(http.MethodGet, path+"?"+url.PathEscape(query), nil)
				req.URL.RawQuery = query
				req.Header.Set("Authorization", "Bearer "+adminToken)
				check(t, s, req)
			}
		}
		// The stream answers a bad Last-Event-ID at once; a good one
		// streams until the request ends, which it already has.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/api/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Last-Event-ID", lastID)
		rec := httptest.NewRecorder()
		s.api.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("Last-Event-ID %q: %d %s", lastID, rec.Code, rec.Body)
		}
	})
}

// check serves req and fails t on a 5xx or an error without a JSON body.
func check(t *testing.T, s *testServer, req *http.Request) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.api.ServeHTTP(rec, req)
	if rec.Code >= 500 {
		t.Fatalf("%s %s: %d %s", req.Method, req.URL, rec.Code, rec.Body)
	}
	if rec.Code >= 400 {
		var e struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" || e.Message == "" {
			t.Fatalf("%s %s: %d with body %q, want a JSON error", req.Method, req.URL, rec.Code, rec.Body)
		}
	}
}

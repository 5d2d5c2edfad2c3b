package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/store"
	"github.com/skep-cd/skep/wire"
)

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI 3 document: %v", err)
	}
	return doc
}

func TestOpenAPIDescribesEveryRouteAndNothingElse(t *testing.T) {
	doc := loadOpenAPI(t)
	s := newTestServer(t, api.Options{})
	var served, documented []string
	for _, r := range s.api.Routes() {
		served = append(served, r.Method+" "+r.Pattern)
		// The route is really served: no "no route" 404 and no 405.
		path := strings.NewReplacer("{name}", "web", "{provider}", "github").Replace(r.Pattern)
		status, _, body := s.call(t, r.Method, path, "", nil)
		if status == http.StatusMethodNotAllowed || strings.Contains(string(body), "no route") {
			t.Errorf("%s %s is in the route table but the server answers %d %s", r.Method, path, status, body)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	sort.Strings(served)
	sort.Strings(documented)
	if d := cmp.Diff(documented, served); d != "" {
		t.Errorf("routes served (+) and documented in openapi.yaml (-) differ:\n%s", d)
	}
	if len(served) < 10 {
		t.Fatalf("only %d routes served; is the table empty?", len(served))
	}
}

func TestResponsesMatchTheOpenAPIContract(t *testing.T) {
	doc := loadOpenAPI(t)
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := api.NewWebhooks([]api.WebhookSpec{
		{Provider: api.ProviderGeneric, Secret: wire.NewToken("k")},
		{Provider: api.ProviderBitbucketServer, Secret: wire.NewToken("k")},
		{Provider: api.ProviderGitLab, Secret: wire.NewToken("k")},
	}, api.WebhooksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A replicated controller's status, so its shape is held to the
	// contract too.
	s := newTestServer(t, api.Options{Webhooks: hooks, Reviews: &fakeReviews{}, Replication: replication})
	mergeRequest := readSample(t, "gitlab-merge-request-open.json")
	labeled := readSample(t, "github-pull-request-labeled.json")
	generic := []byte(`{"repository":"https://git.example.org/acme/web.git","ref":"refs/heads/main"}`)
	refsChanged := readSample(t, "bitbucket-server-push.json")
	refDeleted := readSample(t, "bitbucket-server-delete.json")
	for _, tc := range []struct {
		method, path, token string
		body                any
		header              map[string]string
		want                int
	}{
		{"GET", "/healthz", "", nil, nil, 200},
		{"GET", "/readyz", "", nil, nil, 200},
		{"GET", "/api/v1/version", viewerToken, nil, nil, 200},
		{"GET", "/api/v1/whoami", viewerToken, nil, nil, 200},
		{"GET", "/api/v1/whoami", scopedToken, nil, nil, 200},
		{"GET", "/api/v1/whoami", "", nil, nil, 401},
		{"GET", "/api/v1/status", adminToken, nil, nil, 200},
		{"GET", "/api/v1/status", viewerToken, nil, nil, 200},
		{"GET", "/api/v1/applications", viewerToken, nil, nil, 200},
		{"GET", "/api/v1/applications", "", nil, nil, 401},
		{"GET", "/api/v1/applications/web", viewerToken, nil, nil, 200},
		{"GET", "/api/v1/applications/nope", viewerToken, nil, nil, 404},
		{"GET", "/api/v1/applications/db", scopedToken, nil, nil, 403},
		{"GET", "/api/v1/applications/web/diff", viewerToken, nil, nil, 200},
		{"GET", "/api/v1/applications/web/history", viewerToken, nil, nil, 200},
		{"GET", "/api/v1/applications/web/pulls", viewerToken, nil, nil, 200},
		{"GET", "/api/v1/applications/nope/pulls", viewerToken, nil, nil, 404},
		{"GET", "/api/v1/applications/db/pulls", scopedToken, nil, nil, 403},
		{"POST", "/api/v1/applications/web/plan", deployerToken, wire.PlanRequest{Revision: "refs/pull/7/head"}, nil, 200},
		{"POST", "/api/v1/applications/web/plan", deployerToken, []byte(`{}`), nil, 400},
		{"POST", "/api/v1/applications/web/plan", viewerToken, wire.PlanRequest{Revision: "main"}, nil, 403},
		{"POST", "/api/v1/applications/web/sync", deployerToken, wire.SyncOptions{}, nil, 202},
		{"POST", "/api/v1/applications/web/sync", deployerToken, wire.SyncOptions{DryRun: true}, nil, 200},
		{"POST", "/api/v1/applications/web/sync", deployerToken, wire.SyncOptions{Revision: "unknown"}, nil, 400},
		{"POST", "/api/v1/applications/web/sync", viewerToken, wire.SyncOptions{}, nil, 403},
		// A sync window allowing no manual sync holds db.
		{"POST", "/api/v1/applications/db/sync", deployerToken, wire.SyncOptions{}, nil, 409},
		{"GET", "/api/v1/applications/db", viewerToken, nil, nil, 200},
		// Force exists only for `skep deploy --force`: the API refuses it.
		{"POST", "/api/v1/applications/web/sync", deployerToken, []byte(`{"force":true}`), nil, 400},
		{"POST", "/api/v1/applications/web/rollback", deployerToken, wire.RollbackOptions{Revision: 1}, nil, 202},
		{"POST", "/api/v1/applications/web/refresh", deployerToken, nil, nil, 202},
		{"POST", "/api/v1/applications/web/unhold", deployerToken, nil, nil, 202},
		{"POST", "/api/v1/applications/web/promote", deployerToken, nil, nil, 202},
		{"POST", "/api/v1/applications/web/abort", deployerToken, nil, nil, 202},
		{"POST", "/api/v1/applications/web/abort", viewerToken, nil, nil, 403},
		// db runs no canary.
		{"POST", "/api/v1/applications/db/promote", deployerToken, nil, nil, 409},
		{"POST", "/api/v1/applications/nope/abort", deployerToken, nil, nil, 404},
		{"GET", "/api/v1/events", viewerToken, nil, nil, 200},
		{"POST", "/api/v1/webhooks/generic", "", generic, map[string]string{"X-Skep-Signature": "sha256=" + hexSign(generic, "k")}, 202},
		{"POST", "/api/v1/webhooks/generic", "", generic, map[string]string{"X-Skep-Signature": "sha256=00"}, 401},
		{"POST", "/api/v1/webhooks/github", "", generic, nil, 404},
		{"POST", "/api/v1/webhooks/bitbucket-server", "", refsChanged, map[string]string{"X-Event-Key": "repo:refs_changed", "X-Hub-Signature": "sha256=" + hexSign(refsChanged, "k")}, 202},
		{"POST", "/api/v1/webhooks/bitbucket-server", "", refDeleted, map[string]string{"X-Event-Key": "repo:refs_changed", "X-Hub-Signature": "sha256=" + hexSign(refDeleted, "k")}, 200},
		{"POST", "/api/v1/webhooks/gitlab", "", mergeRequest, map[string]string{"X-Gitlab-Event": "Merge Request Hook", "X-Gitlab-Token": "k"}, 202},
		{"POST", "/api/v1/webhooks/gitlab", "", mergeRequest, map[string]string{"X-Gitlab-Event": "Merge Request Hook", "X-Gitlab-Token": "forged"}, 401},
		{"POST", "/api/v1/webhooks/gitlab", "", labeled, map[string]string{"X-Gitlab-Event": "Merge Request Hook", "X-Gitlab-Token": "k"}, 200},
	} {
		t.Run(fmt.Sprintf("%s %s as %s answers %d", tc.method, tc.path, tokenName(tc.token), tc.want), func(t *testing.T) {
			var data []byte
			if tc.body != nil {
				if b, ok := tc.body.([]byte); ok {
					data = b
				} else {
					data, _ = json.Marshal(tc.body)
				}
			}
			req := httptest.NewRequest(tc.method, s.URL+tc.path, bytes.NewReader(data))
			req.RequestURI = ""
			if data != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := s.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.want, body.String())
			}
			route, params, err := router.FindRoute(req)
			if err != nil {
				t.Fatalf("openapi.yaml has no operation for %s %s: %v", tc.method, tc.path, err)
			}
			in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
				Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
			out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode,
				Header: resp.Header, Body: nopCloser{bytes.NewReader(body.Bytes())},
				Options: &openapi3filter.Options{IncludeResponseStatus: true}}
			if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
				t.Errorf("response does not match openapi.yaml: %v\nbody: %s", err, body.String())
			}
		})
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func tokenName(token string) string {
	switch token {
	case adminToken:
		return "admin"
	case deployerToken:
		return "deployer"
	case viewerToken:
		return "viewer"
	case scopedToken:
		return "scoped deployer"
	}
	return "nobody"
}

func TestUnknownRoutesAnswer404AndWrongMethods405WithAllow(t *testing.T) {
	s := newTestServer(t, api.Options{})
	for _, tc := range []struct {
		method, path string
		want         int
		allow        string
		code         wire.ErrorCode
	}{
		{"GET", "/api/v1/nothing-here", 404, "", wire.CodeNotFound},
		{"GET", "/", 404, "", wire.CodeNotFound},
		{"DELETE", "/api/v1/applications/web", 405, "GET, HEAD", wire.CodeMethodNotAllowed},
		{"GET", "/api/v1/applications/web/sync", 405, "POST", wire.CodeMethodNotAllowed},
		{"PUT", "/healthz", 405, "GET, HEAD", wire.CodeMethodNotAllowed},
	} {
		status, h, body := s.call(t, tc.method, tc.path, adminToken, nil)
		if status != tc.want || h.Get("Allow") != tc.allow || decodeError(t, body).Code != tc.code {
			t.Errorf("%s %s = %d, Allow %q, %s; want %d, Allow %q, code %s", tc.method, tc.path, status, h.Get("Allow"), body, tc.want, tc.allow, tc.code)
		}
		if ct := h.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s answered Content-Type %q, want application/json", tc.method, tc.path, ct)
		}
	}
}

func TestSecurityHeadersAreOnEveryResponse(t *testing.T) {
	s := newTestServer(t, api.Options{})
	for _, tc := range []struct{ method, path, token string }{
		{"GET", "/healthz", ""},
		{"GET", "/api/v1/applications", viewerToken},
		{"GET", "/api/v1/applications", ""},
		{"GET", "/nowhere", ""},
		{"POST", "/api/v1/status", adminToken},
		{"GET", "/metrics", adminToken},
	} {
		_, h, _ := s.call(t, tc.method, tc.path, tc.token, nil)
		for k, want := range map[string]string{
			"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
			"Cache-Control": "no-store", "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
		} {
			if got := h.Get(k); got != want {
				t.Errorf("%s %s: header %s = %q, want %q", tc.method, tc.path, k, got, want)
			}
		}
	}
}

func TestWhoamiNamesTheSubjectRoleAndScope(t *testing.T) {
	s := newTestServer(t, api.Options{})
	for _, tc := range []struct {
		token string
		want  wire.Whoami
	}{
		{adminToken, wire.Whoami{Name: "root", Role: "admin", Apps: []string{}}},
		{viewerToken, wire.Whoami{Name: "eve", Role: "viewer", Apps: []string{}}},
		{scopedToken, wire.Whoami{Name: "webteam", Role: "deployer", Apps: []string{"web*"}}},
	} {
		status, _, body := s.call(t, "GET", "/api/v1/whoami", tc.token, nil)
		var got wire.Whoami
		if status != 200 || json.Unmarshal(body, &got) != nil {
			t.Fatalf("whoami as %s = %d %s", tokenName(tc.token), status, body)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("whoami as %s (-want +got):\n%s", tokenName(tc.token), d)
		}
	}
}

// uiStub stands for the web UI: it answers with its own CSP.
var uiStub = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte("ui " + r.URL.Path))
})

func TestUIServesItsPathsWithItsOwnHeadersAndTheAPIKeepsTheRest(t *testing.T) {
	s := newTestServer(t, api.Options{UI: uiStub})
	for _, tc := range []struct {
		path      string
		wantUI    bool
		wantCode  int
		wantCSP   string
		wantCType string
	}{
		{"/", true, 200, "default-src 'none'; script-src 'self'", "text/html; charset=utf-8"},
		{"/ui/app.js", true, 200, "default-src 'none'; script-src 'self'", "text/html; charset=utf-8"},
		{"/api/v1/nothing", false, 404, "default-src 'none'; frame-ancestors 'none'", "application/json"},
		{"/index.html", false, 404, "default-src 'none'; frame-ancestors 'none'", "application/json"},
		{"/api/v1/applications", false, 401, "default-src 'none'; frame-ancestors 'none'", "application/json"},
	} {
		status, h, body := s.call(t, "GET", tc.path, "", nil)
		if status != tc.wantCode || strings.HasPrefix(string(body), "ui ") != tc.wantUI {
			t.Errorf("GET %s = %d %q, want %d from the UI: %v", tc.path, status, body, tc.wantCode, tc.wantUI)
		}
		if got := h.Get("Content-Security-Policy"); got != tc.wantCSP {
			t.Errorf("GET %s: CSP %q, want %q", tc.path, got, tc.wantCSP)
		}
		if got := h.Get("Content-Type"); got != tc.wantCType {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, got, tc.wantCType)
		}
	}
}

// routeRequest is one request per route, for the role matrix.
type routeRequest struct {
	method, path string
	body         any
}

func everyGuardedRoute() []routeRequest {
	return []routeRequest{
		{"GET", "/metrics", nil},
		{"GET", "/api/v1/version", nil},
		{"GET", "/api/v1/whoami", nil},
		{"GET", "/api/v1/status", nil},
		{"GET", "/api/v1/applications", nil},
		{"GET", "/api/v1/applications/web", nil},
		{"GET", "/api/v1/applications/web/diff", nil},
		{"GET", "/api/v1/applications/web/history", nil},
		{"POST", "/api/v1/applications/web/sync", wire.SyncOptions{}},
		{"POST", "/api/v1/applications/web/rollback", wire.RollbackOptions{Revision: 1}},
		{"POST", "/api/v1/applications/web/refresh", nil},
		{"POST", "/api/v1/applications/web/unhold", nil},
		{"POST", "/api/v1/applications/web/promote", nil},
		{"POST", "/api/v1/applications/web/abort", nil},
		{"GET", "/api/v1/events", nil},
	}
}

func TestRoleMatrixAllowsEachRoleItsRoutesAndForbidsTheRest(t *testing.T) {
	s := newTestServer(t, api.Options{})
	need := map[string]api.Role{}
	for _, r := range s.api.Routes() {
		need[r.Method+" "+r.Pattern] = r.Role
	}
	patternOf := func(path string) string {
		return strings.Replace(path, "/applications/web", "/applications/{name}", 1)
	}
	for _, role := range []struct {
		name  string
		token string
		role  api.Role
	}{{"viewer", viewerToken, api.RoleViewer}, {"deployer", deployerToken, api.RoleDeployer}, {"admin", adminToken, api.RoleAdmin}} {
		for _, rt := range everyGuardedRoute() {
			t.Run(role.name+" "+rt.method+" "+rt.path, func(t *testing.T) {
				status, _, body := s.call(t, rt.method, rt.path, role.token, rt.body)
				wantOK := (api.Subject{Role: role.role}).Allows(need[rt.method+" "+patternOf(rt.path)])
				switch {
				case wantOK && status/100 != 2:
					t.Errorf("%s %s as %s = %d %s, want 2xx", rt.method, rt.path, role.name, status, body)
				case !wantOK && status != http.StatusForbidden:
					t.Errorf("%s %s as %s = %d %s, want 403", rt.method, rt.path, role.name, status, body)
				}
			})
		}
	}
	// The matrix is not vacuous: each role is refused something but admin.
	for _, want := range []struct {
		token, method, path string
		status              int
	}{
		{viewerToken, "POST", "/api/v1/applications/web/sync", 403},
		{deployerToken, "GET", "/metrics", 403},
		{adminToken, "GET", "/metrics", 200},
		{"", "GET", "/api/v1/version", 401},
		{"not-a-token", "GET", "/api/v1/version", 401},
	} {
		if status, _, _ := s.call(t, want.method, want.path, want.token, nil); status != want.status {
			t.Errorf("%s %s as %s = %d, want %d", want.method, want.path, tokenName(want.token), status, want.status)
		}
	}
}

func TestScopedTokenSeesOnlyItsApplications(t *testing.T) {
	s := newTestServer(t, api.Options{})
	status, _, body := s.call(t, "GET", "/api/v1/applications", scopedToken, nil)
	var list wire.ApplicationList
	if err := json.Unmarshal(body, &list); status != 200 || err != nil {
		t.Fatalf("list = %d %s", status, body)
	}
	var names []string
	for _, a := range list.Applications {
		names = append(names, a.Name)
	}
	if d := cmp.Diff([]string{"web"}, names); d != "" {
		t.Errorf("scoped list (-want +got):\n%s", d)
	}
	for _, path := range []string{"/api/v1/applications/db", "/api/v1/applications/db/diff", "/api/v1/applications/db/history", "/api/v1/applications/nope"} {
		if status, _, _ := s.call(t, "GET", path, scopedToken, nil); status != 403 {
			t.Errorf("scoped GET %s = %d, want 403 whether or not it exists", path, status)
		}
	}
	if status, _, _ := s.call(t, "POST", "/api/v1/applications/db/sync", scopedToken, nil); status != 403 {
		t.Errorf("scoped sync of db = %d, want 403", status)
	}
	if status, _, _ := s.call(t, "POST", "/api/v1/applications/web/sync", scopedToken, nil); status != 202 {
		t.Errorf("scoped sync of web = %d, want 202", status)
	}
	// The status names lingering and pruned releases of the scope only.
	for _, tc := range []struct {
		token            string
		orphaned, pruned []string
	}{
		{scopedToken, []string{"web-old"}, []string{"web-gone"}},
		{viewerToken, []string{"db-old", "web-old"}, []string{"db-gone", "web-gone"}},
	} {
		_, _, body := s.call(t, "GET", "/api/v1/status", tc.token, nil)
		var st wire.ControllerStatus
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatal(err)
		}
		var released []string
		for _, r := range st.OrphanedReleases {
			released = append(released, r.Application)
		}
		if !slices.Equal(st.Orphaned, tc.orphaned) || !slices.Equal(released, tc.orphaned) || !slices.Equal(st.Pruned, tc.pruned) {
			t.Errorf("status as %s names orphaned %v, orphaned releases of %v, pruned %v; want orphaned %v, pruned %v",
				tokenName(tc.token), st.Orphaned, released, st.Pruned, tc.orphaned, tc.pruned)
		}
	}
}

func TestHandlersMarkTheContextWithTheSubjectsName(t *testing.T) {
	s := newTestServer(t, api.Options{})
	s.call(t, "POST", "/api/v1/applications/web/sync", deployerToken, wire.SyncOptions{})
	s.call(t, "POST", "/api/v1/applications/web/rollback", scopedToken, wire.RollbackOptions{Revision: 1})
	s.call(t, "POST", "/api/v1/applications/web/refresh", adminToken, nil)
	want := []string{"sync web ci", "rollback web webteam", "refresh web root"}
	if d := cmp.Diff(want, s.fake.called()); d != "" {
		t.Errorf("calls with actors (-want +got):\n%s", d)
	}
}

func TestStatusDetailsAreForAdminsOnly(t *testing.T) {
	s := newTestServer(t, api.Options{})
	for token, want := range map[string]bool{adminToken: true, deployerToken: false, viewerToken: false} {
		_, _, body := s.call(t, "GET", "/api/v1/status", token, nil)
		var st wire.ControllerStatus
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatal(err)
		}
		if (st.Details != nil) != want {
			t.Errorf("status as %s has details %v, want %v", tokenName(token), st.Details != nil, want)
		}
	}
}

func TestRequestBodiesAreStrictAndBounded(t *testing.T) {
	s := newTestServer(t, api.Options{MaxBody: 64})
	for _, tc := range []struct {
		name   string
		body   []byte
		ctype  string
		status int
		code   wire.ErrorCode
	}{
		{"unknown field is refused", []byte(`{"dryRun":true,"force":1}`), "application/json", 400, wire.CodeBadRequest},
		{"trailing data is refused", []byte(`{} {}`), "application/json", 400, wire.CodeBadRequest},
		{"a body over the limit is refused", []byte(`{"revision":"` + strings.Repeat("a", 100) + `"}`), "application/json", 413, wire.CodeTooLarge},
		{"a non-JSON content type is refused", []byte(`revision=x`), "application/x-www-form-urlencoded", 415, wire.CodeUnsupportedMedia},
		{"an empty body is the default sync", nil, "", 202, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", s.URL+"/api/v1/applications/web/sync", bytes.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+deployerToken)
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			resp, err := s.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d %s, want %d", resp.StatusCode, buf.String(), tc.status)
			}
			if tc.code != "" && decodeError(t, buf.Bytes()).Code != tc.code {
				t.Errorf("code of %s, want %s", buf.String(), tc.code)
			}
		})
	}
}

func TestAPanickingHandlerAnswers500AndTheServerLivesOn(t *testing.T) {
	s := newTestServer(t, api.Options{})
	s.fake.panicOn = "status"
	status, _, body := s.call(t, "GET", "/api/v1/status", adminToken, nil)
	if status != 500 || decodeError(t, body).Code != wire.CodeInternal || strings.Contains(string(body), "fake panics") {
		t.Errorf("panicking handler = %d %s, want 500 internal without the panic text", status, body)
	}
	if status, _, _ := s.call(t, "GET", "/api/v1/applications", adminToken, nil); status != 200 {
		t.Errorf("after a panic, list = %d, want 200", status)
	}
}

// memLog is an EventLog over a fixed slice of records.
type memLog struct{ recs []notify.Record }

func (m memLog) Events(_ context.Context, q store.Query) ([]notify.Record, error) {
	var out []notify.Record
	for _, r := range m.recs {
		if r.ID > q.AfterID && (len(q.Applications) == 0 || slices.Contains(q.Applications, r.Application)) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (m memLog) Replay(f notify.Filter) notify.ReplayFunc {
	return func(ctx context.Context, after int64, limit int) ([]notify.Record, error) {
		return m.Events(ctx, store.Query{AfterID: after, Applications: f.Applications, Limit: limit})
	}
}

func TestEventStreamReplaysScopesAndFilters(t *testing.T) {
	kept := memLog{recs: []notify.Record{
		{ID: 1, Event: notify.Event{Application: "web", Type: notify.SyncStarted, At: t0}},
		{ID: 2, Event: notify.Event{Application: "db", Type: notify.SyncStarted, At: t0}},
		{ID: 3, Event: notify.Event{Application: "web", Type: notify.SyncSucceeded, At: t0, Actor: "alice"}},
	}}
	broker := notify.NewBroker(notify.BrokerOptions{})
	s := newTestServer(t, api.Options{Broker: broker, EventLog: kept, Heartbeat: 50 * time.Millisecond})

	// The JSON list, scoped: the web-only token never sees db.
	_, _, body := s.call(t, "GET", "/api/v1/events", scopedToken, nil)
	var list wire.EventList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, e := range list.Events {
		ids = append(ids, e.ID)
	}
	if d := cmp.Diff([]int64{1, 3}, ids); d != "" {
		t.Errorf("scoped event list ids (-want +got):\n%s", d)
	}
	if status, _, _ := s.call(t, "GET", "/api/v1/events?type=nonsense", viewerToken, nil); status != 400 {
		t.Errorf("unknown type filter = %d, want 400", status)
	}

	// The stream: replay after id 1, then live, scoped and filtered by type.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/api/v1/events?type=sync-succeeded,sync-started", nil)
	req.Header.Set("Authorization", "Bearer "+scopedToken)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "1")
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("stream Content-Type %q", ct)
	}
	broker.Publish(notify.Record{ID: 4, Event: notify.Event{Application: "db", Type: notify.SyncStarted, At: t0}})
	broker.Publish(notify.Record{ID: 5, Event: notify.Event{Application: "web", Type: notify.DriftDetected, At: t0}})
	broker.Publish(notify.Record{ID: 6, Event: notify.Event{Application: "web", Type: notify.SyncStarted, At: t0, Actor: "bob"}})
	var got []string
	heartbeat := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && len(got) < 2 {
		line := sc.Text()
		if line == ": heartbeat" {
			heartbeat = true
		}
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			got = append(got, id)
		}
	}
	if d := cmp.Diff([]string{"3", "6"}, got); d != "" {
		t.Errorf("streamed ids (-want +got):\n%s", d)
	}
	_ = heartbeat // heartbeats are pinned by notify's own tests
}

// replication is a standby's view of a replicated controller.
func replication() *wire.Replication {
	return &wire.Replication{Replica: "b:8080", Role: wire.RoleStandby, Term: 3,
		Leader:   &wire.Replica{Name: "a:8080", Role: wire.RoleLeader, Addr: "10.0.0.1:8080", Version: "v1.0.0"},
		Replicas: []wire.Replica{{Name: "b:8080", Role: wire.RoleStandby, Addr: "10.0.0.2:8080", Version: "v1.0.0"}}}
}

func TestStatusShowsReplicationWithAddressesForAdminsOnly(t *testing.T) {
	s := newTestServer(t, api.Options{Replication: replication})
	for _, tc := range []struct {
		token string
		addrs bool
	}{{token: adminToken, addrs: true}, {token: viewerToken}} {
		status, _, body := s.call(t, "GET", "/api/v1/status", tc.token, nil)
		var st wire.ControllerStatus
		if status != 200 || json.Unmarshal(body, &st) != nil || st.Replication == nil {
			t.Fatalf("status as %s = %d %s, want replication", tokenName(tc.token), status, body)
		}
		r := st.Replication
		if r.Leader.Name != "a:8080" || r.Term != 3 || r.Role != wire.RoleStandby || len(r.Replicas) != 1 {
			t.Errorf("replication as %s = %+v, want the standby's view", tokenName(tc.token), r)
		}
		if got := r.Leader.Addr != "" || r.Replicas[0].Addr != ""; got != tc.addrs {
			t.Errorf("addresses shown to %s: %v, want %v", tokenName(tc.token), got, tc.addrs)
		}
	}
	// A single controller's status has no replication at all.
	_, _, body := newTestServer(t, api.Options{}).call(t, "GET", "/api/v1/status", adminToken, nil)
	if strings.Contains(string(body), "replication") {
		t.Errorf("a single controller's status names replication: %s", body)
	}
}

func TestStatusNamesTheActiveNotifiers(t *testing.T) {
	s := newTestServer(t, api.Options{Notifiers: func() []string { return []string{"log", "store", "webhook:ops"} }})
	status, _, body := s.call(t, "GET", "/api/v1/status", viewerToken, nil)
	var st wire.ControllerStatus
	if status != 200 || json.Unmarshal(body, &st) != nil {
		t.Fatalf("status = %d %s", status, body)
	}
	if got := strings.Join(st.Notifiers, ","); got != "log,store,webhook:ops" {
		t.Errorf("notifiers = %q, want log,store,webhook:ops", got)
	}
}

package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// exchange is one request a scripted forge expects and its answer.
type exchange struct {
	method, uri string // uri is the escaped path and query
	body        string // JSON the request must carry; "" for none
	status      int    // default 201 for POST, 200 otherwise
	answer      string // JSON answered
	header      http.Header
}

// scriptedForge is a local forge that checks each request against the next
// exchange of its script, exactly: method, path and query, the headers a
// forge reads, and the JSON body.
type scriptedForge struct {
	*httptest.Server
	t      *testing.T
	header http.Header // the headers every request must carry

	mu     sync.Mutex
	script []exchange
	done   int
}

// checkedHeaders are the request headers compared; one missing from the
// expectation must be absent from the request.
var checkedHeaders = []string{"Authorization", "Private-Token", "Accept", "Content-Type", "User-Agent", "X-Github-Api-Version"}

func newScriptedForge(t *testing.T, header http.Header, script ...exchange) *scriptedForge {
	t.Helper()
	s := &scriptedForge{t: t, header: header, script: script}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *scriptedForge) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == len(s.script) {
		s.t.Errorf("unexpected request %s %s", r.Method, r.RequestURI)
		w.WriteHeader(http.StatusTeapot)
		return
	}
	x := s.script[s.done]
	s.done++
	if got, want := r.Method+" "+r.RequestURI, x.method+" "+x.uri; got != want {
		s.t.Errorf("request %d = %s, want %s", s.done, got, want)
	}
	want := map[string]string{}
	for k := range s.header {
		want[k] = s.header.Get(k)
	}
	if x.body != "" {
		want["Content-Type"] = "application/json"
	}
	got := map[string]string{}
	for _, k := range checkedHeaders {
		if v := r.Header.Get(k); v != "" {
			got[http.CanonicalHeaderKey(k)] = v
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		s.t.Errorf("request %d %s %s headers (-want +got):\n%s", s.done, r.Method, r.RequestURI, d)
	}
	body, _ := io.ReadAll(r.Body)
	if d := jsonDiff(x.body, string(body)); d != "" {
		s.t.Errorf("request %d %s %s body (-want +got):\n%s", s.done, r.Method, r.RequestURI, d)
	}
	for k, vs := range x.header {
		w.Header()[k] = vs
	}
	status := x.status
	if status == 0 {
		status = http.StatusOK
		if r.Method == http.MethodPost {
			status = http.StatusCreated
		}
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, x.answer)
}

// jsonDiff compares two JSON texts as values; "" stands for no body.
func jsonDiff(want, got string) string {
	if want == "" || got == "" {
		return cmp.Diff(want, got)
	}
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		return "bad expectation: " + err.Error()
	}
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		return fmt.Sprintf("body %q is not JSON: %v", got, err)
	}
	return cmp.Diff(w, g)
}

// finished waits until the script is played out and the notifier counted
// the outcome; a request past the script fails the test when it comes.
func (s *scriptedForge) finished(t *testing.T, f *Forge, want Stats) {
	t.Helper()
	waitFor(t, func() bool {
		st := f.Stats()
		return st.Delivered+st.Failed >= want.Delivered+want.Failed
	})
	s.mu.Lock()
	if s.done != len(s.script) {
		t.Errorf("%d of %d requests made", s.done, len(s.script))
	}
	s.mu.Unlock()
	if got := f.Stats(); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

const (
	sha   = "0123456789abcdef0123456789abcdef01234567"
	token = "ghp_s3cr3tT0k3nValue"
)

var (
	githubHeaders = http.Header{"Authorization": {"Bearer " + token}, "Accept": {"application/vnd.github+json"},
		"X-Github-Api-Version": {"2022-11-28"}, "User-Agent": {"skep"}}
	gitlabHeaders = http.Header{"Private-Token": {token}, "Accept": {"application/json"}, "User-Agent": {"skep"}}
	giteaHeaders  = http.Header{"Authorization": {"token " + token}, "Accept": {"application/json"}, "User-Agent": {"skep"}}
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestForgeSetsEachProvidersCommitStatusExactly(t *testing.T) {
	long := strings.Repeat("x", 150) + "\nsecond line"
	for _, tc := range []struct {
		name     string
		provider ForgeProvider
		repo     string
		header   http.Header
		target   string
		event    Event
		want     exchange
	}{
		{name: "github sync-started is pending with the default context", provider: GitHub, repo: "acme/web", header: githubHeaders,
			event: Event{Application: "web", Type: SyncStarted, Revision: sha, Message: "deploying"},
			want:  exchange{method: "POST", uri: "/repos/acme/web/statuses/" + sha, body: `{"state":"pending","context":"skep/web","description":"deploying"}`}},
		{name: "github sync-succeeded is success with a target URL", provider: GitHub, repo: "acme/web", header: githubHeaders,
			target: "https://skep.example.org/apps/{{.Application}}",
			event:  Event{Application: "web", Type: SyncSucceeded, Revision: sha, Message: "2 services changed"},
			want: exchange{method: "POST", uri: "/repos/acme/web/statuses/" + sha,
				body: `{"state":"success","context":"skep/web","description":"2 services changed","target_url":"https://skep.example.org/apps/web"}`}},
		{name: "github sync-failed is failure, its message on one line cut to 140", provider: GitHub, repo: "acme/web", header: githubHeaders,
			event: Event{Application: "web", Type: SyncFailed, Revision: sha, Message: long},
			want: exchange{method: "POST", uri: "/repos/acme/web/statuses/" + sha,
				body: `{"state":"failure","context":"skep/web","description":"` + strings.Repeat("x", 139) + `…"}`}},
		{name: "github without a message sends no description", provider: GitHub, repo: "acme/web", header: githubHeaders,
			event: Event{Application: "web", Type: SyncSucceeded, Revision: sha},
			want:  exchange{method: "POST", uri: "/repos/acme/web/statuses/" + sha, body: `{"state":"success","context":"skep/web"}`}},
		{name: "gitlab sync-started is running, named, on an escaped project path", provider: GitLab, repo: "group/sub/web", header: gitlabHeaders,
			event: Event{Application: "web", Type: SyncStarted, Revision: sha, Message: "deploying"},
			want:  exchange{method: "POST", uri: "/projects/group%2Fsub%2Fweb/statuses/" + sha, body: `{"state":"running","name":"skep/web","description":"deploying"}`}},
		{name: "gitlab sync-failed is failed on a numeric project, cut to 255", provider: GitLab, repo: "4711", header: gitlabHeaders,
			target: "https://skep.example.org/apps/{{.Application}}",
			event:  Event{Application: "web", Type: SyncFailed, Revision: sha, Message: strings.Repeat("y", 300)},
			want: exchange{method: "POST", uri: "/projects/4711/statuses/" + sha,
				body: `{"state":"failed","name":"skep/web","description":"` + strings.Repeat("y", 254) + `…","target_url":"https://skep.example.org/apps/web"}`}},
		{name: "gitea sync-succeeded is success with a token header", provider: Gitea, repo: "acme/web", header: giteaHeaders,
			event: Event{Application: "web", Type: SyncSucceeded, Revision: sha, Message: "ok"},
			want:  exchange{method: "POST", uri: "/repos/acme/web/statuses/" + sha, body: `{"state":"success","context":"skep/web","description":"ok"}`}},
		{name: "a failure's root cause is the description, not the message that leads to it", provider: GitHub, repo: "acme/web", header: githubHeaders,
			event: Event{Application: "web", Type: SyncFailed, Revision: sha, Message: "apply web at 0123456: wave 0: release web failing: " + long,
				Cause: "web_api: exit code 1 (task: non-zero exit (1)); last log line: no database"},
			want: exchange{method: "POST", uri: "/repos/acme/web/statuses/" + sha,
				body: `{"state":"failure","context":"skep/web","description":"web_api: exit code 1 (task: non-zero exit (1)); last log line: no database"}`}},
		{name: "gitea sync-failed is failure", provider: Gitea, repo: "acme/web", header: giteaHeaders,
			event: Event{Application: "web", Type: SyncFailed, Revision: sha, Message: "render: bad compose"},
			want:  exchange{method: "POST", uri: "/repos/acme/web/statuses/" + sha, body: `{"state":"failure","context":"skep/web","description":"render: bad compose"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptedForge(t, tc.header, tc.want)
			f, err := NewForge(ForgeOptions{Name: "forge", Provider: tc.provider, URL: srv.URL + "/", Token: token,
				Repositories: map[string]string{"web": tc.repo}, TargetURL: tc.target, Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			run(t, f)
			f.Notify(t.Context(), tc.event)
			srv.finished(t, f, Stats{Delivered: 1})
		})
	}
}

func TestForgeSendsOnlySyncEventsWithARevisionOfMappedApplications(t *testing.T) {
	srv := newScriptedForge(t, githubHeaders,
		exchange{method: "POST", uri: "/repos/acme/web/statuses/" + sha, body: `{"state":"success","context":"ci/web"}`})
	f, err := NewForge(ForgeOptions{Name: "forge", Provider: GitHub, URL: srv.URL, Token: token, Context: "ci/{{.Application}}",
		Repositories: map[string]string{"web": "acme/web"}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	run(t, f)
	for _, e := range []Event{
		{Application: "web", Type: DriftDetected, Revision: sha},
		{Application: "web", Type: ResourcesPruned, Revision: sha},
		{Application: "web", Type: SyncStarted},
		{Application: "other", Type: SyncStarted, Revision: sha},
		{Application: "web", Type: SyncSucceeded, Revision: sha},
	} {
		f.Notify(t.Context(), e)
	}
	srv.finished(t, f, Stats{Delivered: 1, Suppressed: 4})
}

func TestForgeRoutesAnExactNameBeforeTheLongestGlob(t *testing.T) {
	f, err := NewForge(ForgeOptions{Name: "forge", Provider: Gitea, URL: "https://gitea.example.org/api/v1", Token: token,
		Repositories: map[string]string{"*": "acme/any", "web-*": "acme/web-glob", "web-api": "acme/exact", "web-a*": "acme/longer"}})
	if err != nil {
		t.Fatal(err)
	}
	for app, want := range map[string]string{"web-api": "acme/exact", "web-admin": "acme/longer", "web-x": "acme/web-glob", "db": "acme/any"} {
		if got, _ := f.repository(Event{Application: app, Type: SyncStarted, Revision: sha}); got != want {
			t.Errorf("repository(%s) = %q, want %q", app, got, want)
		}
	}
}

// previews is the fake PreviewLookup: the controller's wiring provides the
// real one.
type previews map[string]PreviewInfo

func (p previews) Preview(_ context.Context, app, commit string) (PreviewInfo, bool) {
	info, ok := p[app+"@"+commit]
	return info, ok
}

func TestForgeUpsertsOnePreviewComment(t *testing.T) {
	const marker = "<!-- skep-preview:web:feature-x -->"
	posted := marker + "\n**Preview** of `web` for branch `feature-x`: https://feature-x.preview.example.org\n\nDeploying `0123456`…\n"
	updated := marker + "\n**Preview** of `web` for branch `feature-x`: https://feature-x.preview.example.org\n\nDeployed `0123456`.\n"
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for _, tc := range []struct {
		name     string
		provider ForgeProvider
		header   http.Header
		script   []exchange
	}{
		{name: "github finds the pull request by head, posts once, then patches the same comment", provider: GitHub, header: githubHeaders, script: []exchange{
			{method: "POST", uri: "/repos/acme/web/statuses/" + sha, body: `{"state":"pending","context":"skep/web","description":"preview web-feature-x"}`},
			{method: "GET", uri: "/repos/acme/web/pulls?head=acme%3Afeature-x&state=open", answer: `[{"number":12}]`},
			{method: "GET", uri: "/repos/acme/web/issues/12/comments?page=1&per_page=100", answer: `[{"id":5,"body":"LGTM"}]`},
			{method: "POST", uri: "/repos/acme/web/issues/12/comments", body: `{"body":` + quote(posted) + `}`, answer: `{"id":77}`},
			{method: "POST", uri: "/repos/acme/web/statuses/" + sha, body: `{"state":"success","context":"skep/web","description":"preview web-feature-x"}`},
			{method: "GET", uri: "/repos/acme/web/pulls?head=acme%3Afeature-x&state=open", answer: `[{"number":12}]`},
			{method: "GET", uri: "/repos/acme/web/issues/12/comments?page=1&per_page=100", answer: `[{"id":5,"body":"LGTM"},{"id":77,"body":` + quote(posted) + `}]`},
			{method: "PATCH", uri: "/repos/acme/web/issues/comments/77", body: `{"body":` + quote(updated) + `}`, answer: `{"id":77}`},
		}},
		{name: "gitlab finds the merge request by source branch, posts a note, then puts to it", provider: GitLab, header: gitlabHeaders, script: []exchange{
			{method: "POST", uri: "/projects/acme%2Fweb/statuses/" + sha, body: `{"state":"running","name":"skep/web","description":"preview web-feature-x"}`},
			{method: "GET", uri: "/projects/acme%2Fweb/merge_requests?source_branch=feature-x&state=opened", answer: `[{"iid":3}]`},
			{method: "GET", uri: "/projects/acme%2Fweb/merge_requests/3/notes?page=1&per_page=100", answer: `[]`},
			{method: "POST", uri: "/projects/acme%2Fweb/merge_requests/3/notes", body: `{"body":` + quote(posted) + `}`, answer: `{"id":900}`},
			{method: "POST", uri: "/projects/acme%2Fweb/statuses/" + sha, body: `{"state":"success","name":"skep/web","description":"preview web-feature-x"}`},
			{method: "GET", uri: "/projects/acme%2Fweb/merge_requests?source_branch=feature-x&state=opened", answer: `[{"iid":3}]`},
			{method: "GET", uri: "/projects/acme%2Fweb/merge_requests/3/notes?page=1&per_page=100", answer: `[{"id":900,"body":` + quote(posted) + `}]`},
			{method: "PUT", uri: "/projects/acme%2Fweb/merge_requests/3/notes/900", body: `{"body":` + quote(updated) + `}`, answer: `{"id":900}`},
		}},
		{name: "gitea pages open pull requests for the head branch, skips a fork's, posts, then patches", provider: Gitea, header: giteaHeaders, script: []exchange{
			{method: "POST", uri: "/repos/acme/web/statuses/" + sha, body: `{"state":"pending","context":"skep/web","description":"preview web-feature-x"}`},
			{method: "GET", uri: "/repos/acme/web/pulls?limit=100&page=1&state=open",
				answer: `[{"number":8,"head":{"ref":"feature-x","repo":{"full_name":"eve/web"}}},{"number":9,"head":{"ref":"feature-x","repo":{"full_name":"acme/web"}}}]`},
			{method: "GET", uri: "/repos/acme/web/issues/9/comments?limit=100&page=1", answer: `[]`},
			{method: "POST", uri: "/repos/acme/web/issues/9/comments", body: `{"body":` + quote(posted) + `}`, answer: `{"id":41}`},
			{method: "POST", uri: "/repos/acme/web/statuses/" + sha, body: `{"state":"success","context":"skep/web","description":"preview web-feature-x"}`},
			{method: "GET", uri: "/repos/acme/web/pulls?limit=100&page=1&state=open", answer: `[{"number":9,"head":{"ref":"feature-x","repo":{"full_name":"acme/web"}}}]`},
			{method: "GET", uri: "/repos/acme/web/issues/9/comments?limit=100&page=1", answer: `[{"id":41,"body":` + quote(posted) + `}]`},
			{method: "PATCH", uri: "/repos/acme/web/issues/comments/41", body: `{"body":` + quote(updated) + `}`, answer: `{"id":41}`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptedForge(t, tc.header, tc.script...)
			f, err := NewForge(ForgeOptions{Name: "forge", Provider: tc.provider, URL: srv.URL, Token: token,
				Repositories: map[string]string{"web": "acme/web"}, Logger: quiet(),
				Previews: previews{"web@" + sha: {Branch: "feature-x", Domain: "feature-x.preview.example.org", URL: "https://feature-x.preview.example.org"}}})
			if err != nil {
				t.Fatal(err)
			}
			run(t, f)
			f.Notify(t.Context(), Event{Application: "web", Type: SyncStarted, Revision: sha, Message: "preview web-feature-x"})
			f.Notify(t.Context(), Event{Application: "web", Type: SyncSucceeded, Revision: sha, Message: "preview web-feature-x"})
			srv.finished(t, f, Stats{Delivered: 2})
		})
	}
}

func TestForgeLeavesNoCommentWithoutAnOpenPullRequest(t *testing.T) {
	srv := newScriptedForge(t, githubHeaders,
		exchange{method: "POST", uri: "/repos/acme/web/statuses/" + sha, body: `{"state":"success","context":"skep/web"}`},
		exchange{method: "GET", uri: "/repos/acme/web/pulls?head=acme%3Afeature-x&state=open", answer: `[]`})
	f, err := NewForge(ForgeOptions{Name: "forge", Provider: GitHub, URL: srv.URL, Token: token,
		Repositories: map[string]string{"web": "acme/web"}, Logger: quiet(), Previews: previews{"web@" + sha: {Branch: "feature-x"}}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, f)
	f.Notify(t.Context(), Event{Application: "web", Type: SyncSucceeded, Revision: sha})
	srv.finished(t, f, Stats{Delivered: 1})
}

func TestForgeRetriesServerErrorsHonouringRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name          string
		answers       []*http.Response
		wantGaps      []time.Duration
		wantDelivered uint64
		wantFailed    uint64
	}{
		{name: "a 503 is retried after the backoff, then succeeds", answers: []*http.Response{answer(503), answer(201)},
			wantGaps: []time.Duration{time.Second}, wantDelivered: 1},
		{name: "a 503 with Retry-After in seconds waits that long", answers: []*http.Response{retryAfterAnswer(503, "7"), answer(201)},
			wantGaps: []time.Duration{7 * time.Second}, wantDelivered: 1},
		{name: "a 429 with a Retry-After date waits until then", answers: []*http.Response{retryAfterAnswer(429, "date+30s"), answer(201)},
			wantGaps: []time.Duration{30 * time.Second}, wantDelivered: 1},
		{name: "a Retry-After shorter than the backoff leaves the backoff", answers: []*http.Response{answer(503), retryAfterAnswer(503, "1"), answer(201)},
			wantGaps: []time.Duration{time.Second, 2 * time.Second}, wantDelivered: 1},
		{name: "a Retry-After of an hour is held to five minutes", answers: []*http.Response{retryAfterAnswer(429, "3600"), answer(201)},
			wantGaps: []time.Duration{5 * time.Minute}, wantDelivered: 1},
		{name: "a 404 is given up at once", answers: []*http.Response{answer(404), answer(201)}, wantFailed: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var attempts []time.Time
				client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
					attempts = append(attempts, time.Now())
					resp := tc.answers[len(attempts)-1]
					if v := resp.Header.Get("Retry-After"); strings.HasPrefix(v, "date+") {
						d, _ := time.ParseDuration(strings.TrimPrefix(v, "date+"))
						resp.Header.Set("Retry-After", time.Now().Add(d).UTC().Format(http.TimeFormat))
					}
					return resp, nil
				})}
				f, err := NewForge(ForgeOptions{Name: "forge", Provider: GitHub, URL: "https://api.github.com", Token: token, Client: client,
					Repositories: map[string]string{"web": "acme/web"}, Delivery: Delivery{Retries: 3}, Logger: quiet()})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error)
				go func() { done <- f.Run(ctx) }()
				f.Notify(ctx, Event{Application: "web", Type: SyncFailed, Revision: sha})
				time.Sleep(time.Hour)
				synctest.Wait()
				cancel()
				<-done
				var gaps []time.Duration
				for i := 1; i < len(attempts); i++ {
					gaps = append(gaps, attempts[i].Sub(attempts[i-1]))
				}
				if d := cmp.Diff(tc.wantGaps, gaps); d != "" {
					t.Errorf("waits between attempts (-want +got):\n%s", d)
				}
				if got := f.Stats(); got.Delivered != tc.wantDelivered || got.Failed != tc.wantFailed {
					t.Errorf("Stats() = %+v, want delivered %d failed %d", got, tc.wantDelivered, tc.wantFailed)
				}
			})
		})
	}
}

func retryAfterAnswer(status int, after string) *http.Response {
	r := answer(status)
	r.Header = http.Header{"Retry-After": {after}}
	return r
}

func TestForgeGivesUpOnNotFoundAndLogsNoToken(t *testing.T) {
	// A forge that echoes the credential it was sent in its error message.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"message":"Not Found for %s"}`, r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	var logs syncLog
	f, err := NewForge(ForgeOptions{Name: "forge", Provider: GitHub, URL: srv.URL, Token: token,
		Repositories: map[string]string{"web": "acme/web"}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	run(t, f)
	f.Notify(t.Context(), Event{Application: "web", Type: SyncFailed, Revision: sha})
	waitFor(t, func() bool { return f.Stats().Failed == 1 })
	out := logs.String()
	if !strings.Contains(out, "notification not delivered") || !strings.Contains(out, "404 Not Found") || !strings.Contains(out, "attempts=1") {
		t.Errorf("give-up not logged with its cause after one attempt:\n%s", out)
	}
	if strings.Contains(out, token) {
		t.Errorf("log carries the token:\n%s", out)
	}
}

func TestTokenNeverFormatsItsValue(t *testing.T) {
	tok := Token(token)
	var logs syncLog
	holder := struct{ Token Token }{tok}
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "token", tok, "holder", holder)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "token", tok, "holder", holder)
	out := fmt.Sprintf("%v %s %q %#v %+v %#v", tok, tok, tok, tok, ForgeOptions{Token: tok}, holder) + logs.String()
	if strings.Contains(out, token) {
		t.Errorf("formatted token: %s", out)
	}
	if strings.Count(out, "[redacted]") != 10 {
		t.Errorf("want ten redacted tokens, got:\n%s", out)
	}
}

func TestNewForgeReportsEveryProblem(t *testing.T) {
	_, err := NewForge(ForgeOptions{Name: "f", Provider: "bitbucket", URL: "https://user:" + token + "@forge.example", Context: "{{.Nope",
		Repositories: map[string]string{"[bad": "acme/web", "web": "acme"}})
	if err == nil {
		t.Fatal("NewForge accepted it")
	}
	for _, want := range []string{`provider "bitbucket"`, "url carries credentials", "no token", `bad glob "[bad"`, `want owner/name, got "acme"`, "parse template context"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("NewForge = %v\nwant it to mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), token) {
		t.Errorf("NewForge error carries the URL's password: %v", err)
	}
}

func TestCheckRepositoryWantsEachProvidersForm(t *testing.T) {
	for _, tc := range []struct {
		provider ForgeProvider
		repo     string
		ok       bool
	}{
		{GitHub, "acme/web", true}, {GitHub, "acme", false}, {GitHub, "acme/web/x", false}, {GitHub, "acme//web", false},
		{Gitea, "acme/web", true}, {Gitea, "../web", false},
		{GitLab, "group/sub/web", true}, {GitLab, "4711", true}, {GitLab, "web", false}, {GitLab, "", false},
	} {
		if err := CheckRepository(tc.provider, tc.repo); (err == nil) != tc.ok {
			t.Errorf("CheckRepository(%s, %q) = %v, want ok %v", tc.provider, tc.repo, err, tc.ok)
		}
	}
}

package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/wire"
)

// pullSample is one pull-request payload of testdata/webhooks, the event
// header its forge sends it with, and what it says.
type pullSample struct {
	provider, sample, event string
	want                    api.PullRequest
}

func pullSamples() []pullSample {
	github := []string{"https://github.com/acme/web.git", "git@github.com:acme/web.git", "https://github.com/acme/web"}
	gitlab := []string{"https://gitlab.example.com/acme/web.git", "git@gitlab.example.com:acme/web.git", "https://gitlab.example.com/acme/web"}
	return []pullSample{
		{"github", "github-pull-request-opened.json", "pull_request", api.PullRequest{Provider: "github", Action: api.PullOpened, Number: 7,
			Title: "web: image v3, two replicas", URL: "https://github.com/acme/web/pull/7", Repository: "acme/web", Repositories: github,
			Base: "main", Branch: "scale-out", Head: "c4a5e1e0d6a3b2f1e0d9c8b7a6f5e4d3c2b1a098", Ref: "refs/pull/7/head"}},
		{"github", "github-pull-request-synchronize-fork.json", "pull_request", api.PullRequest{Provider: "github", Action: api.PullSynchronized, Number: 8,
			Title: "Add a healthcheck", URL: "https://github.com/acme/web/pull/8", Repository: "acme/web", Repositories: github,
			Base: "main", Branch: "healthcheck", Head: "7e6d5c4b3a2918f7e6d5c4b3a2918f7e6d5c4b3a", Ref: "refs/pull/8/head", Fork: true}},
		{"github", "github-pull-request-closed-merged.json", "pull_request", api.PullRequest{Provider: "github", Action: api.PullClosed, Merged: true, Number: 7,
			Title: "web: image v3, two replicas", URL: "https://github.com/acme/web/pull/7", Repository: "acme/web", Repositories: github,
			Base: "main", Branch: "scale-out", Head: "c4a5e1e0d6a3b2f1e0d9c8b7a6f5e4d3c2b1a098", Ref: "refs/pull/7/head"}},
		{"gitlab", "gitlab-merge-request-open.json", "Merge Request Hook", api.PullRequest{Provider: "gitlab", Action: api.PullOpened, Number: 3,
			Title: "web: image v3, two replicas", URL: "https://gitlab.example.com/acme/web/-/merge_requests/3", Repository: "acme/web",
			Repositories: []string{"https://gitlab.example.com/acme/web.git", "git@gitlab.example.com:acme/web.git", "https://gitlab.example.com/acme/web"},
			Base:         "main", Branch: "scale-out", Head: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", Ref: "refs/merge-requests/3/head"}},
		{"gitlab", "gitlab-merge-request-update-fork.json", "Merge Request Hook", api.PullRequest{Provider: "gitlab", Action: api.PullSynchronized, Number: 4,
			Title: "Add a healthcheck", URL: "https://gitlab.example.com/acme/web/-/merge_requests/4", Repository: "acme/web", Repositories: gitlab,
			Base: "main", Branch: "healthcheck", Head: "7e6d5c4b3a2918f7e6d5c4b3a2918f7e6d5c4b3a", Ref: "refs/merge-requests/4/head", Fork: true}},
		{"gitlab", "gitlab-merge-request-merge.json", "Merge Request Hook", api.PullRequest{Provider: "gitlab", Action: api.PullClosed, Merged: true, Number: 3,
			Title: "web: image v3, two replicas", URL: "https://gitlab.example.com/acme/web/-/merge_requests/3", Repository: "acme/web", Repositories: gitlab,
			Base: "main", Branch: "scale-out", Head: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", Ref: "refs/merge-requests/3/head"}},
		{"gitea", "gitea-pull-request-synchronized.json", "pull_request", api.PullRequest{Provider: "gitea", Action: api.PullSynchronized, Number: 5,
			Title: "web: image v3, two replicas", URL: "https://gitea.example.org/acme/web/pulls/5", Repository: "acme/web",
			Repositories: []string{"https://gitea.example.org/acme/web.git", "git@gitea.example.org:acme/web.git", "https://gitea.example.org/acme/web"},
			Base:         "main", Branch: "scale-out", Head: "c4a5e1e0d6a3b2f1e0d9c8b7a6f5e4d3c2b1a098", Ref: "refs/pull/5/head"}},
		{"forgejo", "forgejo-pull-request-opened-fork.json", "pull_request", api.PullRequest{Provider: "forgejo", Action: api.PullOpened, Number: 6,
			Title: "Add a healthcheck", URL: "https://codeberg.example.org/acme/web/pulls/6", Repository: "acme/web",
			Repositories: []string{"https://codeberg.example.org/acme/web.git", "git@codeberg.example.org:acme/web.git", "https://codeberg.example.org/acme/web"},
			Base:         "main", Branch: "healthcheck", Head: "7e6d5c4b3a2918f7e6d5c4b3a2918f7e6d5c4b3a", Ref: "refs/pull/6/head", Fork: true}},
		{"bitbucket", "bitbucket-pullrequest-created.json", "pullrequest:created", api.PullRequest{Provider: "bitbucket", Action: api.PullOpened, Number: 12,
			Title: "web: image v3, two replicas", URL: "https://bitbucket.org/acme/web/pull-requests/12", Repository: "acme/web",
			Repositories: []string{"https://bitbucket.org/acme/web"}, Base: "main", Branch: "scale-out", Head: "c4a5e1e0d6a3"}},
		{"bitbucket", "bitbucket-pullrequest-fulfilled.json", "pullrequest:fulfilled", api.PullRequest{Provider: "bitbucket", Action: api.PullClosed, Merged: true, Number: 12,
			Title: "web: image v3, two replicas", URL: "https://bitbucket.org/acme/web/pull-requests/12", Repository: "acme/web",
			Repositories: []string{"https://bitbucket.org/acme/web"}, Base: "main", Branch: "scale-out", Head: "c4a5e1e0d6a3"}},
		{"bitbucket-server", "bitbucket-server-pr-opened.json", "pr:opened", api.PullRequest{Provider: "bitbucket-server", Action: api.PullOpened, Number: 21,
			Title: "web: image v3, two replicas", URL: "https://bitbucket.example.com/projects/ACME/repos/web/pull-requests/21", Repository: "ACME/web",
			Repositories: []string{"https://bitbucket.example.com/scm/acme/web.git"}, Base: "main", Branch: "scale-out",
			Head: "c4a5e1e0d6a3b2f1e0d9c8b7a6f5e4d3c2b1a098", Ref: "refs/pull-requests/21/from"}},
		{"bitbucket-server", "bitbucket-server-pr-merged.json", "pr:merged", api.PullRequest{Provider: "bitbucket-server", Action: api.PullClosed, Merged: true, Number: 21,
			Title: "web: image v3, two replicas", URL: "https://bitbucket.example.com/projects/ACME/repos/web/pull-requests/21", Repository: "ACME/web",
			Repositories: []string{"https://bitbucket.example.com/scm/acme/web.git"}, Base: "main", Branch: "scale-out",
			Head: "c4a5e1e0d6a3b2f1e0d9c8b7a6f5e4d3c2b1a098", Ref: "refs/pull-requests/21/from"}},
	}
}

// eventHeader is the header provider names its event in.
func eventHeader(provider string) string {
	s, _ := api.SchemeOf(provider)
	return s.Event[0]
}

func TestParsePullRequestReadsEachForgesDocumentedPayload(t *testing.T) {
	for _, tc := range pullSamples() {
		t.Run(tc.sample, func(t *testing.T) {
			h := http.Header{}
			h.Set(eventHeader(tc.provider), tc.event)
			body := readSample(t, tc.sample)
			if !api.IsPullRequest(tc.provider, h, body) {
				t.Fatalf("IsPullRequest(%s) = false", tc.sample)
			}
			got, ignored, err := api.ParsePullRequest(tc.provider, h, body)
			if err != nil || ignored != "" {
				t.Fatalf("ParsePullRequest = %v, ignored %q", err, ignored)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("ParsePullRequest (-want +got):\n%s", d)
			}
			// The same pull request's events share one key.
			if !strings.HasSuffix(got.Key(), fmt.Sprintf("#%d", tc.want.Number)) {
				t.Errorf("Key() = %q", got.Key())
			}
		})
	}
}

func TestParsePullRequestIgnoresEventsThatMoveNoHead(t *testing.T) {
	h := http.Header{"X-Github-Event": {"pull_request"}}
	if _, ignored, err := api.ParsePullRequest("github", h, readSample(t, "github-pull-request-labeled.json")); err != nil || ignored == "" {
		t.Errorf("a labeled event = %v, ignored %q; want ignored", err, ignored)
	}
	for _, tc := range []struct{ name, provider, event, body string }{
		{"no number", "github", "pull_request", `{"action":"opened","pull_request":{"head":{"sha":"c4a5e1e0d6a3b2f1"},"base":{"ref":"main"}},"repository":{"full_name":"a/b","clone_url":"https://h/a/b.git"}}`},
		{"no head", "github", "pull_request", `{"action":"opened","number":1,"pull_request":{"base":{"ref":"main"}},"repository":{"full_name":"a/b","clone_url":"https://h/a/b.git"}}`},
		{"no repository", "gitlab", "Merge Request Hook", `{"object_kind":"merge_request","object_attributes":{"iid":1,"action":"open","target_branch":"main","last_commit":{"id":"c4a5e1e0d6a3b2f1"}}}`},
		{"not JSON", "bitbucket", "pullrequest:created", `{`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			h.Set(eventHeader(tc.provider), tc.event)
			if _, _, err := api.ParsePullRequest(tc.provider, h, []byte(tc.body)); err == nil {
				t.Error("ParsePullRequest succeeded, want an error")
			}
		})
	}
}

// fakeReviews records what the API queues; full makes its queue refuse.
type fakeReviews struct {
	mu     sync.Mutex
	queued []api.PullRequest
	full   bool
}

func (f *fakeReviews) Review(pr api.PullRequest) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.full {
		return nil, fmt.Errorf("%w: the queue is full", api.ErrUnavailable)
	}
	f.queued = append(f.queued, pr)
	return []string{"web"}, nil
}

func (f *fakeReviews) PullRequests(app string) ([]wire.PullRequest, error) {
	if app != "web" {
		return nil, api.ErrNotFound
	}
	return []wire.PullRequest{{Provider: "github", Repository: "acme/web", Number: 7, Base: "main", Head: "c4a5e1e0d6a3", State: wire.PullQueued}}, nil
}

func (f *fakeReviews) Plan(_ context.Context, app, revision string) (wire.Proposal, error) {
	return wire.Proposal{Application: app, Revision: revision, Releases: []wire.ProposedRelease{}}, nil
}

func (f *fakeReviews) taken() []api.PullRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.PullRequest(nil), f.queued...)
}

// signed returns the headers of a delivery of sample by provider signed
// with secret.
func signed(provider, event, secret string, body []byte, delivery string) map[string]string {
	h := map[string]string{eventHeader(provider): event}
	s, _ := api.SchemeOf(provider)
	switch {
	case s.Token:
		h[s.Signature[0]] = secret
	default:
		h[s.Signature[0]] = s.Prefix + hexSign(body, secret)
	}
	h[s.Delivery[0]] = delivery
	return h
}

func TestPullRequestDeliveriesAreVerifiedThenQueued(t *testing.T) {
	var specs []api.WebhookSpec
	for _, p := range api.Providers() {
		specs = append(specs, api.WebhookSpec{Provider: p, Secret: wire.NewToken("secret-of-" + p)})
	}
	hooks, err := api.NewWebhooks(specs, api.WebhooksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reviews := &fakeReviews{}
	s := newTestServer(t, api.Options{Webhooks: hooks, Reviews: reviews})
	for i, tc := range pullSamples() {
		t.Run(tc.sample, func(t *testing.T) {
			body := readSample(t, tc.sample)
			path := "/api/v1/webhooks/" + tc.provider
			before := len(reviews.taken())
			forged := signed(tc.provider, tc.event, "not-the-secret", body, fmt.Sprintf("forged-%d", i))
			if code, answer := post(t, s, path, body, forged); code != http.StatusUnauthorized {
				t.Errorf("forged delivery = %d %s, want 401", code, answer)
			}
			if n := len(reviews.taken()); n != before {
				t.Fatalf("a forged delivery queued %d plans", n-before)
			}
			good := signed(tc.provider, tc.event, "secret-of-"+tc.provider, body, fmt.Sprintf("pull-%d", i))
			code, answer := post(t, s, path, body, good)
			if code != http.StatusAccepted || !strings.Contains(answer, fmt.Sprintf(`"pullRequest":%d`, tc.want.Number)) {
				t.Fatalf("delivery = %d %s, want 202 naming the pull request", code, answer)
			}
			if got := reviews.taken(); len(got) != before+1 || got[before].Key() != tc.want.Key() {
				t.Errorf("queued %+v, want %s", got[before:], tc.want.Key())
			}
			if code, answer := post(t, s, path, body, good); code != http.StatusOK || !strings.Contains(answer, "duplicate") {
				t.Errorf("redelivery = %d %s, want a duplicate", code, answer)
			}
		})
	}
	t.Run("a full queue answers 503 and forgets the delivery id", func(t *testing.T) {
		reviews.mu.Lock()
		reviews.full = true
		reviews.mu.Unlock()
		body := readSample(t, "github-pull-request-opened.json")
		h := signed("github", "pull_request", "secret-of-github", body, "busy-1")
		code, answer := post(t, s, "/api/v1/webhooks/github", body, h)
		if code != http.StatusServiceUnavailable {
			t.Fatalf("delivery to a full queue = %d %s, want 503", code, answer)
		}
		reviews.mu.Lock()
		reviews.full = false
		reviews.mu.Unlock()
		if code, answer := post(t, s, "/api/v1/webhooks/github", body, h); code != http.StatusAccepted {
			t.Errorf("the forge's retry = %d %s, want 202", code, answer)
		}
	})
	t.Run("an event that moves no head is ignored", func(t *testing.T) {
		body := readSample(t, "github-pull-request-labeled.json")
		code, answer := post(t, s, "/api/v1/webhooks/github", body, signed("github", "pull_request", "secret-of-github", body, "label-1"))
		if code != http.StatusOK || !strings.Contains(answer, "ignored") {
			t.Errorf("labeled = %d %s, want 200 ignored", code, answer)
		}
	})
}

func TestPullRequestsAreIgnoredWithoutReviews(t *testing.T) {
	hooks, err := api.NewWebhooks([]api.WebhookSpec{{Provider: "github", Secret: wire.NewToken("s")}}, api.WebhooksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := newTestServer(t, api.Options{Webhooks: hooks})
	body := readSample(t, "github-pull-request-opened.json")
	code, answer := post(t, s, "/api/v1/webhooks/github", body, signed("github", "pull_request", "s", body, "d-1"))
	if code != http.StatusOK || !strings.Contains(answer, "plans no pull requests") {
		t.Errorf("delivery = %d %s, want 200 ignored", code, answer)
	}
	if code, _, body := s.call(t, "POST", "/api/v1/applications/web/plan", deployerToken, wire.PlanRequest{Revision: "main"}); code != http.StatusServiceUnavailable {
		t.Errorf("plan without reviews = %d %s, want 503", code, body)
	}
	if code, _, body := s.call(t, "GET", "/api/v1/applications/web/pulls", viewerToken, nil); code != http.StatusOK || !strings.Contains(string(body), `"pullRequests":[]`) {
		t.Errorf("pulls without reviews = %d %s, want none", code, body)
	}
}

// FuzzParsePullRequest: whatever a forge (or someone holding its secret)
// sends, ParsePullRequest returns an error, a reason to ignore, or a pull
// request that names its number, repository, base and (open) head, and it
// never panics.
func FuzzParsePullRequest(f *testing.F) {
	for _, tc := range pullSamples() {
		data := readSample(f, tc.sample)
		if len(data) == 0 {
			f.Fatalf("empty seed %s", tc.sample)
		}
		f.Add(tc.provider, tc.event, data)
	}
	f.Add("gitlab", "System Hook", []byte(`{"object_kind":"merge_request"}`))
	f.Fuzz(func(t *testing.T, provider, event string, body []byte) {
		h := http.Header{}
		if s, ok := api.SchemeOf(provider); ok && len(s.Event) > 0 {
			h.Set(s.Event[0], event)
		}
		pr, ignored, err := api.ParsePullRequest(provider, h, body)
		if err != nil || ignored != "" {
			return
		}
		if pr.Number <= 0 || pr.Repository == "" || pr.Base == "" || pr.Provider != provider || pr.Action == "" {
			t.Fatalf("ParsePullRequest accepted an incomplete pull request: %+v", pr)
		}
		if pr.Action != api.PullClosed && len(pr.Head) < 7 {
			t.Fatalf("an open pull request without a head: %+v", pr)
		}
	})
}

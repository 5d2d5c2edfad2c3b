package api_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/wire"
)

func hexSign(body []byte, secret string) string {
	return hex.EncodeToString(api.Sign(body, wire.NewToken(secret)))
}

func readSample(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "webhooks", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// forge describes how each provider signs and labels a push delivery.
type forge struct {
	name             string // the provider, or how a second form of it is told apart
	provider, sample string
	headers          func(body []byte, secret string) map[string]string
	delivery         string
	repos            []string
	refs             []string
}

func forges() []forge {
	return []forge{
		{
			provider: "github", sample: "github-push.json", delivery: "X-GitHub-Delivery",
			headers: func(b []byte, s string) map[string]string {
				return map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + hexSign(b, s)}
			},
			repos: []string{"https://github.com/acme/web.git", "git@github.com:acme/web.git", "https://github.com/acme/web"},
			refs:  []string{"refs/heads/main"},
		},
		{
			provider: "gitlab", sample: "gitlab-push.json", delivery: "X-Gitlab-Event-UUID",
			headers: func(_ []byte, s string) map[string]string {
				return map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": s}
			},
			repos: []string{"https://gitlab.example.com/acme/web.git", "git@gitlab.example.com:acme/web.git", "https://gitlab.example.com/acme/web"},
			refs:  []string{"refs/heads/main"},
		},
		{
			name: "gitlab system hook", provider: "gitlab", sample: "gitlab-system-push.json", delivery: "X-Gitlab-Event-UUID",
			headers: func(_ []byte, s string) map[string]string {
				return map[string]string{"X-Gitlab-Event": "System Hook", "X-Gitlab-Token": s}
			},
			repos: []string{"git@gitlab.example.com:acme/web.git", "https://gitlab.example.com/acme/web.git", "https://gitlab.example.com/acme/web"},
			refs:  []string{"refs/heads/main"},
		},
		{
			provider: "gitea", sample: "gitea-push.json", delivery: "X-Gitea-Delivery",
			headers: func(b []byte, s string) map[string]string {
				return map[string]string{"X-Gitea-Event": "push", "X-Gitea-Signature": hexSign(b, s)}
			},
			repos: []string{"https://gitea.example.org/acme/web.git", "git@gitea.example.org:acme/web.git", "https://gitea.example.org/acme/web"},
			refs:  []string{"refs/heads/main"},
		},
		{
			provider: "forgejo", sample: "forgejo-push.json", delivery: "X-Forgejo-Delivery",
			headers: func(b []byte, s string) map[string]string {
				return map[string]string{"X-Forgejo-Event": "push", "X-Forgejo-Signature": hexSign(b, s)}
			},
			repos: []string{"https://codeberg.example.org/acme/web.git", "git@codeberg.example.org:acme/web.git", "https://codeberg.example.org/acme/web"},
			refs:  []string{"refs/heads/main"},
		},
		{
			provider: "gogs", sample: "gogs-push.json", delivery: "X-Gogs-Delivery",
			headers: func(b []byte, s string) map[string]string {
				return map[string]string{"X-Gogs-Event": "push", "X-Gogs-Signature": hexSign(b, s)}
			},
			repos: []string{"https://gogs.example.org/acme/web.git", "git@gogs.example.org:acme/web.git", "https://gogs.example.org/acme/web"},
			refs:  []string{"refs/heads/main"},
		},
		{
			provider: "bitbucket", sample: "bitbucket-push.json", delivery: "X-Request-UUID",
			headers: func(b []byte, s string) map[string]string {
				return map[string]string{"X-Event-Key": "repo:push", "X-Hub-Signature": "sha256=" + hexSign(b, s)}
			},
			repos: []string{"https://bitbucket.org/acme/web"},
			refs:  []string{"refs/heads/main"},
		},
		{
			provider: "bitbucket-server", sample: "bitbucket-server-push.json", delivery: "X-Request-Id",
			headers: func(b []byte, s string) map[string]string {
				return map[string]string{"X-Event-Key": "repo:refs_changed", "X-Hub-Signature": "sha256=" + hexSign(b, s)}
			},
			repos: []string{"ssh://git@bitbucket.example.com:7999/acme/web.git", "https://bitbucket.example.com/scm/acme/web.git"},
			refs:  []string{"refs/heads/main"},
		},
		{
			provider: "generic", sample: "generic-push.json", delivery: "X-Skep-Delivery",
			headers: func(b []byte, s string) map[string]string {
				return map[string]string{"X-Skep-Signature": "sha256=" + hexSign(b, s)}
			},
			repos: []string{"https://git.example.org/acme/web.git"},
			refs:  []string{"refs/heads/main"},
		},
	}
}

func webhookServer(t *testing.T) (*testServer, chan api.Push) {
	t.Helper()
	var specs []api.WebhookSpec
	for _, p := range api.Providers() {
		specs = append(specs, api.WebhookSpec{Provider: p, Secret: wire.NewToken("secret-of-" + p)})
	}
	hooks, err := api.NewWebhooks(specs, api.WebhooksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{pushed: make(chan api.Push, 16)}
	s := newTestServer(t, api.Options{Reconciler: f, Webhooks: hooks, MaxBody: 8 << 10})
	s.fake = f
	return s, f.pushed
}

func post(t *testing.T, s *testServer, path string, body []byte, headers map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.String()
}

func TestWebhookDeliveriesOfEveryForge(t *testing.T) {
	s, pushed := webhookServer(t)
	for _, f := range forges() {
		if f.name == "" {
			f.name = f.provider
		}
		t.Run(f.name, func(t *testing.T) {
			body := readSample(t, f.sample)
			secret := "secret-of-" + f.provider
			path := "/api/v1/webhooks/" + f.provider

			valid := f.headers(body, secret)
			valid[f.delivery] = "delivery-1-" + f.name
			start := time.Now()
			status, answer := post(t, s, path, body, valid)
			if status != http.StatusAccepted || !strings.Contains(answer, `"accepted"`) {
				t.Fatalf("valid delivery = %d %s, want 202 accepted", status, answer)
			}
			// The answer names what the push matched, for the forge's log.
			var accepted api.WebhookResponse
			if err := json.Unmarshal([]byte(answer), &accepted); err != nil || !slices.Equal(accepted.Applications, []string{"web"}) {
				t.Errorf("accepted answer = %s, want the matched application web named", answer)
			}
			select {
			case p := <-pushed:
				if d := cmp.Diff(api.Push{Repositories: f.repos, Refs: f.refs}, p); d != "" {
					t.Errorf("push handed to the reconciler (-want +got):\n%s", d)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a valid delivery was not processed")
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Logf("delivery took %s", took) // no timing assertion; logged for the curious
			}

			if status, answer := post(t, s, path, body, valid); status != http.StatusOK || !strings.Contains(answer, `"duplicate"`) {
				t.Errorf("redelivery of the same id = %d %s, want 200 duplicate", status, answer)
			}

			wrong := f.headers(body, "not-the-secret")
			wrong[f.delivery] = "delivery-2-" + f.name
			if status, answer := post(t, s, path, body, wrong); status != http.StatusUnauthorized || !strings.Contains(answer, "does not match") {
				t.Errorf("wrongly signed delivery = %d %s, want 401 naming the mismatch", status, answer)
			}
			tampered := f.headers(body, secret)
			if f.provider != "gitlab" { // GitLab's token does not cover the body
				if status, _ := post(t, s, path, append(bytes.TrimSpace(body), ' ', ' '), tampered); status != http.StatusUnauthorized {
					t.Errorf("tampered body = %d, want 401", status)
				}
			}
			missing := f.headers(body, secret)
			for k := range missing {
				if strings.Contains(k, "Signature") || strings.Contains(k, "Token") {
					delete(missing, k)
				}
			}
			if status, answer := post(t, s, path, body, missing); status != http.StatusUnauthorized || !strings.Contains(answer, "missing signature") {
				t.Errorf("unsigned delivery = %d %s, want 401 missing signature", status, answer)
			}
			select {
			case p := <-pushed:
				t.Errorf("a refused delivery reached the reconciler: %+v", p)
			default:
			}
		})
	}
}

func TestWebhookIgnoresWhatIsNotAPushAndRefusesWhatItCannotTake(t *testing.T) {
	s, pushed := webhookServer(t)
	ping := readSample(t, "github-ping.json")
	status, answer := post(t, s, "/api/v1/webhooks/github", ping, map[string]string{
		"X-GitHub-Event": "ping", "X-Hub-Signature-256": "sha256=" + hexSign(ping, "secret-of-github")})
	if status != http.StatusOK || !strings.Contains(answer, `"ignored"`) {
		t.Errorf("ping = %d %s, want 200 ignored", status, answer)
	}
	big := []byte(fmt.Sprintf(`{"repository":"https://x.example/a.git","ref":"%s"}`, strings.Repeat("r", 9<<10)))
	if status, answer := post(t, s, "/api/v1/webhooks/generic", big, map[string]string{"X-Skep-Signature": "sha256=" + hexSign(big, "secret-of-generic")}); status != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized delivery = %d %s, want 413", status, answer)
	}
	bad := []byte(`{"repository":"https://x.example/a.git","extra":true}`)
	if status, answer := post(t, s, "/api/v1/webhooks/generic", bad, map[string]string{"X-Skep-Signature": "sha256=" + hexSign(bad, "secret-of-generic")}); status != http.StatusBadRequest {
		t.Errorf("generic payload with an unknown field = %d %s, want 400", status, answer)
	}
	if status, _ := post(t, s, "/api/v1/webhooks/svn", ping, nil); status != http.StatusNotFound {
		t.Errorf("unknown provider = %d, want 404", status)
	}
	select {
	case p := <-pushed:
		t.Errorf("nothing should have reached the reconciler, got %+v", p)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestWebhookQueueFullAnswers503AndForgetsTheDelivery(t *testing.T) {
	hooks, err := api.NewWebhooks([]api.WebhookSpec{{Provider: "generic", Secret: wire.NewToken("k")}}, api.WebhooksOptions{Queue: 1})
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{pushed: make(chan api.Push)} // unbuffered and never read: the worker blocks
	s := newTestServer(t, api.Options{Reconciler: f, Webhooks: hooks})
	body := readSample(t, "generic-push.json")
	h := func(id string) map[string]string {
		return map[string]string{"X-Skep-Signature": "sha256=" + hexSign(body, "k"), "X-Skep-Delivery": id}
	}
	var statuses []int
	for i := range 4 {
		st, _ := post(t, s, "/api/v1/webhooks/generic", body, h(fmt.Sprint(i)))
		statuses = append(statuses, st)
	}
	if statuses[len(statuses)-1] != http.StatusServiceUnavailable {
		t.Fatalf("statuses with a stuck worker = %v, want the last 503", statuses)
	}
	go func() { <-f.pushed }() // unblock one
	// The refused delivery was forgotten, so its retry is not a duplicate.
	var retry int
	for range 50 {
		retry, _ = post(t, s, "/api/v1/webhooks/generic", body, h("3"))
		if retry != http.StatusServiceUnavailable {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if retry != http.StatusAccepted {
		t.Errorf("retry of a refused delivery = %d, want 202", retry)
	}
}

func TestVerifyWebhookErrors(t *testing.T) {
	body := []byte(`{}`)
	secret := wire.NewToken("k")
	for _, tc := range []struct {
		name     string
		provider string
		header   http.Header
		want     error
	}{
		{"github without signature", "github", http.Header{}, api.ErrMissingSignature},
		{"github with sha1 form", "github", http.Header{"X-Hub-Signature-256": {"sha1=abc"}}, api.ErrBadSignature},
		{"github with non-hex", "github", http.Header{"X-Hub-Signature-256": {"sha256=zz"}}, api.ErrBadSignature},
		{"gitlab with a wrong token", "gitlab", http.Header{"X-Gitlab-Token": {"kk"}}, api.ErrBadSignature},
		{"gitea without signature", "gitea", http.Header{}, api.ErrMissingSignature},
		{"bitbucket right", "bitbucket", http.Header{"X-Hub-Signature": {"sha256=" + hexSign(body, "k")}}, nil},
		{"gitlab right", "gitlab", http.Header{"X-Gitlab-Token": {"k"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := api.VerifyWebhook(tc.provider, tc.header, body, secret)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("VerifyWebhook = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRepoKeyNormalisesWhatNamesOneRepository(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://github.com/acme/web.git", "github.com/acme/web"},
		{"https://GitHub.com/Acme/Web/", "github.com/acme/web"},
		{"git@github.com:acme/web.git", "github.com/acme/web"},
		{"ssh://git@github.com:22/acme/web", "github.com/acme/web"},
		{"http://user@127.0.0.1:3000/app.git", "127.0.0.1/app"},
		{"/srv/git/app.git", "/srv/git/app"},
		{"file:///srv/git/app.git", "/srv/git/app"},
		{"", ""},
		{"not a url", ""},
	} {
		if got := api.RepoKey(tc.in); got != tc.want {
			t.Errorf("RepoKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPushMatchesRepositoryAndRef(t *testing.T) {
	push := api.Push{Repositories: []string{"https://github.com/acme/web.git"}, Refs: []string{"refs/heads/main"}}
	for _, tc := range []struct {
		repo, revision string
		want           bool
	}{
		{"git@github.com:acme/web.git", "main", true},
		{"https://github.com/acme/web", "refs/heads/main", true},
		{"https://github.com/acme/web", "HEAD", true},
		{"https://github.com/acme/web", "", true},
		{"https://github.com/acme/web", "develop", false},
		{"https://github.com/acme/web", strings.Repeat("a", 40), false},
		{"https://github.com/acme/api", "main", false},
	} {
		if got := push.Matches(tc.repo, tc.revision); got != tc.want {
			t.Errorf("Push.Matches(%q, %q) = %v, want %v", tc.repo, tc.revision, got, tc.want)
		}
	}
	tag := api.Push{Repositories: []string{"https://github.com/acme/web.git"}, Refs: []string{"refs/tags/v1"}}
	if !tag.Matches("https://github.com/acme/web", "v1") || tag.Matches("https://github.com/acme/web", "main") {
		t.Error("a tag push must match the tag revision and not a branch")
	}
}

func TestParseWebhooksFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gh.key"), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GL_TOKEN": "tok"}
	getenv := func(k string) string { return env[k] }
	name := filepath.Join(dir, "webhooks.yaml")
	good := "webhooks:\n  - provider: github\n    secretFile: gh.key\n  - provider: gitlab\n    secretEnv: GL_TOKEN\n"
	specs, err := api.ParseWebhooks(name, []byte(good), getenv)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].Secret.Reveal() != "s3cret" || specs[1].Secret.Reveal() != "tok" {
		t.Errorf("specs = %v", specs)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown provider", "webhooks:\n  - provider: svn\n    secretEnv: GL_TOKEN\n", ":2:15: webhooks[0].provider: want one of"},
		{"unknown key", "webhooks:\n  - provider: github\n    secret: x\n", ":3:5: webhooks[0].secret: unknown key"},
		{"no secret", "webhooks:\n  - provider: github\n", "webhooks[0]: no secret"},
		{"unset variable", "webhooks:\n  - provider: github\n    secretEnv: NOPE\n", "webhooks[0].secretEnv: environment variable NOPE is not set"},
		{"twice", "webhooks:\n  - {provider: github, secretEnv: GL_TOKEN}\n  - {provider: github, secretEnv: GL_TOKEN}\n", "webhooks[1].provider: \"github\" is configured twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := api.ParseWebhooks(name, []byte(tc.yaml), getenv)
			var problems configfile.Problems
			if !errors.As(err, &problems) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseWebhooks error = %v, want problems containing %q", err, tc.want)
			}
		})
	}
}

func FuzzParseWebhook(f *testing.F) {
	entries, err := os.ReadDir(filepath.Join("testdata", "webhooks"))
	if err != nil {
		f.Fatal(err)
	}
	seeds := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			for _, p := range api.Providers() {
				f.Add(p, readSample(f, e.Name()))
				seeds++
			}
		}
	}
	if seeds == 0 {
		f.Fatal("no fuzz seeds in testdata/webhooks")
	}
	f.Fuzz(func(t *testing.T, provider string, body []byte) {
		// Each provider is told its push event, so the fuzzer reaches the
		// payload's decoding rather than stopping at the event header.
		headers := http.Header{}
		if sc, ok := api.SchemeOf(provider); ok && len(sc.Event) > 0 {
			headers.Set(sc.Event[0], sc.PushEvents[len(body)%len(sc.PushEvents)])
		}
		push, ignored, err := api.ParseWebhook(provider, headers, body)
		if err == nil && ignored == "" {
			// Property: an accepted push names at least one matchable repository.
			ok := false
			for _, r := range push.Repositories {
				ok = ok || api.RepoKey(r) != ""
			}
			if !ok {
				t.Errorf("ParseWebhook(%s) accepted a push naming no repository: %+v", provider, push)
			}
		}
	})
}

// plainKey matches keys made only of characters a URL host and path keep
// as they are.
var plainKey = regexp.MustCompile(`^[a-z0-9._~-]+(/[a-z0-9._~-]+)*$`)

func FuzzRepoKey(f *testing.F) {
	for _, s := range []string{"https://github.com/acme/web.git", "git@host:a/b", "/srv/x.git", "ssh://u@h:22/p", "::", "@:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k := api.RepoKey(s)
		// Property: a key is lower-case and stable under normalising again
		// as a URL of the same host and path.
		if k != strings.ToLower(k) {
			t.Errorf("RepoKey(%q) = %q is not lower-case", s, k)
		}
		// Characters that mean something else in a URL are left out of the
		// round trip; the key is a matching hint, not a URL.
		if k != "" && !strings.HasPrefix(k, "/") && plainKey.MatchString(k) {
			if again := api.RepoKey("https://" + k); again != k {
				t.Errorf("RepoKey(https://%s) = %q, want %q", k, again, k)
			}
		}
	})
}

// forgeNamed returns the forge of forges() called name (or, without a
// name of its own, its provider).
func forgeNamed(t *testing.T, name string) forge {
	t.Helper()
	for _, f := range forges() {
		if f.name == name || (f.name == "" && f.provider == name) {
			return f
		}
	}
	t.Fatalf("no forge %q", name)
	return forge{}
}

func TestWebhookTagPushesRefreshAndDeletionsNeverDo(t *testing.T) {
	s, pushed := webhookServer(t)
	for _, tc := range []struct {
		name, forge, sample string
		event               map[string]string // replaces the forge's event header
		refs                []string          // handed to the reconciler; nil for nothing
		reason              string            // of an ignored delivery
	}{
		{name: "bitbucket server tag added, branch deleted in one push", forge: "bitbucket-server", sample: "bitbucket-server-tag.json",
			refs: []string{"refs/tags/v1.2.0"}},
		{name: "bitbucket server branch deleted", forge: "bitbucket-server", sample: "bitbucket-server-delete.json",
			reason: "only deleted refs/heads/main"},
		{name: "bitbucket server test connection", forge: "bitbucket-server", sample: "bitbucket-server-ping.json",
			event: map[string]string{"X-Event-Key": "diagnostics:ping"}, reason: `"diagnostics:ping" is not a push`},
		{name: "bitbucket server push sent to the cloud endpoint", forge: "bitbucket", sample: "bitbucket-server-push.json",
			event: map[string]string{"X-Event-Key": "repo:refs_changed"}, reason: `"repo:refs_changed" is not a push`},
		{name: "gitlab system hook tag push", forge: "gitlab system hook", sample: "gitlab-system-tag.json",
			refs: []string{"refs/tags/v1.2.0"}},
		{name: "gitlab system hook branch deleted", forge: "gitlab system hook", sample: "gitlab-system-delete.json",
			reason: "only deleted refs/heads/main"},
		{name: "gitlab system hook project created", forge: "gitlab system hook", sample: "gitlab-system-project-create.json",
			reason: `event "project_create" is not a push`},
		{name: "gogs tag created", forge: "gogs", sample: "gogs-create-tag.json",
			event: map[string]string{"X-Gogs-Event": "create"}, refs: []string{"refs/tags/v1.2.0"}},
		{name: "gogs branch created", forge: "gogs", sample: "gogs-create-branch.json",
			event: map[string]string{"X-Gogs-Event": "create"}, reason: "create of a branch: its push follows"},
		{name: "gogs branch deleted", forge: "gogs", sample: "gogs-delete.json",
			event: map[string]string{"X-Gogs-Event": "delete"}, reason: `"delete" is not a push`},
		{name: "github branch deleted", forge: "github", sample: "github-delete.json",
			reason: "only deleted refs/heads/main"},
		{name: "bitbucket cloud branch deleted", forge: "bitbucket", sample: "bitbucket-delete.json",
			reason: "only deleted refs/heads/main"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := forgeNamed(t, tc.forge)
			body := readSample(t, tc.sample)
			headers := f.headers(body, "secret-of-"+f.provider)
			for k, v := range tc.event {
				headers[k] = v
			}
			headers[f.delivery] = "refs-" + tc.name
			status, answer := post(t, s, "/api/v1/webhooks/"+f.provider, body, headers)
			var got api.WebhookResponse
			if err := json.Unmarshal([]byte(answer), &got); err != nil {
				t.Fatalf("answer %q: %v", answer, err)
			}
			if tc.refs == nil {
				if status != http.StatusOK || got.Status != "ignored" || !strings.Contains(got.Reason, tc.reason) {
					t.Errorf("delivery = %d %s, want 200 ignored saying %q", status, answer, tc.reason)
				}
				select {
				case p := <-pushed:
					t.Errorf("an ignored delivery reached the reconciler: %+v", p)
				case <-time.After(50 * time.Millisecond):
				}
				return
			}
			if status != http.StatusAccepted || got.Status != "accepted" {
				t.Fatalf("delivery = %d %s, want 202 accepted", status, answer)
			}
			select {
			case p := <-pushed:
				if !slices.Equal(p.Refs, tc.refs) {
					t.Errorf("refs handed to the reconciler = %q, want %q", p.Refs, tc.refs)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("an accepted delivery was not processed")
			}
		})
	}
}

// Applications write a repository in any of the forms a forge gives: the
// push must match each, and no other repository.
func TestWebhookPushMatchesTheRepositoryAsApplicationsWriteIt(t *testing.T) {
	for _, tc := range []struct {
		forge, sample string
		match, miss   []string
	}{
		{forge: "bitbucket-server", sample: "bitbucket-server-push.json",
			match: []string{"ssh://git@bitbucket.example.com:7999/acme/web.git", "https://bitbucket.example.com/scm/acme/web.git",
				"https://jdoe@bitbucket.example.com/scm/ACME/web", "ssh://git@bitbucket.example.com:7999/ACME/web"},
			miss: []string{"https://bitbucket.example.com/scm/acme/api.git", "https://bitbucket.example.com/projects/ACME/repos/web/browse",
				"https://bitbucket.org/acme/web"}},
		{forge: "gogs", sample: "gogs-push.json",
			match: []string{"https://gogs.example.org/acme/web.git", "git@gogs.example.org:acme/web.git", "https://gogs.example.org/acme/web",
				"ssh://git@gogs.example.org:2222/acme/web.git"},
			miss: []string{"https://gogs.example.org/acme/web-api.git", "https://gogs.example.org/other/web.git"}},
		{forge: "gitlab system hook", sample: "gitlab-system-push.json",
			match: []string{"https://gitlab.example.com/acme/web.git", "git@gitlab.example.com:acme/web.git"},
			miss:  []string{"https://gitlab.example.com/acme/api.git"}},
	} {
		t.Run(tc.forge, func(t *testing.T) {
			f := forgeNamed(t, tc.forge)
			body := readSample(t, tc.sample)
			h := http.Header{}
			for k, v := range f.headers(body, "k") {
				h.Set(k, v)
			}
			push, ignored, err := api.ParseWebhook(f.provider, h, body)
			if err != nil || ignored != "" {
				t.Fatalf("ParseWebhook = %v, ignored %q", err, ignored)
			}
			for _, repo := range tc.match {
				if !push.Matches(repo, "main") {
					t.Errorf("the push of %v does not match an application of %s at main", push.Repositories, repo)
				}
			}
			for _, repo := range tc.miss {
				if push.Matches(repo, "main") {
					t.Errorf("the push of %v matches an application of %s, another repository", push.Repositories, repo)
				}
			}
			if push.Matches(tc.match[0], "develop") {
				t.Errorf("a push of main matches an application tracking develop")
			}
		})
	}
}

func TestParseWebhookRefusesAPushNamingNoRepository(t *testing.T) {
	for _, tc := range []struct {
		provider, event, body string
	}{
		{"bitbucket-server", "repo:refs_changed", `{"repository":{"slug":"web","links":{"self":[{"href":"https://bitbucket.example.com/projects/ACME/repos/web/browse"}]}},"changes":[{"ref":{"id":"refs/heads/main","type":"BRANCH"},"type":"UPDATE"}]}`},
		{"gogs", "push", `{"ref":"refs/heads/main","repository":{"name":"web"}}`},
		{"gitlab", "System Hook", `{"event_name":"push","ref":"refs/heads/main"}`},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			sc, _ := api.SchemeOf(tc.provider)
			h := http.Header{}
			h.Set(sc.Event[0], tc.event)
			_, ignored, err := api.ParseWebhook(tc.provider, h, []byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), "names no repository URL") {
				t.Errorf("ParseWebhook = %v (ignored %q), want the missing repository named", err, ignored)
			}
		})
	}
}

func TestOpenAPINamesEveryWebhookProvider(t *testing.T) {
	item := loadOpenAPI(t).Paths.Value("/api/v1/webhooks/{provider}")
	if item == nil {
		t.Fatal("openapi.yaml has no /api/v1/webhooks/{provider}")
	}
	p := item.Parameters.GetByInAndName("path", "provider")
	if p == nil || p.Schema == nil {
		t.Fatal("openapi.yaml's webhook path has no provider parameter")
	}
	var documented []string
	for _, v := range p.Schema.Value.Enum {
		documented = append(documented, fmt.Sprint(v))
	}
	if d := cmp.Diff(api.Providers(), documented); d != "" {
		t.Errorf("providers served (-) and documented in openapi.yaml (+) differ:\n%s", d)
	}
}

// A captured delivery sent again is a duplicate within the window, for
// every forge's delivery id header; a forged delivery cannot claim an id
// before the real one arrives; after the window an id is taken again.
func TestWebhookReplayIsADuplicateWithinTheWindow(t *testing.T) {
	var specs []api.WebhookSpec
	for _, p := range api.Providers() {
		specs = append(specs, api.WebhookSpec{Provider: p, Secret: wire.NewToken("secret-of-" + p)})
	}
	var mu sync.Mutex
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	hooks, err := api.NewWebhooks(specs, api.WebhooksOptions{Window: 10 * time.Minute, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{pushed: make(chan api.Push, 16)}
	s := newTestServer(t, api.Options{Reconciler: f, Webhooks: hooks})
	expect := func(t *testing.T, what string, status int, answer string, want int, result string) {
		t.Helper()
		if status != want || !strings.Contains(answer, result) {
			t.Fatalf("%s = %d %s, want %d %s", what, status, answer, want, result)
		}
		accepted := want == http.StatusAccepted
		wait := 50 * time.Millisecond // long enough for a wrongly queued push to show
		if accepted {
			wait = 5 * time.Second
		}
		select {
		case p := <-f.pushed:
			if !accepted {
				t.Fatalf("%s reached the reconciler: %+v", what, p)
			}
		case <-time.After(wait):
			if accepted {
				t.Fatalf("%s was not processed", what)
			}
		}
	}
	for _, fg := range forges() {
		if fg.name == "" {
			fg.name = fg.provider
		}
		t.Run(fg.name, func(t *testing.T) {
			body := readSample(t, fg.sample)
			path := "/api/v1/webhooks/" + fg.provider
			signed := func(secret, id string) map[string]string {
				h := fg.headers(body, secret)
				h[fg.delivery] = id
				return h
			}
			id := "replay-" + fg.name

			status, answer := post(t, s, path, body, signed("forged", id))
			expect(t, "a forged delivery", status, answer, http.StatusUnauthorized, "does not match")
			status, answer = post(t, s, path, body, signed("secret-of-"+fg.provider, id))
			expect(t, "the real delivery after a forged one of its id", status, answer, http.StatusAccepted, `"accepted"`)
			advance(9 * time.Minute)
			status, answer = post(t, s, path, body, signed("secret-of-"+fg.provider, id))
			expect(t, "a replay within the window", status, answer, http.StatusOK, `"duplicate"`)
			advance(2 * time.Minute)
			status, answer = post(t, s, path, body, signed("secret-of-"+fg.provider, id))
			expect(t, "a redelivery after the window", status, answer, http.StatusAccepted, `"accepted"`)
		})
	}
}

// The provider table of the webhook operation (docs/api.md is generated
// from it) names, for each provider, every header the code reads and the
// signature's form, and no provider the code does not serve.
func TestWebhookReferenceNamesEveryHeaderChecked(t *testing.T) {
	item := loadOpenAPI(t).Paths.Value("/api/v1/webhooks/{provider}")
	if item == nil || item.Post == nil {
		t.Fatal("openapi.yaml has no POST /api/v1/webhooks/{provider}")
	}
	rows := map[string]string{}
	for _, line := range strings.Split(item.Post.Description, "\n") {
		if m := regexp.MustCompile("^\\| `([a-z-]+)`").FindStringSubmatch(line); m != nil {
			rows[m[1]] = line
		}
	}
	for _, p := range api.Providers() {
		row, ok := rows[p]
		if !ok {
			t.Errorf("the webhook table has no row for %s", p)
			continue
		}
		delete(rows, p)
		sc, _ := api.SchemeOf(p)
		var want []string
		for _, list := range [][]string{sc.Event, sc.PushEvents, sc.Signature, sc.Delivery} {
			for _, v := range list {
				want = append(want, "`"+v)
			}
		}
		switch {
		case sc.Token:
			want = append(want, "the secret itself")
		case sc.Prefix != "":
			want = append(want, sc.Prefix+"<hex>`")
		default:
			want = append(want, "<hex>`")
			if strings.Contains(row, "sha256=") {
				t.Errorf("the webhook table's row for %s names a sha256= prefix, which %s does not send", p, p)
			}
		}
		for _, w := range want {
			if !strings.Contains(row, w) {
				t.Errorf("the webhook table's row for %s does not name %s:\n%s", p, w, row)
			}
		}
	}
	for p := range rows {
		t.Errorf("the webhook table has a row for %s, which is not a provider", p)
	}
	// The pull requests' table names every event value each provider reads.
	pulls := map[string]string{}
	for _, line := range strings.Split(item.Post.Description, "\n") {
		if m := regexp.MustCompile("^\\| [A-Za-z ]+: `([a-z-]+)`").FindStringSubmatch(line); m != nil {
			pulls[m[1]] = line
		}
	}
	for _, p := range api.Providers() {
		sc, _ := api.SchemeOf(p)
		row, ok := pulls[p]
		if !ok && p != api.ProviderGeneric {
			t.Errorf("the pull requests' table has no row for %s", p)
		}
		for _, v := range sc.PullEvents {
			if !strings.Contains(row, "`"+v+"`") {
				t.Errorf("the pull requests' row for %s does not name %s:\n%s", p, v, row)
			}
		}
	}
}

// FuzzVerifyWebhook checks the signature check of every provider with an
// arbitrary header value and body. Property: VerifyWebhook accepts exactly
// the value a sender holding the secret would compute (the HMAC of the
// body, or the secret itself for a token scheme), and fails any other with
// ErrMissingSignature or ErrBadSignature.
func FuzzVerifyWebhook(f *testing.F) {
	for _, p := range api.Providers() {
		f.Add(p, "sha256=00", []byte(`{"ref":"refs/heads/main"}`))
		f.Add(p, "", []byte{})
	}
	secret := wire.NewToken("fuzz-secret")
	f.Fuzz(func(t *testing.T, provider, value string, body []byte) {
		sc, ok := api.SchemeOf(provider)
		if !ok {
			if err := api.VerifyWebhook(provider, http.Header{}, body, secret); err == nil {
				t.Fatalf("unknown provider %q verified", provider)
			}
			return
		}
		mac := hmac.New(sha256.New, []byte("fuzz-secret"))
		mac.Write(body)
		good := sc.Prefix + hex.EncodeToString(mac.Sum(nil))
		if sc.Token {
			good = "fuzz-secret"
		}
		h := http.Header{}
		h.Set(sc.Signature[0], value)
		err := api.VerifyWebhook(provider, h, body, secret)
		switch {
		case value == good && err != nil:
			t.Fatalf("%s: the right signature %q was refused: %v", provider, value, err)
		case value != good && err == nil:
			t.Fatalf("%s: %q verified, want only %q", provider, value, good)
		case err != nil && !errors.Is(err, api.ErrMissingSignature) && !errors.Is(err, api.ErrBadSignature):
			t.Fatalf("%s: error %v wraps neither ErrMissingSignature nor ErrBadSignature", provider, err)
		}
		// The sender's own value always passes.
		h.Set(sc.Signature[0], good)
		if err := api.VerifyWebhook(provider, h, body, secret); err != nil {
			t.Fatalf("%s: the right signature was refused: %v", provider, err)
		}
	})
}

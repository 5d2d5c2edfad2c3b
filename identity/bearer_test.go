package identity_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/api/authtest"
	"github.com/skep-cd/skep/identity/identitytest"
)

// githubClaims is a GitHub Actions job's ID token, as the platform shapes
// it, for repository and ref.
func githubClaims(repository, ref string) map[string]any {
	return map[string]any{
		"sub": "repo:" + repository + ":ref:" + ref, "aud": ciAudience,
		"repository": repository, "repository_owner": strings.Split(repository, "/")[0], "ref": ref, "ref_type": "branch",
		"sha": "0123456789abcdef0123456789abcdef01234567", "workflow": "Deploy web", "event_name": "push",
		"run_id": "4242", "run_attempt": "1", "actor": "octocat", "job_workflow_ref": repository + "/.github/workflows/deploy.yml@" + ref,
	}
}

// gitlabClaims is a GitLab CI job's ID token for project and branch.
func gitlabClaims(project, branch string, protected bool) map[string]any {
	return map[string]any{
		"sub": "project_path:" + project + ":ref_type:branch:ref:" + branch, "aud": ciAudience,
		"project_path": project, "namespace_path": strings.Split(project, "/")[0], "ref": branch, "ref_type": "branch",
		"ref_protected": map[bool]string{true: "true", false: "false"}[protected], "pipeline_id": "777", "pipeline_source": "push",
		"job_id": "9001", "user_login": "alice", "user_email": "alice@example.test", "environment": "production",
	}
}

func with(claims map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range claims {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1] // nil: Mint leaves the claim out
	}
	return out
}

func TestCIJobsOfTheRightRepositoryAndBranchSyncTheirApplicationAndNoOther(t *testing.T) {
	w := newWorld(t, worldOptions{})
	githubActor := "oidc:" + w.provider.URL + "#repo:acme/web:ref:refs/heads/main (ref=refs/heads/main repository=acme/web workflow=\"Deploy web\" run_id=4242 actor=octocat sha=0123456789abcdef0123456789abcdef01234567)"
	gitlabActor := "oidc:" + w.gitlab.URL + "#project_path:acme/web:ref_type:branch:ref:main (project_path=acme/web ref=main ref_protected=true environment=production pipeline_id=777 job_id=9001 user_login=alice)"
	github := func(kv ...any) string {
		return w.mint(t, w.provider, with(githubClaims("acme/web", "refs/heads/main"), kv...))
	}
	gitlab := func(kv ...any) string {
		return w.mint(t, w.gitlab, with(gitlabClaims("acme/web", "main", true), kv...))
	}
	for _, tc := range []struct {
		name, method, path, body string
		token                    string
		want                     int
		call                     string // what the controller was asked, and by whom; "" = nothing
	}{
		{name: "a GitHub job of acme/web on main syncs web", method: "POST", path: "/api/v1/applications/web/sync",
			token: github(), want: 202, call: "sync web " + githubActor},
		{name: "it plans web (a dry run)", method: "POST", path: "/api/v1/applications/web/sync", body: `{"dryRun":true}`,
			token: github(), want: 200, call: "plan web " + githubActor},
		{name: "it reads web's diff", method: "GET", path: "/api/v1/applications/web/diff", token: github(), want: 200, call: "diff web"}, // a read records no actor
		{name: "it rolls web back", method: "POST", path: "/api/v1/applications/web/rollback", body: `{"revision":1}`,
			token: github(), want: 202, call: "rollback web " + githubActor},
		{name: "it announces a push of web", method: "POST", path: "/api/v1/webhooks/generic",
			body: `{"repository":"https://git.example.test/acme/web.git","ref":"refs/heads/main"}`, token: github(), want: 202},
		{name: "it may not sync db", method: "POST", path: "/api/v1/applications/db/sync", token: github(), want: 403},
		{name: "it may not announce a push of db", method: "POST", path: "/api/v1/webhooks/generic",
			body: `{"repository":"https://git.example.test/acme/db.git"}`, token: github(), want: 403},
		{name: "a job of another branch has no rule", method: "POST", path: "/api/v1/applications/web/sync",
			token: github("ref", "refs/heads/feature", "sub", "repo:acme/web:ref:refs/heads/feature"), want: 403},
		{name: "a job of another repository has no rule", method: "POST", path: "/api/v1/applications/web/sync",
			token: github("repository", "evil/web"), want: 403},
		{name: "a tag's job reads as the second rule says but may not sync", method: "POST", path: "/api/v1/applications/web/sync",
			token: github("ref", "refs/tags/v1.2.0"), want: 403},
		{name: "a GitLab job of acme/web on protected main syncs web", method: "POST", path: "/api/v1/applications/web/sync",
			token: gitlab(), want: 202, call: "sync web " + gitlabActor},
		{name: "a GitLab job on an unprotected branch of the same name has no rule", method: "POST", path: "/api/v1/applications/web/sync",
			token: gitlab("ref_protected", "false"), want: 403},
		{name: "an expired token is refused", method: "POST", path: "/api/v1/applications/web/sync",
			token: github("exp", time.Now().Add(-time.Minute).Unix(), "iat", time.Now().Add(-10*time.Minute).Unix()), want: 401},
		{name: "a token for another audience is refused", method: "POST", path: "/api/v1/applications/web/sync",
			token: github("aud", "https://another-service.example.test"), want: 401},
		{name: "a token of an issuer nobody trusts is refused", method: "POST", path: "/api/v1/applications/web/sync",
			token: w.mint(t, w.stranger, githubClaims("acme/web", "refs/heads/main")), want: 401},
		{name: "a token claiming a trusted issuer but signed by another key is refused", method: "POST", path: "/api/v1/applications/web/sync",
			token: w.mint(t, w.stranger, with(githubClaims("acme/web", "refs/heads/main"), "iss", w.provider.URL)), want: 401},
		{name: "a token without a jti is refused", method: "POST", path: "/api/v1/applications/web/sync", token: github("jti", nil), want: 401},
		{name: "a token whose claims were changed is refused", method: "POST", path: "/api/v1/applications/web/sync",
			token: tamper(t, github("repository", "acme/other"), "acme/other", "acme/web"), want: 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(w.rec.Calls())
			status, body := w.callBody(t, tc.method, tc.path, tc.token, tc.body)
			if status != tc.want {
				t.Fatalf("answered %d, want %d: %s", status, tc.want, body)
			}
			calls := w.rec.Calls()[before:]
			switch {
			case tc.call != "" && !slices.Contains(calls, tc.call):
				t.Errorf("the controller was asked %q, want %q", calls, tc.call)
			case tc.want >= 400 && len(calls) > 0:
				t.Errorf("a refused request reached the controller: %q", calls)
			}
		})
	}
	for _, reason := range []string{"expired", "wrong audience", "issuer not trusted", "invalid", "no jti"} {
		if !w.logged("oidc token refused", map[string]string{"reason": reason}) {
			t.Errorf("no refusal logged for %q:\n%s", reason, w.log)
		}
	}
}

// tamper replaces old with new in the token's payload, keeping its
// signature.
func tamper(t *testing.T, token, old, new string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	payload, err := base64URL.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	parts[1] = base64URL.EncodeToString([]byte(strings.ReplaceAll(string(payload), old, new)))
	return strings.Join(parts, ".")
}

func TestACITokenSpentOnAChangeIsRefusedTheSecondTime(t *testing.T) {
	w := newWorld(t, worldOptions{})
	token := w.mint(t, w.provider, githubClaims("acme/web", "refs/heads/main"))
	for i, tc := range []struct {
		method, path string
		want         int
	}{
		// Reads may repeat: `skep app sync --wait` follows its sync.
		{"GET", "/api/v1/applications/web", 200},
		{"GET", "/api/v1/applications/web", 200},
		{"POST", "/api/v1/applications/web/sync", 202},
		{"POST", "/api/v1/applications/web/sync", 401},
		{"POST", "/api/v1/applications/web/rollback", 401},
		{"GET", "/api/v1/applications/web", 200},
	} {
		if status, body := w.callBody(t, tc.method, tc.path, token, ""); status != tc.want {
			t.Errorf("request %d, %s %s, answered %d, want %d: %s", i+1, tc.method, tc.path, status, tc.want, body)
		}
	}
	if !w.logged("oidc token refused", map[string]string{"reason": "replayed", "subject": "repo:acme/web:ref:refs/heads/main"}) {
		t.Errorf("the replay was not logged with the token's subject:\n%s", w.log)
	}
	// Another token of the same job is a new one.
	if status, _ := w.callBody(t, "POST", "/api/v1/applications/web/sync", w.mint(t, w.provider, githubClaims("acme/web", "refs/heads/main")), ""); status != 202 {
		t.Errorf("a second token of the same job answered %d, want 202", status)
	}
}

func TestCLIIDTokensAreCheckedForIssuerAudienceExpiryAndKey(t *testing.T) {
	w := newWorld(t, worldOptions{})
	alice := "oidc:" + w.provider.URL + "#u-alice (alice@example.test)"
	for _, tc := range []struct {
		name   string
		token  func(t *testing.T) string
		before func()
		want   int
		reason string
	}{
		{name: "the CLI client's token of a mapped person", token: func(t *testing.T) string { return w.cliToken(t, w.provider, "skep-cli", "alice") }, want: 200},
		{name: "a token of the provider for another application", token: func(t *testing.T) string { return w.cliToken(t, w.provider, "other-app", "alice") },
			want: 401, reason: "wrong audience"},
		{name: "a token of another provider for a client of the same name", token: func(t *testing.T) string { return w.cliToken(t, w.stranger, "skep-cli", "alice") },
			want: 401, reason: "issuer not trusted"},
		{name: "a token past its expiry", token: func(t *testing.T) string {
			tok := w.cliToken(t, w.provider, "skep-cli", "alice")
			w.clock.Advance(61 * time.Minute) // the controller's clock only: the token ages
			return tok
		}, before: func() { w.clock.Advance(-61 * time.Minute) }, want: 401, reason: "expired"},
		{name: "a token signed by a key the provider rotated to", token: func(t *testing.T) string {
			w.provider.RotateKey(t)
			return w.cliToken(t, w.provider, "skep-cli", "alice")
		}, want: 200},
		{name: "a token signed by a key the provider retired", token: func(t *testing.T) string {
			old := w.cliToken(t, w.provider, "skep-cli", "alice")
			w.provider.RotateKey(t)
			w.provider.RetireKeys()
			// The verifier fetches the keys again when it meets an unknown
			// key id: a fresh token's does that, and the old key is gone.
			if status, _ := w.whoami(t, nil, w.cliToken(t, w.provider, "skep-cli", "alice")); status != 200 {
				t.Fatalf("the token of the new key answered %d", status)
			}
			// The verifier answers the request that fetched the keys a
			// moment before it keeps them: until then its cache holds the
			// old ones.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if status, _ := w.whoami(t, nil, old); status == 401 {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("the retired key's token still answers %d", status)
				}
			}
			return old
		}, want: 401, reason: "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			token := tc.token(t)
			if tc.before != nil {
				defer tc.before()
			}
			status, me := w.whoami(t, nil, token)
			if status != tc.want {
				t.Fatalf("whoami answered %d, want %d", status, tc.want)
			}
			if status == 200 && (me.Name != alice || me.Role != "admin" || me.Session != nil) {
				t.Errorf("whoami = %+v, want %s as admin without a session", me, alice)
			}
			if tc.reason != "" && !w.logged("oidc token refused", map[string]string{"reason": tc.reason}) {
				t.Errorf("no refusal logged for %q:\n%s", tc.reason, w.log)
			}
		})
	}
}

func TestIDTokensKeepTheAuthorizerContract(t *testing.T) {
	w := newWorld(t, worldOptions{})
	aliceCLI := w.cliToken(t, w.provider, "skep-cli", "alice")
	bearer := func(token func() string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token()) }
	}
	authtest.Run(t, authtest.Harness{
		Authorizer: w.id.Bearer,
		Known: []authtest.Known{
			{Subject: api.Subject{Name: "oidc:" + w.provider.URL + "#u-alice (alice@example.test)", Role: api.RoleAdmin},
				Present: bearer(func() string { return aliceCLI })},
			// A fresh token per request: a CI token is spent by a change.
			{Subject: api.Subject{Name: "oidc:" + w.gitlab.URL + "#project_path:acme/web:ref_type:branch:ref:main (project_path=acme/web ref=main ref_protected=true environment=production pipeline_id=777 job_id=9001 user_login=alice)",
				Role: api.RoleDeployer, Apps: []string{"web"}},
				Present: bearer(func() string {
					tok, err := w.gitlab.Mint(gitlabClaims("acme/web", "main", true))
					if err != nil {
						t.Error(err)
					}
					w.keep(tok)
					return tok
				})},
		},
		Unknown: bearer(func() string { return w.mint(t, w.stranger, githubClaims("acme/web", "refs/heads/main")) }),
	})
}

// callBody sends a request with a bearer token and a JSON body.
func (w *world) callBody(t *testing.T, method, path, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, w.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := identitytest.NoRedirects().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&raw)
	return resp.StatusCode, raw
}

var base64URL = base64.RawURLEncoding

package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/wire"
)

// authFunc is an Authorizer made of a function.
type authFunc func(ctx context.Context, r *http.Request) (api.Subject, error)

func (f authFunc) Authenticate(ctx context.Context, r *http.Request) (api.Subject, error) {
	return f(ctx, r)
}

// answering is an Authorizer that answers every request with subj, err.
func answering(subj api.Subject, err error) api.Authorizer {
	return authFunc(func(context.Context, *http.Request) (api.Subject, error) { return subj, err })
}

func TestChainLetsTheFirstAuthorizerThatKnowsTheCredentialDecide(t *testing.T) {
	alice := api.Subject{Name: "alice", Role: api.RoleViewer}
	bob := api.Subject{Name: "bob", Role: api.RoleAdmin}
	unknown := fmt.Errorf("%w: not mine", api.ErrUnauthenticated)
	for _, tc := range []struct {
		name    string
		chain   api.Chain
		want    string
		wantErr error
	}{
		{"the first that authenticates decides", api.Chain{answering(alice, nil), answering(bob, nil)}, "alice", nil},
		{"an authorizer that does not know the credential passes it on", api.Chain{answering(api.Subject{}, unknown), answering(bob, nil)}, "bob", nil},
		{"a forbidden use ends the chain", api.Chain{answering(api.Subject{}, fmt.Errorf("%w: no CSRF token", api.ErrForbidden)), answering(bob, nil)}, "", api.ErrForbidden},
		{"a credential that cannot be checked now ends the chain", api.Chain{answering(api.Subject{}, fmt.Errorf("%w: provider down", api.ErrUnavailable)), answering(bob, nil)}, "", api.ErrUnavailable},
		{"nobody knowing the credential is unauthenticated", api.Chain{answering(api.Subject{}, unknown), answering(api.Subject{}, unknown)}, "", api.ErrUnauthenticated},
		{"an empty chain knows nobody", api.Chain{}, "", api.ErrUnauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.chain.Authenticate(t.Context(), httptestRequest())
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("Authenticate error = %v, want %v", err, tc.wantErr)
			}
			if got.Name != tc.want {
				t.Errorf("Authenticate = %q, want %q", got.Name, tc.want)
			}
		})
	}
}

func httptestRequest() *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "/api/v1/status", nil)
	return r
}

func TestTheGuardAnswersEachAuthenticationRefusalWithItsStatus(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		want  int
		code  wire.ErrorCode
		shown string
	}{
		{"no credential is 401", fmt.Errorf("%w: no cookie", api.ErrUnauthenticated), 401, wire.CodeUnauthorized, "a valid bearer token or sign-in session is required"},
		{"a cookie without its CSRF token is 403 saying so", fmt.Errorf("%w: the session cookie came without its X-Skep-CSRF token", api.ErrForbidden), 403, wire.CodeForbidden, "X-Skep-CSRF"},
		{"a provider that does not answer is 503", fmt.Errorf("%w: the OpenID provider does not answer", api.ErrUnavailable), 503, wire.CodeUnavailable, "does not answer"},
		{"any other failure is 500 without its detail", errors.New("secret detail"), 500, wire.CodeInternal, "see the controller log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, api.Options{Authorizer: answering(api.Subject{}, tc.err)})
			status, _, body := s.call(t, "POST", "/api/v1/applications/web/sync", "", nil)
			e := decodeError(t, body)
			if status != tc.want || e.Code != tc.code || !strings.Contains(e.Message, tc.shown) {
				t.Errorf("answer %d %+v, want %d %s containing %q", status, e, tc.want, tc.code, tc.shown)
			}
			if strings.Contains(e.Message, "secret detail") {
				t.Error("an internal error's detail reached the client")
			}
			if calls := s.fake.called(); len(calls) > 0 {
				t.Errorf("the handler ran after a refusal: %q", calls)
			}
		})
	}
}

func TestAGenericPushWithABearerCredentialRefreshesOnlyWhatItsScopeAllows(t *testing.T) {
	// No webhooks file: the bearer credential needs no secret.
	s := newTestServer(t, api.Options{})
	push := func(repo string) []byte {
		return []byte(fmt.Sprintf(`{"repository":"https://git.example.org/acme/%s.git","ref":"refs/heads/main"}`, repo))
	}
	for _, tc := range []struct {
		name, token string
		body        []byte
		want        int
		apps        []string
	}{
		{"a deployer's push refreshes what it names", deployerToken, push("web"), 202, []string{"web"}},
		{"a scoped deployer's push of its application", scopedToken, push("web"), 202, []string{"web"}},
		{"a scoped deployer's push of another application is refused", scopedToken, push("db"), 403, nil},
		{"a scoped deployer may not move the app set", scopedToken, push("apps"), 403, nil},
		{"a viewer may not push", viewerToken, push("web"), 403, nil},
		{"an unknown credential is refused", "nobody-knows-this", push("web"), 401, nil},
		{"a bad body is refused after the credential", deployerToken, []byte(`{"repo":"x"}`), 400, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := s.call(t, "POST", "/api/v1/webhooks/generic", tc.token, tc.body)
			if status != tc.want {
				t.Fatalf("status %d, want %d: %s", status, tc.want, body)
			}
			if status == 403 && strings.Contains(string(body), `"db"`) {
				t.Errorf("the refusal names an application outside the scope: %s", body)
			}
			if status != 202 {
				return
			}
			var got api.WebhookResponse
			if err := json.Unmarshal(body, &got); err != nil || strings.Join(got.Applications, ",") != strings.Join(tc.apps, ",") {
				t.Errorf("answer %s, want applications %q", body, tc.apps)
			}
		})
	}
	// The other providers still need their signature.
	if status, _, _ := s.call(t, "POST", "/api/v1/webhooks/github", deployerToken, push("web")); status != 404 {
		t.Errorf("a bearer credential on an unconfigured github webhook answered %d, want 404", status)
	}
}

// fakeSignIn records what the server hands it.
type fakeSignIn struct{ calls []string }

func (f *fakeSignIn) Method() wire.OIDCSignIn {
	return wire.OIDCSignIn{Label: "Example SSO", Issuer: "https://idp.example.test", CLIClientID: "skep-cli", Scopes: []string{"openid"}}
}
func (f *fakeSignIn) Start(w http.ResponseWriter, r *http.Request) {
	f.calls = append(f.calls, "start")
	http.Redirect(w, r, "https://idp.example.test/authorize", http.StatusFound)
}
func (f *fakeSignIn) Finish(w http.ResponseWriter, r *http.Request) {
	f.calls = append(f.calls, "finish")
	http.Redirect(w, r, "/", http.StatusFound)
}
func (f *fakeSignIn) SignOut(_ http.ResponseWriter, r *http.Request) (string, error) {
	f.calls = append(f.calls, "signout")
	if r.Header.Get(api.CSRFHeader) == "" {
		return "", fmt.Errorf("%w: no CSRF token", api.ErrForbidden)
	}
	return "https://idp.example.test/end_session", nil
}

func TestTheSignInRoutesGoToTheSignInAndWhoamiGivesTheSessionsCSRFToken(t *testing.T) {
	expires := time.Date(2026, 1, 15, 22, 0, 0, 0, time.UTC)
	session := api.Subject{Name: "oidc:https://idp.example.test#u1 (alice@example.test)", Role: api.RoleDeployer,
		Session: api.Session{CSRFToken: "csrf-1", Expires: expires}}
	signIn := &fakeSignIn{}
	s := newTestServer(t, api.Options{SignIn: signIn, Authorizer: api.Chain{testTokens(t), authFunc(func(_ context.Context, r *http.Request) (api.Subject, error) {
		if c, err := r.Cookie("skep_session"); err == nil && c.Value == "c" {
			return session, nil
		}
		return api.Subject{}, api.ErrUnauthenticated
	})}})
	client := s.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	get := func(path string, cookie bool) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", s.URL+path, nil)
		if cookie {
			req.AddCookie(&http.Cookie{Name: "skep_session", Value: "c"})
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, data
	}

	_, body := get("/api/v1/auth", false)
	var methods wire.AuthMethods
	if err := json.Unmarshal(body, &methods); err != nil || methods.OIDC == nil || methods.OIDC.LoginPath != api.LoginPath || methods.OIDC.CLIClientID != "skep-cli" || !methods.Token {
		t.Errorf("GET /api/v1/auth = %s", body)
	}
	if resp, _ := get(api.LoginPath, false); resp.StatusCode != 302 || resp.Header.Get("Location") != "https://idp.example.test/authorize" {
		t.Errorf("login answered %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := get("/api/v1/auth/oidc/callback?code=x&state=y", false); resp.StatusCode != 302 {
		t.Errorf("callback answered %d", resp.StatusCode)
	}
	_, body = get("/api/v1/whoami", true)
	var me wire.Whoami
	if err := json.Unmarshal(body, &me); err != nil || me.Session == nil || me.Session.CSRFToken != "csrf-1" || !me.Session.ExpiresAt.Equal(expires) {
		t.Errorf("whoami with the cookie = %s", body)
	}
	status, _, body := s.call(t, "GET", "/api/v1/whoami", deployerToken, nil)
	if status != 200 || strings.Contains(string(body), "session") {
		t.Errorf("whoami with a token = %d %s; a token has no session", status, body)
	}
	if status, _, _ := s.call(t, "POST", "/api/v1/auth/signout", "", nil); status != 403 {
		t.Errorf("sign-out without the CSRF token answered %d, want 403", status)
	}
	if got := strings.Join(signIn.calls, " "); got != "start finish signout" {
		t.Errorf("the sign-in was called for %q", got)
	}

	bare := newTestServer(t, api.Options{})
	for _, path := range []string{api.LoginPath, "/api/v1/auth/oidc/callback"} {
		if status, _, _ := bare.call(t, "GET", path, "", nil); status != 404 {
			t.Errorf("GET %s without a sign-in answered %d, want 404", path, status)
		}
	}
	if _, _, body := bare.call(t, "GET", "/api/v1/auth", "", nil); strings.Contains(string(body), "oidc") {
		t.Errorf("GET /api/v1/auth without a sign-in offers one: %s", body)
	}
}

package identity_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/api/apitest"
	"github.com/skep-cd/skep/identity"
	"github.com/skep-cd/skep/identity/identitytest"
	"github.com/skep-cd/skep/store"
	"github.com/skep-cd/skep/wire"
)

// The people at the test provider, each with the password "pw".
var people = []identitytest.User{
	{Subject: "u-alice", Username: "alice", Password: "pw", Email: "alice@example.test", Groups: []string{"ops"}},
	{Subject: "u-bob", Username: "bob", Password: "pw", Email: "bob@example.test", Groups: []string{"staff", "web-team"}},
	{Subject: "u-carol", Username: "carol", Password: "pw", Email: "carol@example.test", Groups: []string{"viewers"}},
	{Subject: "u-dave", Username: "dave", Password: "pw", Email: "dave@example.test", Groups: []string{"contractors"}},
	// erin's provider says roles, not groups.
	{Subject: "u-erin", Username: "erin", Password: "pw", Email: "erin@example.test", Claims: map[string]any{"roles": []any{"ops"}}},
}

// The rules that map their groups: ops admins everything, web-team
// deploys web*, viewers read; contractors get nothing.
var roles = []identity.GroupRule{
	{Group: "ops", Role: api.RoleAdmin},
	{Group: "web-team", Role: api.RoleDeployer, Apps: []string{"web*"}},
	{Group: "viewers", Role: api.RoleViewer},
}

// ciAudience is the audience this controller owns for CI tokens.
const ciAudience = "https://skep.example.test"

// clock is a clock a test moves forward; it starts at the real time, so
// the tokens the provider issues are valid at first.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *clock) Advance(d time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
	return c.off
}

// logBuffer is a log a test reads while the server writes it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// world is a controller's API with the identity of an OIDC file, the
// test provider (people and the GitHub-shaped CI issuer), a second
// provider (the GitLab-shaped CI issuer) and a third nobody trusts.
type world struct {
	url      string
	provider *identitytest.Provider
	gitlab   *identitytest.Provider
	stranger *identitytest.Provider
	store    *store.Store
	id       *identity.Identity
	rec      *apitest.Reconciler
	clock    *clock
	log      *logBuffer
	// secrets are the tokens and cookies a test saw; none may reach the log.
	mu      sync.Mutex
	secrets []string
}

// worldOptions vary newWorld.
type worldOptions struct {
	// SessionKey seals the sessions; "" is a random key per identity.
	SessionKey string
	// Store reuses a store (a restarted controller); nil opens a new one.
	Store *store.Store
	// Provider reuses a provider; nil starts one.
	Provider *identitytest.Provider
	// Claim is the claim of the groups; "" is groups.
	Claim string
}

func newWorld(t testing.TB, opts worldOptions) *world {
	t.Helper()
	w := &world{rec: &apitest.Reconciler{}, clock: &clock{}, log: &logBuffer{}, provider: opts.Provider, store: opts.Store}
	srv := httptest.NewUnstartedServer(nil)
	w.url = "http://" + srv.Listener.Addr().String()
	if w.provider == nil {
		w.provider = identitytest.Start(t, identitytest.Options{Users: people})
	}
	w.gitlab = identitytest.Start(t, identitytest.Options{})
	w.stranger = identitytest.Start(t, identitytest.Options{})
	w.provider.AddClient(identitytest.Client{ID: "skep", Secret: "web-secret", RedirectURIs: []string{w.url + "/api/v1/auth/oidc/callback"},
		PostLogoutRedirectURIs: []string{w.url + "/"}, IDTokenLifetime: time.Hour})
	w.provider.AddClient(identitytest.Client{ID: "skep-cli", Native: true, Device: true, RedirectURIs: []string{"http://127.0.0.1/callback"}, IDTokenLifetime: time.Hour})
	w.provider.AddClient(identitytest.Client{ID: "other-app", Native: true, RedirectURIs: []string{"http://127.0.0.1/callback"}})
	w.stranger.AddUser(people[0])
	w.stranger.AddClient(identitytest.Client{ID: "skep-cli", Native: true, RedirectURIs: []string{"http://127.0.0.1/callback"}})
	if w.store == nil {
		var err error
		w.store, err = store.Open(t.Context(), filepath.Join(t.TempDir(), store.FileName), store.Options{Now: w.clock.Now, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.store.Close() })
	}
	cfg := identity.Config{
		SignIn: &identity.SignInConfig{Issuer: w.provider.URL, ClientID: "skep", ClientSecret: wire.NewToken("web-secret"), CLIClientID: "skep-cli",
			RedirectURL: w.url + "/api/v1/auth/oidc/callback", PostLogoutRedirectURL: w.url + "/", Label: "Test SSO",
			Scopes: identity.DefaultScopes(), Claim: cmp.Or(opts.Claim, "groups"), SessionLifetime: 12 * time.Hour, RefreshBefore: time.Minute,
			SessionKey: wire.NewToken(opts.SessionKey), Roles: roles},
		CI: []identity.CIIssuer{
			{Issuer: w.provider.URL, Audience: ciAudience, Audit: identity.DefaultAudit(), Rules: []identity.ClaimRule{
				{Name: "web from main", Claims: map[string]string{"repository": "acme/web", "ref": "refs/heads/main"}, Role: api.RoleDeployer, Apps: []string{"web"}},
				{Name: "releases read", Claims: map[string]string{"repository": "acme/*", "ref": "refs/tags/v*"}, Role: api.RoleViewer},
			}},
			{Issuer: w.gitlab.URL, Audience: ciAudience, Audit: identity.DefaultAudit(), Rules: []identity.ClaimRule{
				{Name: "web from protected main", Claims: map[string]string{"project_path": "acme/web", "ref": "main", "ref_protected": "true"}, Role: api.RoleDeployer, Apps: []string{"web"}},
			}},
		},
	}
	logger := slog.New(slog.NewJSONHandler(io.MultiWriter(w.log, t.Output()), &slog.HandlerOptions{Level: slog.LevelDebug}))
	var err error
	w.id, err = identity.New(identity.Options{Config: cfg, Sessions: w.store, Logger: logger, Now: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := api.NewTokens(api.TokenSpec{Name: "root", Role: api.RoleAdmin, Digest: wire.NewToken("root-token").Digest()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Options{Reconciler: w.rec, Authorizer: append(api.Chain{tokens}, w.id.Authorizers()...), SignIn: w.id.SignIn, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = s
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		logged := w.log.String()
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, secret := range w.secrets {
			if secret != "" && strings.Contains(logged, secret) {
				t.Errorf("a token or cookie reached the log: %.24s…", secret)
			}
		}
	})
	return w
}

// advance moves the controller's clock, and the provider's with it.
func (w *world) advance(d time.Duration) {
	w.provider.SetAhead(w.clock.Advance(d))
}

// keep remembers a secret the log must not hold.
func (w *world) keep(secrets ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.secrets = append(w.secrets, secrets...)
}

// session is a browser's session: its cookie and CSRF token.
type session struct{ cookie, csrf string }

// signIn walks a browser's sign-in as username and returns where the
// controller sent the browser at the end and the session cookie it set
// ("" when it set none).
func (w *world) signIn(t testing.TB, username string) (landing string, cookie string) {
	t.Helper()
	authURL, flow := w.startSignIn(t, "")
	callback, err := w.provider.LogIn(t.Context(), identitytest.NoRedirects(), authURL, username, "pw")
	if err != nil {
		t.Fatal(err)
	}
	return w.finishSignIn(t, callback.String(), flow)
}

// startSignIn asks the controller to start a sign-in and returns the
// provider's URL it redirects to and the flow cookie it set.
func (w *world) startSignIn(t testing.TB, next string) (authURL string, flow *http.Cookie) {
	t.Helper()
	resp := w.do(t, "GET", "/api/v1/auth/oidc/login?next="+url.QueryEscape(next), nil, nil)
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("login answered %d", resp.StatusCode)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "skep_signin" {
			flow = c
		}
	}
	if flow == nil || !flow.HttpOnly || !flow.Secure || flow.SameSite != http.SameSiteLaxMode {
		t.Fatalf("the flow cookie is missing or not HttpOnly, Secure and SameSite=Lax: %+v", flow)
	}
	return resp.Header.Get("Location"), flow
}

// finishSignIn brings the browser back to the controller's callback.
func (w *world) finishSignIn(t testing.TB, callback string, flow *http.Cookie) (landing, cookie string) {
	t.Helper()
	u, err := url.Parse(callback)
	if err != nil {
		t.Fatal(err)
	}
	var cookies []*http.Cookie
	if flow != nil {
		cookies = append(cookies, flow)
	}
	resp := w.do(t, "GET", u.RequestURI(), cookies, nil)
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("callback answered %d", resp.StatusCode)
	}
	for _, c := range resp.Cookies() {
		if c.Name == identity.SessionCookie && c.MaxAge > 0 {
			if !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode {
				t.Errorf("the session cookie is not HttpOnly, Secure and SameSite=Strict: %+v", c)
			}
			cookie = c.Value
		}
	}
	w.keep(cookie)
	return resp.Header.Get("Location"), cookie
}

// do sends a request to the controller, following no redirect.
func (w *world) do(t testing.TB, method, path string, cookies []*http.Cookie, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, w.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if method == "POST" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := identitytest.NoRedirects().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// call sends a request with a session (cookie, and the CSRF token unless
// csrf is false) or a bearer token, and returns the status and body.
func (w *world) call(t testing.TB, method, path string, sess *session, bearer string, csrf bool) (int, []byte) {
	t.Helper()
	header := http.Header{}
	var cookies []*http.Cookie
	if sess != nil {
		cookies = append(cookies, &http.Cookie{Name: identity.SessionCookie, Value: sess.cookie})
		if csrf {
			header.Set(api.CSRFHeader, sess.csrf)
		}
	}
	if bearer != "" {
		header.Set("Authorization", "Bearer "+bearer)
	}
	resp := w.do(t, method, path, cookies, header)
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// whoami returns who the controller takes the session or token for.
func (w *world) whoami(t testing.TB, sess *session, bearer string) (int, wire.Whoami) {
	t.Helper()
	status, body := w.call(t, "GET", "/api/v1/whoami", sess, bearer, false)
	var me wire.Whoami
	if status == http.StatusOK {
		if err := json.Unmarshal(body, &me); err != nil {
			t.Fatalf("whoami: %v: %s", err, body)
		}
	}
	return status, me
}

// session signs username in and reads the session's CSRF token.
func (w *world) session(t testing.TB, username string) *session {
	t.Helper()
	landing, cookie := w.signIn(t, username)
	if cookie == "" {
		t.Fatalf("%s got no session (landed on %s)", username, landing)
	}
	sess := &session{cookie: cookie}
	status, me := w.whoami(t, sess, "")
	if status != http.StatusOK || me.Session == nil || me.Session.CSRFToken == "" {
		t.Fatalf("whoami of %s's session = %d %+v", username, status, me)
	}
	sess.csrf = me.Session.CSRFToken
	w.keep(sess.csrf)
	return sess
}

// cliToken signs username in as the CLI (client skep-cli, or another) at
// p and returns the ID token, as `skep login` keeps it.
func (w *world) cliToken(t testing.TB, p *identitytest.Provider, clientID, username string) string {
	t.Helper()
	provider, err := oidc.NewProvider(t.Context(), p.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &oauth2.Config{ClientID: clientID, Endpoint: provider.Endpoint(), RedirectURL: "http://127.0.0.1:1/callback",
		Scopes: []string{"openid", "email", "groups", "offline_access"}}
	cfg.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	verifier := oauth2.GenerateVerifier()
	at, err := p.LogIn(t.Context(), identitytest.NoRedirects(), cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier)), username, "pw")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cfg.Exchange(t.Context(), at.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	w.keep(raw, tok.RefreshToken, tok.AccessToken)
	return raw
}

// mint mints a CI token at p and remembers it as a secret.
func (w *world) mint(t testing.TB, p *identitytest.Provider, claims map[string]any) string {
	t.Helper()
	tok, err := p.Mint(claims)
	if err != nil {
		t.Fatal(err)
	}
	w.keep(tok)
	return tok
}

// logged reports whether a log line has msg and every attribute of attrs.
func (w *world) logged(msg string, attrs map[string]string) bool {
	for _, line := range strings.Split(w.log.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != msg {
			continue
		}
		all := true
		for k, v := range attrs {
			got, _ := rec[k].(string)
			all = all && strings.Contains(got, v)
		}
		if all {
			return true
		}
	}
	return false
}

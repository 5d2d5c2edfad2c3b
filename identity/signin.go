package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/store"
	"github.com/skep-cd/skep/wire"
)

// Cookie names. SessionCookie is opaque: a random value whose SHA-256
// names the session in the store.
const (
	SessionCookie = "skep_session"
	flowCookie    = "skep_signin"
)

// flowLifetime bounds a sign-in from leaving for the provider to coming
// back: a person typing a password and a second factor needs minutes.
const flowLifetime = 10 * time.Minute

// SignIn signs people in at the OpenID provider and keeps their sessions:
// it is the server's api.SignIn, and the api.Authorizer of the session
// cookie. It is safe for concurrent use.
type SignIn struct {
	cfg      SignInConfig
	issuer   *issuer
	sessions SessionStore
	seal     *sealer
	client   *http.Client
	log      *slog.Logger
	now      func() time.Time
	// refreshing holds one lock per stripe of session ids, so a session
	// refreshes once however many of its requests find it due: a
	// provider that rotates refresh tokens would refuse the second.
	refreshing [64]sync.Mutex
}

// The compiler keeps SignIn in step with the seams it fills.
var (
	_ api.SignIn     = (*SignIn)(nil)
	_ api.Authorizer = (*SignIn)(nil)
)

// Method implements api.SignIn.
func (s *SignIn) Method() wire.OIDCSignIn {
	return wire.OIDCSignIn{Label: s.cfg.Label, Issuer: s.cfg.Issuer, CLIClientID: s.cfg.CLIClientID, Scopes: slices.Clone(s.cfg.Scopes)}
}

// flow is what the flow cookie holds between Start and Finish, sealed.
type flow struct {
	State    string    `json:"state"`
	Nonce    string    `json:"nonce"`
	Verifier string    `json:"verifier"`
	Next     string    `json:"next"`
	Expires  time.Time `json:"expires"`
}

// uiRoute is a route of the UI that ?next= may name: a fragment of
// letters, digits and the characters of application names and paths.
var uiRoute = regexp.MustCompile(`^#/[A-Za-z0-9._~/%:-]{0,200}$`)

// oauth returns the OAuth 2 client of the web UI at p.
func (s *SignIn) oauth(p *oidc.Provider) *oauth2.Config {
	ep := p.Endpoint()
	if s.cfg.ClientSecret.Empty() {
		// A public client authenticates with PKCE alone; a Basic header
		// with an empty password is refused by some providers.
		ep.AuthStyle = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret.Reveal(), Endpoint: ep,
		RedirectURL: s.cfg.RedirectURL, Scopes: s.cfg.Scopes}
}

// clientContext makes oauth2 and go-oidc use s.client.
func (s *SignIn) clientContext(ctx context.Context) context.Context {
	return oidc.ClientContext(context.WithValue(ctx, oauth2.HTTPClient, s.client), s.client)
}

// Start implements api.SignIn: an authorization code request with PKCE
// (S256), a state and a nonce, all three kept for Finish in a sealed
// cookie that only the callback's path receives.
func (s *SignIn) Start(w http.ResponseWriter, r *http.Request) {
	if s.sessions == nil {
		writeError(w, http.StatusServiceUnavailable, wire.CodeUnavailable, "sign-in needs the history store, which is not open; see the controller log")
		return
	}
	p, err := s.issuer.discover(r.Context())
	if err != nil {
		s.log.Warn("sign-in not started", "err", err)
		writeError(w, http.StatusServiceUnavailable, wire.CodeUnavailable, "the OpenID provider does not answer; try again later")
		return
	}
	f := flow{State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier(), Expires: s.now().Add(flowLifetime)}
	if next := r.URL.Query().Get("next"); uiRoute.MatchString(next) {
		f.Next = next
	}
	plain, err := json.Marshal(f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, wire.CodeInternal, "internal error; see the controller log")
		return
	}
	// Lax, not Strict: the provider's redirect back is a navigation from
	// another site, and must bring the cookie.
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Value: base64.RawURLEncoding.EncodeToString(s.seal.seal(plain, flowCookie)),
		Path: callbackPath, MaxAge: int(flowLifetime.Seconds()), HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, s.oauth(p).AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier)), http.StatusFound)
}

// Reasons a sign-in fails, as the callback's redirect names them; the
// detail goes to the log only.
const (
	failDenied   = "denied"   // no rule maps the person to a role
	failFailed   = "failed"   // the answer did not check out
	failExpired  = "expired"  // no sign-in in progress, or it took too long
	failProvider = "provider" // the provider refused
)

// Finish implements api.SignIn: it checks the state, exchanges the code
// with the PKCE verifier, verifies the ID token and its nonce, maps the
// groups and opens the session.
func (s *SignIn) Finish(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Path: callbackPath, MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
	fail := func(kind, reason string, args ...any) {
		s.log.Warn("sign-in refused", append([]any{"reason", reason, "kind", kind}, args...)...)
		http.Redirect(w, r, "/?signin="+kind, http.StatusFound)
	}
	if s.sessions == nil {
		fail(failFailed, "no history store to keep the session in")
		return
	}
	f, ok := s.readFlow(r)
	if !ok {
		fail(failExpired, "no sign-in in progress: the flow cookie is missing, expired or not this controller's")
		return
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		fail(failProvider, "the provider answered an error", "error", clip(e), "description", clip(q.Get("error_description")))
		return
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1 {
		fail(failFailed, "the state does not match the sign-in's")
		return
	}
	ctx := s.clientContext(r.Context())
	p, err := s.issuer.discover(ctx)
	if err != nil {
		fail(failFailed, "the provider cannot be discovered", "err", err)
		return
	}
	tok, err := s.oauth(p).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		fail(failFailed, "the code was not exchanged", "err", err)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	id, claims, err := s.verify(ctx, raw)
	if err != nil {
		fail(failFailed, "the ID token does not check out", "err", err)
		return
	}
	if subtle.ConstantTimeCompare([]byte(id.Nonce), []byte(f.Nonce)) != 1 {
		fail(failFailed, "the ID token's nonce is not the sign-in's", "subject", id.Subject)
		return
	}
	who := s.person(id, claims)
	rule, ok := s.cfg.match(who.groups)
	if !ok {
		fail(failDenied, "no rule of signIn.roles maps the person to a role", "actor", who.name, "groups", who.groups)
		return
	}
	cookie := rand.Text() + rand.Text()
	now := s.now()
	sess := store.Session{ID: sha256.Sum256([]byte(cookie)), Issuer: id.Issuer, Subject: id.Subject, Name: who.name, Email: who.email,
		Role: string(rule.Role), Apps: rule.Apps, Groups: who.groups, CSRF: rand.Text(),
		Created: now, Refreshed: now, TokenExpires: id.Expiry, Expires: now.Add(s.cfg.SessionLifetime)}
	sess.Sealed = s.sealTokens(sess.ID, tokens{Refresh: tok.RefreshToken, ID: raw})
	if err := s.sessions.CreateSession(r.Context(), sess); err != nil {
		fail(failFailed, "the session was not stored", "err", err)
		return
	}
	// Strict: the cookie is only ever needed by the UI's own requests,
	// never on a navigation from another site.
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: cookie, Path: "/", MaxAge: int(s.cfg.SessionLifetime.Seconds()),
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	s.log.Info("signed in", "actor", who.name, "role", rule.Role, "apps", rule.Apps, "groups", who.groups, "session_ends", sess.Expires)
	http.Redirect(w, r, "/"+f.Next, http.StatusFound)
}

// readFlow returns the flow of r's flow cookie, if it is this
// controller's and has not expired.
func (s *SignIn) readFlow(r *http.Request) (flow, bool) {
	c, err := r.Cookie(flowCookie)
	if err != nil {
		return flow{}, false
	}
	sealed, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return flow{}, false
	}
	plain, err := s.seal.open(sealed, flowCookie)
	if err != nil {
		return flow{}, false
	}
	var f flow
	if json.Unmarshal(plain, &f) != nil || !s.now().Before(f.Expires) {
		return flow{}, false
	}
	return f, true
}

// verify checks an ID token of the web client: signature, issuer,
// audience, expiry. It returns the token and its claims.
func (s *SignIn) verify(ctx context.Context, raw string) (*oidc.IDToken, map[string]any, error) {
	if raw == "" {
		return nil, nil, errors.New("the provider answered no ID token")
	}
	v, err := s.issuer.verifier(ctx, s.cfg.ClientID)
	if err != nil {
		return nil, nil, err
	}
	id, err := v.Verify(ctx, raw)
	if err != nil {
		return nil, nil, err
	}
	var claims map[string]any
	if err := id.Claims(&claims); err != nil {
		return nil, nil, err
	}
	return id, claims, nil
}

// person is who an ID token names.
type person struct {
	name, email string
	groups      []string
}

// person reads the person of an ID token of this provider.
func (s *SignIn) person(id *oidc.IDToken, claims map[string]any) person {
	email, _ := claims["email"].(string)
	return person{name: personName(id.Issuer, id.Subject, email), email: email, groups: groupsOf(claims, s.cfg.Claim)}
}

// tokens are the provider's tokens a session keeps, sealed.
type tokens struct {
	Refresh string `json:"refresh,omitempty"`
	ID      string `json:"id"`
}

// sealTokens seals t for the session id alone.
func (s *SignIn) sealTokens(id store.SessionID, t tokens) []byte {
	plain, _ := json.Marshal(t) // two strings always marshal
	return s.seal.seal(plain, "session "+hex.EncodeToString(id[:]))
}

// openTokens unseals the tokens of session id.
func (s *SignIn) openTokens(id store.SessionID, sealed []byte) (tokens, error) {
	plain, err := s.seal.open(sealed, "session "+hex.EncodeToString(id[:]))
	if err != nil {
		return tokens{}, err
	}
	var t tokens
	return t, json.Unmarshal(plain, &t)
}

// unsafeMethod reports whether a request may change something, and so
// needs the CSRF token when made with the cookie.
func unsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// session returns the session r's cookie names, checking the CSRF token
// of a request that may change something.
func (s *SignIn) session(ctx context.Context, r *http.Request) (store.Session, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" || s.sessions == nil {
		return store.Session{}, fmt.Errorf("%w: no session cookie", api.ErrUnauthenticated)
	}
	sess, err := s.sessions.Session(ctx, sha256.Sum256([]byte(c.Value)))
	switch {
	case errors.Is(err, store.ErrNoSession):
		return store.Session{}, fmt.Errorf("%w: the session cookie names no session (it ended)", api.ErrUnauthenticated)
	case err != nil:
		return store.Session{}, fmt.Errorf("%w: sessions cannot be read: %w", api.ErrUnavailable, err)
	}
	if unsafeMethod(r.Method) && subtle.ConstantTimeCompare([]byte(r.Header.Get(api.CSRFHeader)), []byte(sess.CSRF)) != 1 {
		s.log.Warn("session request refused: no CSRF token", "actor", sess.Name, "method", r.Method, "path", r.URL.Path)
		return store.Session{}, fmt.Errorf("%w: a request with the session cookie must carry the session's %s token", api.ErrForbidden, api.CSRFHeader)
	}
	return sess, nil
}

// Authenticate implements api.Authorizer for the session cookie. A
// session whose ID token expires within RefreshBefore is refreshed at the
// provider first, and its groups mapped again.
func (s *SignIn) Authenticate(ctx context.Context, r *http.Request) (api.Subject, error) {
	sess, err := s.session(ctx, r)
	if err != nil {
		return api.Subject{}, err
	}
	if !s.now().Before(sess.TokenExpires.Add(-s.cfg.RefreshBefore)) {
		if sess, err = s.refresh(ctx, sess); err != nil {
			return api.Subject{}, err
		}
	}
	subj := subject(sess.Name, api.Role(sess.Role), sess.Apps)
	if len(subj.Apps) == 0 {
		subj.Apps = nil
	}
	subj.Session = api.Session{CSRFToken: sess.CSRF, Expires: sess.Expires}
	return subj, nil
}

// refresh renews sess's ID token with its refresh token and maps the
// groups it now carries. A session the provider will not refresh, or
// whose person no rule maps any more, ends (ErrUnauthenticated). A
// provider that does not answer leaves the session as it is while its ID
// token is valid, and is ErrUnavailable once it is not.
func (s *SignIn) refresh(ctx context.Context, sess store.Session) (store.Session, error) {
	mu := &s.refreshing[sess.ID[0]%byte(len(s.refreshing))]
	mu.Lock()
	defer mu.Unlock()
	// Another request may have refreshed it while this one waited.
	if cur, err := s.sessions.Session(ctx, sess.ID); err == nil {
		sess = cur
	}
	if s.now().Before(sess.TokenExpires.Add(-s.cfg.RefreshBefore)) {
		return sess, nil
	}
	valid := s.now().Before(sess.TokenExpires)
	unavailable := func(err error) (store.Session, error) {
		if valid {
			s.log.Warn("session not refreshed; trying again at its next request", "actor", sess.Name, "err", err)
			return sess, nil
		}
		return store.Session{}, fmt.Errorf("%w: the session's refresh at the OpenID provider failed: %w", api.ErrUnavailable, err)
	}
	t, err := s.openTokens(sess.ID, sess.Sealed)
	if err != nil {
		return s.end(ctx, sess, "its tokens cannot be unsealed (the session key changed)")
	}
	if t.Refresh == "" {
		if valid {
			return sess, nil
		}
		return s.end(ctx, sess, "its ID token expired and the provider gave no refresh token (ask for offline_access)")
	}
	ctx = s.clientContext(ctx)
	p, err := s.issuer.discover(ctx)
	if err != nil {
		return unavailable(err)
	}
	fresh, err := s.oauth(p).TokenSource(ctx, &oauth2.Token{RefreshToken: t.Refresh}).Token()
	var refused *oauth2.RetrieveError
	switch {
	case errors.As(err, &refused):
		return s.end(ctx, sess, "the provider refused the refresh: "+clip(refused.ErrorCode))
	case err != nil:
		return unavailable(err)
	}
	raw, _ := fresh.Extra("id_token").(string)
	id, claims, err := s.verify(ctx, raw)
	if err != nil {
		return s.end(ctx, sess, "the refreshed ID token does not check out: "+err.Error())
	}
	if id.Subject != sess.Subject {
		return s.end(ctx, sess, "the refreshed ID token names another subject")
	}
	who := s.person(id, claims)
	rule, ok := s.cfg.match(who.groups)
	if !ok {
		s.log.Info("session role withdrawn at refresh", "actor", who.name, "groups", who.groups, "was", sess.Role)
		return s.end(ctx, sess, "no rule maps the person to a role any more")
	}
	if string(rule.Role) != sess.Role || !slices.Equal(rule.Apps, sess.Apps) {
		s.log.Info("session role changed at refresh", "actor", who.name, "role", rule.Role, "apps", rule.Apps, "was", sess.Role, "was_apps", sess.Apps)
	}
	refreshToken := fresh.RefreshToken
	if refreshToken == "" {
		refreshToken = t.Refresh // the provider keeps the old one valid
	}
	sess.Name, sess.Email, sess.Groups, sess.Role, sess.Apps = who.name, who.email, who.groups, string(rule.Role), rule.Apps
	sess.Refreshed, sess.TokenExpires = s.now(), id.Expiry
	sess.Sealed = s.sealTokens(sess.ID, tokens{Refresh: refreshToken, ID: raw})
	if err := s.sessions.UpdateSession(ctx, sess); err != nil {
		return store.Session{}, fmt.Errorf("%w: the refreshed session was not stored: %w", api.ErrUnavailable, err)
	}
	s.log.Debug("session refreshed", "actor", sess.Name, "token_expires", sess.TokenExpires)
	return sess, nil
}

// end deletes sess, logs why, and returns ErrUnauthenticated: the browser
// signs in again.
func (s *SignIn) end(ctx context.Context, sess store.Session, why string) (store.Session, error) {
	if err := s.sessions.DeleteSession(ctx, sess.ID); err != nil {
		s.log.Warn("ended session not deleted", "actor", sess.Name, "err", err)
	}
	s.log.Info("session ended", "actor", sess.Name, "reason", why)
	return store.Session{}, fmt.Errorf("%w: the session ended: %s", api.ErrUnauthenticated, why)
}

// SignOut implements api.SignIn. The provider's end-session URL carries
// the session's ID token as id_token_hint, as RP-initiated logout asks,
// and returns the browser to the UI.
func (s *SignIn) SignOut(w http.ResponseWriter, r *http.Request) (string, error) {
	sess, err := s.session(r.Context(), r)
	switch {
	case errors.Is(err, api.ErrForbidden):
		return "", err
	case err != nil:
		// Nothing to end; the cookie is cleared all the same.
		clearSession(w)
		return "", nil
	}
	clearSession(w)
	if err := s.sessions.DeleteSession(r.Context(), sess.ID); err != nil {
		return "", fmt.Errorf("sign out %s: %w", sess.Name, err)
	}
	s.log.Info("signed out", "actor", sess.Name)
	end := s.issuer.endSessionURL()
	if end == "" {
		return "", nil
	}
	u, err := url.Parse(end)
	if err != nil {
		return "", nil
	}
	q := u.Query()
	q.Set("client_id", s.cfg.ClientID)
	q.Set("post_logout_redirect_uri", s.cfg.PostLogoutRedirectURL)
	if t, err := s.openTokens(sess.ID, sess.Sealed); err == nil && t.ID != "" {
		q.Set("id_token_hint", t.ID)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// clearSession tells the browser to forget the session cookie.
func clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
}

// clip shortens a value from the network before it is logged.
func clip(s string) string {
	const max = 200
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

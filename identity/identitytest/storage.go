package identitytest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// storage is op.Storage in memory: what op asks to keep between the
// steps of a flow, the users and clients, and the signing keys.
type storage struct {
	mu        sync.Mutex
	keys      []signingKey // the last is current
	users     map[string]*User
	clients   map[string]*Client
	requests  map[string]*authRequest
	codes     map[string]string // code → request id
	access    map[string]accessToken
	refresh   map[string]*refreshToken
	devices   map[string]*deviceEntry // by device code
	userCodes map[string]string       // user code → device code
	ended     []string
	ahead     time.Duration // see Provider.SetAhead
}

// The compiler keeps storage in step with what op asks of it.
var (
	_ op.Storage                    = (*storage)(nil)
	_ op.DeviceAuthorizationStorage = (*storage)(nil)
)

func (s *storage) addUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u.Groups = slices.Clone(u.Groups)
	s.users[u.Subject] = &u
}

func (s *storage) addClient(c Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.IDTokenLifetime == 0 {
		c.IDTokenLifetime = 5 * time.Minute
	}
	s.clients[c.ID] = &c
}

// userByName returns the user signing in as name; s.mu is held.
func (s *storage) userByName(name string) *User {
	for _, u := range s.users {
		if u.Username == name {
			return u
		}
	}
	return nil
}

// errNotFound is what a lookup of something unknown returns; op turns it
// into the protocol's error.
var errNotFound = errors.New("not found")

// authRequest is one authorization request from /authorize until its code
// is exchanged.
type authRequest struct {
	id, clientID, redirectURI, state, nonce string
	scopes                                  []string
	responseType                            oidc.ResponseType
	responseMode                            oidc.ResponseMode
	challenge                               *oidc.CodeChallenge
	subject                                 string
	authTime                                time.Time
	done                                    bool
}

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string                 { return []string{a.clientID} }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.clientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.challenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.responseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.responseMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }

// accessToken is an opaque access token's record.
type accessToken struct {
	subject, clientID string
	scopes            []string
	expires           time.Time
}

// refreshToken is a refresh token's record; the token is its own id.
type refreshToken struct {
	token, subject, clientID string
	scopes                   []string
	authTime                 time.Time
}

func (r *refreshToken) GetAMR() []string                 { return []string{"pwd"} }
func (r *refreshToken) GetAudience() []string            { return []string{r.clientID} }
func (r *refreshToken) GetAuthTime() time.Time           { return r.authTime }
func (r *refreshToken) GetClientID() string              { return r.clientID }
func (r *refreshToken) GetScopes() []string              { return r.scopes }
func (r *refreshToken) GetSubject() string               { return r.subject }
func (r *refreshToken) SetCurrentScopes(scopes []string) { r.scopes = scopes }

// deviceEntry is one device authorization, pending or done.
type deviceEntry struct {
	state    op.DeviceAuthorizationState
	userCode string
}

func (s *storage) CreateAuthRequest(_ context.Context, r *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &authRequest{id: randomID(), clientID: r.ClientID, redirectURI: r.RedirectURI, state: r.State, nonce: r.Nonce,
		scopes: slices.Clone(r.Scopes), responseType: r.ResponseType, responseMode: r.ResponseMode}
	if r.CodeChallenge != "" {
		a.challenge = &oidc.CodeChallenge{Challenge: r.CodeChallenge, Method: r.CodeChallengeMethod}
	}
	s.requests[a.id] = a
	c := *a
	return &c, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.requests[id]
	if !ok {
		return nil, errNotFound
	}
	// A copy: op reads it while a login may write the stored one.
	c := *a
	return &c, nil
}

func (s *storage) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.requests[s.codes[code]]
	if !ok {
		return nil, errNotFound
	}
	c := *a
	return &c, nil
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

// grant is what a token request names, whichever flow it came from.
func grant(r op.TokenRequest) (clientID string, authTime time.Time) {
	switch r := r.(type) {
	case *authRequest:
		return r.clientID, r.authTime
	case *refreshToken:
		return r.clientID, r.authTime
	case *op.DeviceAuthorizationState:
		return r.ClientID, r.AuthTime
	}
	return "", time.Time{}
}

func (s *storage) CreateAccessToken(_ context.Context, r op.TokenRequest) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newAccess(r), time.Now().Add(5 * time.Minute), nil
}

// newAccess records an access token for r; s.mu is held.
func (s *storage) newAccess(r op.TokenRequest) string {
	clientID, _ := grant(r)
	id := randomID()
	s.access[id] = accessToken{subject: r.GetSubject(), clientID: clientID, scopes: slices.Clone(r.GetScopes()), expires: time.Now().Add(5 * time.Minute)}
	return id
}

// CreateAccessAndRefreshTokens rotates the refresh token: the one
// presented is spent, as a provider that detects refresh-token reuse does.
func (s *storage) CreateAccessAndRefreshTokens(_ context.Context, r op.TokenRequest, current string) (string, string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if current != "" {
		if _, ok := s.refresh[current]; !ok {
			return "", "", time.Time{}, op.ErrInvalidRefreshToken
		}
		delete(s.refresh, current)
	}
	clientID, authTime := grant(r)
	rt := &refreshToken{token: randomID(), subject: r.GetSubject(), clientID: clientID, scopes: slices.Clone(r.GetScopes()), authTime: authTime}
	s.refresh[rt.token] = rt
	return s.newAccess(r), rt.token, time.Now().Add(5 * time.Minute), nil
}

func (s *storage) TokenRequestByRefreshToken(_ context.Context, token string) (op.RefreshTokenRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, ok := s.refresh[token]
	if !ok {
		return nil, op.ErrInvalidRefreshToken
	}
	c := *rt
	return &c, nil
}

// TerminateSession is end_session's: the user's refresh tokens at the
// client die with the session.
func (s *storage) TerminateSession(_ context.Context, subject, clientID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = append(s.ended, subject+" "+clientID)
	for token, rt := range s.refresh {
		if rt.subject == subject && rt.clientID == clientID {
			delete(s.refresh, token)
		}
	}
	return nil
}

func (s *storage) RevokeToken(_ context.Context, token, _, _ string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.refresh, token)
	delete(s.access, token)
	return nil
}

func (s *storage) GetRefreshTokenInfo(_ context.Context, _ string, token string) (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, ok := s.refresh[token]
	if !ok {
		return "", "", op.ErrInvalidRefreshToken
	}
	return rt.subject, rt.token, nil
}

// key is a signing key as op signs with it and publishes it.
type key struct{ signingKey }

func (k key) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k key) Algorithm() jose.SignatureAlgorithm          { return jose.RS256 }
func (k key) ID() string                                  { return k.id }
func (k key) Use() string                                 { return "sig" }

// publicKey publishes a key's public half.
type publicKey struct{ key }

func (k publicKey) Key() any { return &k.private.PublicKey }

// Key of a signing key is the private key op signs with.
func (k key) Key() any { return k.private }

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return key{s.keys[len(s.keys)-1]}, nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]op.Key, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, publicKey{key{k}})
	}
	return out, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	if !ok {
		return nil, errNotFound
	}
	return client{c: *c, ahead: s.ahead}, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	if !ok || c.Secret == "" || c.Secret != secret {
		return errors.New("invalid client")
	}
	return nil
}

// SetUserinfoFromScopes fills the user's claims for an ID token; op calls
// it on every issue, a refresh included, so a changed group shows at the
// next refresh.
func (s *storage) SetUserinfoFromScopes(_ context.Context, info *oidc.UserInfo, subject, _ string, scopes []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.userinfo(info, subject, scopes)
}

// userinfo fills info with subject's claims for scopes; s.mu is held.
func (s *storage) userinfo(info *oidc.UserInfo, subject string, scopes []string) error {
	u, ok := s.users[subject]
	if !ok {
		return errNotFound
	}
	info.Subject = u.Subject
	for _, scope := range scopes {
		switch scope {
		case oidc.ScopeEmail:
			info.Email, info.EmailVerified = u.Email, true
		case oidc.ScopeProfile:
			info.PreferredUsername = u.Username
		case "groups":
			info.AppendClaims("groups", slices.Clone(u.Groups))
		}
	}
	for k, v := range u.Claims {
		info.AppendClaims(k, v)
	}
	return nil
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, subject, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.access[tokenID]
	if !ok || time.Now().After(t.expires) {
		return errNotFound
	}
	return s.userinfo(info, subject, t.scopes)
}

func (s *storage) SetIntrospectionFromToken(_ context.Context, r *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.access[tokenID]
	if !ok || time.Now().After(t.expires) {
		return errNotFound
	}
	r.Active, r.Subject, r.ClientID, r.Scope = true, subject, clientID, t.scopes
	return nil
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("JWT profile grants are not offered")
}

func (s *storage) ValidateJWTProfileScopes(_ context.Context, _ string, scopes []string) ([]string, error) {
	return scopes, nil
}

func (s *storage) Health(context.Context) error { return nil }

func (s *storage) StoreDeviceAuthorization(_ context.Context, clientID, deviceCode, userCode string, expires time.Time, scopes []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.userCodes[userCode]; ok {
		return op.ErrDuplicateUserCode
	}
	s.devices[deviceCode] = &deviceEntry{userCode: userCode,
		state: op.DeviceAuthorizationState{ClientID: clientID, Scopes: slices.Clone(scopes), Expires: expires}}
	s.userCodes[userCode] = deviceCode
	return nil
}

func (s *storage) GetDeviceAuthorizatonState(_ context.Context, clientID, deviceCode string) (*op.DeviceAuthorizationState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.devices[deviceCode]
	if !ok || d.state.ClientID != clientID {
		return nil, errNotFound
	}
	st := d.state
	return &st, nil
}

// completeDevice marks the authorization of userCode done by subject.
func (s *storage) completeDevice(userCode, subject string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.devices[s.userCodes[userCode]]
	if !ok {
		return errNotFound
	}
	d.state.Done, d.state.Subject, d.state.AuthTime, d.state.AMR = true, subject, time.Now(), []string{"pwd"}
	return nil
}

// client is a Client as op reads it; ahead is the provider's clock's
// lead at the time op asked for it.
type client struct {
	c     Client
	ahead time.Duration
}

func (c client) GetID() string                    { return c.c.ID }
func (c client) RedirectURIs() []string           { return c.c.RedirectURIs }
func (c client) PostLogoutRedirectURIs() []string { return c.c.PostLogoutRedirectURIs }
func (c client) LoginURL(id string) string        { return LoginPath + "?id=" + id }
func (c client) AccessTokenType() op.AccessTokenType {
	return op.AccessTokenTypeBearer
}
func (c client) IDTokenLifetime() time.Duration { return c.c.IDTokenLifetime }

// DevMode lets a web client redirect to plain http on loopback, where the
// tests' servers run.
func (c client) DevMode() bool { return true }
func (c client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// IsScopeAllowed admits the groups scope beside OpenID's own.
func (c client) IsScopeAllowed(scope string) bool { return scope == "groups" }

// IDTokenUserinfoClaimsAssertion puts the user's claims in the ID token,
// where a relying party reads groups.
func (c client) IDTokenUserinfoClaimsAssertion() bool { return true }

// ClockSkew is the only clock op lets a storage move: it adds it to the
// expiry of every token it issues (see Provider.SetAhead).
func (c client) ClockSkew() time.Duration { return c.ahead }

func (c client) ApplicationType() op.ApplicationType {
	if c.c.Native {
		return op.ApplicationTypeNative
	}
	return op.ApplicationTypeWeb
}

func (c client) AuthMethod() oidc.AuthMethod {
	if c.c.Secret == "" {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}

func (c client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}

func (c client) GrantTypes() []oidc.GrantType {
	g := []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
	if c.c.Device {
		g = append(g, oidc.GrantTypeDeviceCode)
	}
	return g
}

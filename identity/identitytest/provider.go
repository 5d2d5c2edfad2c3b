// Package identitytest runs a real OpenID provider on loopback for Skep's
// tests: zitadel's op package speaks the protocol (discovery, JWKS, the
// authorization code flow with PKCE, refresh tokens, the device
// authorization grant, RP-initiated logout), and this package gives it an
// in-memory storage, a plain login form and a device form, and the knobs a
// test turns: users and their groups, clients, a rotated signing key, and
// ID tokens minted in a CI platform's claim shape.
//
// zitadel's provider was chosen over a mock provider because it is one:
// the device grant, end_session and refresh tokens that re-read a user's
// claims are the provider's own code, not this package's.
//
// It is for tests only and must never be imported by production code.
// Its types are safe for concurrent use.
package identitytest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// The provider's paths beside those op serves (/authorize, /oauth/token,
// /keys, /end_session, /device_authorization, /.well-known/...).
const (
	// LoginPath serves the sign-in form the authorization endpoint
	// redirects to: fields username and password, button #submit.
	LoginPath = "/login"
	// DevicePath serves the form a user of the device grant fills in:
	// user_code, username and password.
	DevicePath = "/device"
	// LoggedOutPath is where end_session sends a browser that named no
	// post_logout_redirect_uri.
	LoggedOutPath = "/logged-out"
)

// User is an account at the provider.
type User struct {
	// Subject is the sub claim; Username and Password sign in.
	Subject, Username, Password string
	// Email is the email claim (scope email).
	Email string
	// Groups is the groups claim (scope groups); SetGroups changes it.
	Groups []string
	// Claims are added to every ID token of the user as they are.
	Claims map[string]any
}

// Client is a registered relying party.
type Client struct {
	// ID is the client_id; Secret "" makes it a public client, which
	// must use PKCE.
	ID, Secret string
	// RedirectURIs are the allowed redirect URIs; a loopback one allows
	// any port (RFC 8252).
	RedirectURIs []string
	// PostLogoutRedirectURIs are the allowed post_logout_redirect_uri.
	PostLogoutRedirectURIs []string
	// Native marks an application on the user's machine (the CLI).
	Native bool
	// Device allows the device authorization grant.
	Device bool
	// IDTokenLifetime defaults to five minutes.
	IDTokenLifetime time.Duration
}

// Options configure Start.
type Options struct {
	Users   []User
	Clients []Client
}

// Provider is a running OpenID provider.
type Provider struct {
	// URL is the issuer: http://127.0.0.1:port, no trailing slash.
	URL string

	store *storage
	op    *op.Provider
}

// Start runs a provider on loopback until the test ends.
func Start(t testing.TB, opts Options) *Provider {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + srv.Listener.Addr().String()
	key, err := newKey()
	if err != nil {
		t.Fatal(err)
	}
	s := &storage{
		keys: []signingKey{key}, users: map[string]*User{}, clients: map[string]*Client{},
		requests: map[string]*authRequest{}, codes: map[string]string{}, access: map[string]accessToken{},
		refresh: map[string]*refreshToken{}, devices: map[string]*deviceEntry{}, userCodes: map[string]string{},
	}
	for _, u := range opts.Users {
		s.addUser(u)
	}
	for _, c := range opts.Clients {
		s.addClient(c)
	}
	var cryptoKey [32]byte
	if _, err := rand.Read(cryptoKey[:]); err != nil {
		t.Fatal(err)
	}
	provider, err := op.NewProvider(&op.Config{
		CryptoKey:                cryptoKey,
		DefaultLogoutRedirectURI: LoggedOutPath,
		CodeMethodS256:           true,
		AuthMethodPost:           true,
		GrantTypeRefreshToken:    true,
		SupportedUILocales:       []language.Tag{language.English},
		// A one-second poll keeps a device-grant test short.
		DeviceAuthorization: op.DeviceAuthorizationConfig{Lifetime: 5 * time.Minute, PollInterval: time.Second,
			UserFormPath: DevicePath, UserCode: op.UserCodeBase20},
	}, s, op.StaticIssuer(issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{URL: issuer, store: s, op: provider}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+LoginPath, p.loginForm)
	mux.HandleFunc("POST "+LoginPath, p.login)
	mux.HandleFunc("GET "+DevicePath, p.deviceForm)
	mux.HandleFunc("POST "+DevicePath, p.device)
	mux.HandleFunc("GET "+LoggedOutPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "signed out at the provider")
	})
	mux.Handle("/", provider)
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)
	return p
}

// AddUser adds or replaces a user.
func (p *Provider) AddUser(u User) { p.store.addUser(u) }

// AddClient adds or replaces a client; tests whose redirect URI is known
// only once their server runs add it then.
func (p *Provider) AddClient(c Client) { p.store.addClient(c) }

// SetGroups replaces a user's groups: tokens issued from now on, by a
// refresh too, carry the new ones.
func (p *Provider) SetGroups(username string, groups ...string) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	if u := p.store.userByName(username); u != nil {
		u.Groups = append([]string(nil), groups...)
	}
}

// SetAhead makes the provider issue tokens from now on as if its clock ran
// d ahead of the real one: a test that moves the clock of the party that
// checks the tokens moves the provider's with it, and the tokens stay
// valid for their lifetime on that clock. (Only expiry moves; op stamps
// iat and auth_time d earlier, which no relying party here checks.)
func (p *Provider) SetAhead(d time.Duration) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.ahead = d
}

// RotateKey makes a new signing key current and returns its key id; the
// old keys stay published until RetireKeys, as a provider rotating keys
// keeps them for the tokens already out.
func (p *Provider) RotateKey(t testing.TB) string {
	t.Helper()
	key, err := newKey()
	if err != nil {
		t.Fatal(err)
	}
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.keys = append(p.store.keys, key)
	return key.id
}

// RetireKeys unpublishes every key but the current one.
func (p *Provider) RetireKeys() {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.keys = p.store.keys[len(p.store.keys)-1:]
}

// EndedSessions returns "subject client" for each session ended through
// end_session, oldest first.
func (p *Provider) EndedSessions() []string {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	return append([]string(nil), p.store.ended...)
}

// signingKey is an RSA key and its key id.
type signingKey struct {
	id      string
	private *rsa.PrivateKey
}

// newKey makes a 2048-bit RSA key with a random id.
func newKey() (signingKey, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return signingKey{}, fmt.Errorf("generate signing key: %w", err)
	}
	return signingKey{id: randomID(), private: k}, nil
}

// randomID returns a random identifier of 26 base32 characters.
func randomID() string { return rand.Text() }

// withIssuer marks ctx with the provider's issuer, which op's helpers read.
func (p *Provider) withIssuer(ctx context.Context) context.Context {
	return op.ContextWithIssuer(ctx, p.URL)
}

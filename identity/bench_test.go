package identity_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/identity"
)

// BenchmarkAuthenticate measures what each kind of credential costs a
// request in the guard: a session reads its row from SQLite, an ID token
// has its RSA signature checked (the provider's keys are cached).
func BenchmarkAuthenticate(b *testing.B) {
	w := newWorld(b, worldOptions{})
	sess := w.session(b, "alice")
	cli := w.cliToken(b, w.provider, "skep-cli", "alice")
	ci := w.mint(b, w.provider, githubClaims("acme/web", "refs/heads/main"))
	tokens, err := api.NewTokens(api.TokenSpec{Name: "root", Role: api.RoleAdmin, Digest: [32]byte{1}})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		auth    api.Authorizer
		present func(r *http.Request)
	}{
		{"tokens file (unknown token, every digest compared)", tokens, func(r *http.Request) { r.Header.Set("Authorization", "Bearer some-static-token") }},
		{"session cookie", w.id.SignIn, func(r *http.Request) { r.AddCookie(&http.Cookie{Name: identity.SessionCookie, Value: sess.cookie}) }},
		{"CLI ID token", w.id.Bearer, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+cli) }},
		{"CI ID token, a read", w.id.Bearer, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+ci) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := httptest.NewRequest("GET", "/api/v1/applications", nil)
			tc.present(r)
			for b.Loop() {
				_, _ = tc.auth.Authenticate(b.Context(), r)
			}
		})
	}
}

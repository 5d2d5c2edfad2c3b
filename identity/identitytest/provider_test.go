package identitytest_test

import (
	"context"
	"slices"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/skep-cd/skep/identity/identitytest"
)

// claims are the ID token claims these tests read.
type claims struct {
	Subject string   `json:"sub"`
	Nonce   string   `json:"nonce"`
	Email   string   `json:"email"`
	Groups  []string `json:"groups"`
}

func startProvider(t *testing.T) (*identitytest.Provider, *oauth2.Config, *oidc.IDTokenVerifier) {
	t.Helper()
	p := identitytest.Start(t, identitytest.Options{
		Users:   []identitytest.User{{Subject: "u1", Username: "alice", Password: "pw", Email: "alice@example.test", Groups: []string{"ops"}}},
		Clients: []identitytest.Client{{ID: "cli", Native: true, Device: true, RedirectURIs: []string{"http://127.0.0.1/callback"}}},
	})
	provider, err := oidc.NewProvider(t.Context(), p.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &oauth2.Config{ClientID: "cli", Endpoint: provider.Endpoint(), RedirectURL: "http://127.0.0.1:1/callback",
		Scopes: []string{oidc.ScopeOpenID, "email", "groups", oidc.ScopeOfflineAccess}}
	return p, cfg, provider.Verifier(&oidc.Config{ClientID: "cli"})
}

// codeFlow signs alice in with PKCE and returns the tokens.
func codeFlow(t *testing.T, p *identitytest.Provider, cfg *oauth2.Config, nonce string) *oauth2.Token {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	at, err := p.LogIn(t.Context(), identitytest.NoRedirects(), cfg.AuthCodeURL("state-1", oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), "alice", "pw")
	if err != nil {
		t.Fatal(err)
	}
	if got := at.Query().Get("state"); got != "state-1" {
		t.Fatalf("redirect %s carries state %q", at.Redacted(), got)
	}
	tok, err := cfg.Exchange(t.Context(), at.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func verify(t *testing.T, v *oidc.IDTokenVerifier, tok *oauth2.Token) claims {
	t.Helper()
	raw, _ := tok.Extra("id_token").(string)
	id, err := v.Verify(t.Context(), raw)
	if err != nil {
		t.Fatalf("verify ID token: %v", err)
	}
	var c claims
	if err := id.Claims(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTheProviderIssuesIDTokensWithGroupsAndRereadsThemOnRefresh(t *testing.T) {
	p, cfg, v := startProvider(t)
	tok := codeFlow(t, p, cfg, "n-1")
	got := verify(t, v, tok)
	if got.Subject != "u1" || got.Nonce != "n-1" || got.Email != "alice@example.test" || !slices.Equal(got.Groups, []string{"ops"}) {
		t.Errorf("ID token claims = %+v", got)
	}
	if tok.RefreshToken == "" {
		t.Fatal("no refresh token for offline_access")
	}
	p.SetGroups("alice", "viewers")
	fresh, err := cfg.TokenSource(context.Background(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	if err != nil {
		t.Fatal(err)
	}
	if got := verify(t, v, fresh); !slices.Equal(got.Groups, []string{"viewers"}) {
		t.Errorf("refreshed ID token groups = %q, want [viewers]", got.Groups)
	}
	// The spent refresh token is refused: the provider rotates them.
	if _, err := cfg.TokenSource(context.Background(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err == nil {
		t.Error("a spent refresh token was taken again")
	}
}

func TestTheProviderRotatesItsSigningKey(t *testing.T) {
	p, cfg, v := startProvider(t)
	before := codeFlow(t, p, cfg, "n")
	verify(t, v, before)
	p.RotateKey(t)
	after := codeFlow(t, p, cfg, "n")
	verify(t, v, after) // an unknown key id makes the verifier fetch the keys again
	minted, err := p.Mint(map[string]any{"sub": "job", "aud": "cli"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(t.Context(), minted); err != nil {
		t.Errorf("a minted token does not verify: %v", err)
	}
}

func TestTheProviderSignsADeviceIn(t *testing.T) {
	p, cfg, v := startProvider(t)
	da, err := cfg.DeviceAuth(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ApproveDevice(t.Context(), da.VerificationURI, da.UserCode, "alice", "pw"); err != nil {
		t.Fatal(err)
	}
	tok, err := cfg.DeviceAccessToken(t.Context(), da)
	if err != nil {
		t.Fatal(err)
	}
	if got := verify(t, v, tok); got.Subject != "u1" {
		t.Errorf("device token subject %q", got.Subject)
	}
}

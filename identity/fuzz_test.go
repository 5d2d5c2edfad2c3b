package identity_test

import (
	"encoding/base64"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/identity"
)

// fixtureEnv answers every variable a fixture names with a value long
// enough to be a session key.
func fixtureEnv(string) string { return strings.Repeat("s", 48) }

func TestTheFixturesParseAsTheirNamesSay(t *testing.T) {
	files, err := filepath.Glob("testdata/oidc/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("found %d fixtures (%v)", len(files), err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, err = identity.Parse(f, data, fixtureEnv)
		if bad := strings.HasPrefix(filepath.Base(f), "bad"); (err != nil) != bad {
			t.Errorf("Parse(%s) error = %v; a fixture named bad* must fail, and only it", f, err)
		}
	}
}

// FuzzParse holds Parse to its property: an error, or a configuration
// that New takes; never a panic.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/oidc/*.yaml")
	if len(files) == 0 {
		f.Fatal("no seeds in testdata/oidc")
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := identity.Parse("oidc.yaml", data, fixtureEnv)
		if err != nil {
			return
		}
		if _, err := identity.New(identity.Options{Config: cfg}); err != nil {
			t.Errorf("Parse accepted a configuration New refuses: %v", err)
		}
	})
}

// jwt makes a token-shaped string of payload, unsigned.
func jwt(payload string) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"RS256","kid":"k"}`)) + "." + enc.EncodeToString([]byte(payload)) + ".c2ln"
}

// FuzzBearerToken holds the bearer authorizer to its contract on any
// Authorization header: an error the guard answers (401, 403 or 503),
// never a panic or a subject. The trusted issuers do not answer, so no
// fuzzed token can pass.
func FuzzBearerToken(f *testing.F) {
	down := "http://127.0.0.1:9"
	id, err := identity.New(identity.Options{Config: identity.Config{
		SignIn: &identity.SignInConfig{Issuer: down, ClientID: "skep", CLIClientID: "skep-cli", RedirectURL: down + "/api/v1/auth/oidc/callback",
			Claim: "groups", Roles: []identity.GroupRule{{Group: "ops", Role: api.RoleAdmin}}},
		CI: []identity.CIIssuer{{Issuer: "http://localhost:9", Audience: "skep", Rules: []identity.ClaimRule{{Claims: map[string]string{"ref": "*"}, Role: api.RoleDeployer}}}},
	}})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		"Bearer " + jwt(`{"iss":"http://127.0.0.1:9","aud":"skep-cli","sub":"u"}`),
		"Bearer " + jwt(`{"iss":"http://localhost:9","aud":["skep"],"jti":"j"}`),
		"Bearer " + jwt(`{"iss":"https://elsewhere.example","aud":"x"}`),
		"Bearer " + jwt(`{"iss":7}`),
		"Bearer a.b.c", "Bearer static-token", "Bearer ", "Basic Zm9vOmJhcg==",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest("POST", "/api/v1/applications/web/sync", nil)
		r.Header.Set("Authorization", header)
		subj, err := id.Bearer.Authenticate(t.Context(), r)
		if err == nil {
			t.Fatalf("a fuzzed credential authenticated as %+v", subj)
		}
		if !errors.Is(err, api.ErrUnauthenticated) && !errors.Is(err, api.ErrForbidden) && !errors.Is(err, api.ErrUnavailable) {
			t.Errorf("Authenticate error %v is none the guard answers as a refusal", err)
		}
	})
}

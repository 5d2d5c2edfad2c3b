package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/api/authtest"
	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/wire"
)

func TestTokensKeepTheAuthorizerContract(t *testing.T) {
	bearer := func(token string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
	}
	authtest.Run(t, authtest.Harness{
		Authorizer: testTokens(t),
		Known: []authtest.Known{
			{Subject: api.Subject{Name: "root", Role: api.RoleAdmin}, Present: bearer(adminToken)},
			{Subject: api.Subject{Name: "eve", Role: api.RoleViewer}, Present: bearer(viewerToken)},
			{Subject: api.Subject{Name: "webteam", Role: api.RoleDeployer, Apps: []string{"web*"}}, Present: bearer(scopedToken)},
		},
		Unknown: bearer("nobody-knows-this"),
	})
}

func TestSubjectRolesAndScopes(t *testing.T) {
	for _, tc := range []struct {
		subj  api.Subject
		need  api.Role
		app   string
		allow bool
		sees  bool
	}{
		{api.Subject{Role: api.RoleViewer}, api.RoleViewer, "web", true, true},
		{api.Subject{Role: api.RoleViewer}, api.RoleDeployer, "web", false, true},
		{api.Subject{Role: api.RoleDeployer}, api.RoleAdmin, "web", false, true},
		{api.Subject{Role: api.RoleAdmin}, api.RoleAdmin, "web", true, true},
		{api.Subject{Role: api.RoleAdmin, Apps: []string{"web-*"}}, api.RoleAdmin, "db", true, false},
		{api.Subject{Role: api.RoleViewer, Apps: []string{"web-*", "db"}}, api.RoleViewer, "db", true, true},
		{api.Subject{Role: "root"}, api.RoleViewer, "web", false, false},
		{api.Subject{}, api.RoleViewer, "web", false, false},
	} {
		if got := tc.subj.Allows(tc.need); got != tc.allow {
			t.Errorf("%+v.Allows(%s) = %v, want %v", tc.subj, tc.need, got, tc.allow)
		}
		if got := tc.subj.Sees(tc.app); got != tc.sees {
			t.Errorf("%+v.Sees(%s) = %v, want %v", tc.subj, tc.app, got, tc.sees)
		}
	}
}

func TestTokensNeverPrint(t *testing.T) {
	tok := wire.NewToken("super-secret-value")
	spec := api.TokenSpec{Name: "ci", Role: api.RoleAdmin, Digest: tok.Digest()}
	var logged bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logged, nil))
	logger.Info("tokens", "token", tok, "spec", spec)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("tokens", "token", tok, "spec", spec)
	out := logged.String() + fmt.Sprintf("%v %+v %#v %s", tok, tok, tok, tok)
	digest := hex.EncodeToString(func() []byte { d := tok.Digest(); return d[:] }())
	for _, leak := range []string{"super-secret-value", digest} {
		if strings.Contains(out, leak) {
			t.Errorf("a token or its digest was printed:\n%s", out)
		}
	}
	if !strings.Contains(out, "[redacted]") || !strings.Contains(logged.String(), `"ci"`) {
		t.Errorf("redacted output lacks the marker or the name:\n%s", out)
	}
}

func TestParseTokensFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ci.token"), []byte("ci-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("alice-token"))
	env := map[string]string{"OPS_TOKEN": "ops-token"}
	getenv := func(k string) string { return env[k] }
	name := filepath.Join(dir, "tokens.yaml")
	good := fmt.Sprintf(`tokens:
  - name: ci
    role: deployer
    apps: ["web-*"]
    tokenFile: ci.token
  - name: alice
    role: viewer
    sha256: %s
  - name: ops
    role: admin
    tokenEnv: OPS_TOKEN
`, hex.EncodeToString(sum[:]))
	specs, err := api.ParseTokens(name, []byte(good), getenv)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := api.NewTokens(specs...)
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]string{"ci-token": "ci", "alice-token": "alice", "ops-token": "ops"} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		got, err := tokens.Authenticate(t.Context(), r)
		if err != nil || got.Name != want {
			t.Errorf("token of %s authenticated as %q, %v", want, got.Name, err)
		}
	}

	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown key names its line", "tokens:\n  - name: a\n    role: admin\n    token: x\n", "tokens.yaml:4:5: tokens[0].token: unknown key"},
		{"bad role", "tokens:\n  - name: a\n    role: root\n    tokenEnv: OPS_TOKEN\n", ":3:11: tokens[0].role: want viewer, deployer or admin"},
		{"no token", "tokens:\n  - name: a\n    role: admin\n", "tokens[0]: no token"},
		{"two sources", "tokens:\n  - name: a\n    role: admin\n    tokenEnv: OPS_TOKEN\n    sha256: " + strings.Repeat("0", 64) + "\n", "tokens[0].sha256: give tokenFile, tokenEnv or sha256, only one"},
		{"bad digest", "tokens:\n  - name: a\n    role: admin\n    sha256: abc\n", "tokens[0].sha256: want 64 hex digits"},
		{"duplicate name", "tokens:\n  - {name: a, role: admin, tokenEnv: OPS_TOKEN}\n  - {name: a, role: viewer, sha256: " + strings.Repeat("1", 64) + "}\n", `tokens[1].name: "a" is given twice`},
		{"missing file", "tokens:\n  - {name: a, role: admin, tokenFile: nope.token}\n", "tokens[0].tokenFile:"},
		{"bad glob", "tokens:\n  - {name: a, role: admin, tokenEnv: OPS_TOKEN, apps: ['[']}\n", "tokens[0].apps[0]: bad glob"},
		{"not a list", "tokens: {name: a}\n", "tokens: want a list"},
		{"empty file", "", "tokens.yaml: empty; want a mapping with a tokens list"},
		{"yaml syntax", "tokens: [\n", "tokens.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := api.ParseTokens(name, []byte(tc.yaml), getenv)
			var problems configfile.Problems
			if !errors.As(err, &problems) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseTokens error = %v, want problems containing %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "ops-token") {
				t.Errorf("an error printed a token: %v", err)
			}
		})
	}
}

// TestParseTokensShowsTheAcceptedShape pins the documented shape of a tokens
// file: a file of another shape, such as a bare list of tokens, is refused
// with a problem that shows an example of the mapping with its tokens list.
func TestParseTokensShowsTheAcceptedShape(t *testing.T) {
	const example = "for example:\ntokens:\n  - name: ci\n    role: deployer\n    tokenFile: /run/secrets/ci"
	for _, tc := range []struct{ name, yaml, want string }{
		{"a top-level list", "- name: ci\n  role: deployer\n  tokenFile: ci.token\n", "tokens.yaml:1:1: want a mapping with a tokens list, got a list; " + example},
		{"a mapping without tokens", "name: ci\nrole: deployer\n", "tokens.yaml:1:1: tokens: missing; want a mapping with a tokens list; " + example},
		{"a scalar", "ci\n", "tokens.yaml:1:1: want a mapping with a tokens list, got a string; " + example},
		{"an empty file", "", "tokens.yaml: empty; want a mapping with a tokens list; " + example},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := api.ParseTokens("tokens.yaml", []byte(tc.yaml), func(string) string { return "" })
			var problems configfile.Problems
			if !errors.As(err, &problems) {
				t.Fatalf("ParseTokens error = %v, want configfile.Problems", err)
			}
			found := false
			for _, p := range problems {
				found = found || p.String() == tc.want
			}
			if !found {
				t.Errorf("ParseTokens problems:\n%v\nwant one reading:\n%s", err, tc.want)
			}
		})
	}
}

func TestAdminTokenFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "admin")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // the token that must authenticate as admin; "" = none configured
		err  bool
	}{
		{"none", nil, "", false},
		{"value", map[string]string{api.EnvAdminToken: "from-env"}, "from-env", false},
		{"file wins", map[string]string{api.EnvAdminToken: "from-env", api.EnvAdminTokenFile: file}, "from-file", false},
		{"missing file", map[string]string{api.EnvAdminTokenFile: filepath.Join(dir, "nope")}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, ok, err := api.AdminTokenFromEnv(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.err || ok != (tc.want != "") {
				t.Fatalf("AdminTokenFromEnv = %v, %v, %v", spec, ok, err)
			}
			if ok && (spec.Digest != wire.NewToken(tc.want).Digest() || spec.Name != "admin" || spec.Role != api.RoleAdmin) {
				t.Errorf("admin spec = %+v, want the digest of %q, named admin", spec, tc.want)
			}
		})
	}
}

func FuzzParseTokens(f *testing.F) {
	for _, s := range []string{
		"tokens:\n  - name: a\n    role: admin\n    sha256: " + strings.Repeat("ab", 32) + "\n",
		"tokens:\n  - {name: b, role: viewer, apps: [x, 'y*'], tokenEnv: T}\n",
		"tokens: []\n", "x: 1\n", "- 1\n",
	} {
		f.Add([]byte(s))
	}
	getenv := func(string) string { return "value" }
	f.Fuzz(func(t *testing.T, data []byte) {
		specs, err := api.ParseTokens("tokens.yaml", data, getenv)
		if err != nil {
			return
		}
		// Property: a file that parses yields specs with names and valid roles.
		for _, s := range specs {
			if s.Name == "" || !s.Role.Valid() {
				t.Errorf("ParseTokens accepted %+v", s)
			}
		}
	})
}

package identity_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/identity"
	"github.com/skep-cd/skep/wire"
)

func TestParseReadsTheFileAndFillsTheDefaults(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "client-secret"), []byte("web-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SKEP_SESSION_KEY": strings.Repeat("k", 40)}
	data := `signIn:
  issuer: https://login.example.org/realms/ops
  clientID: skep
  clientSecretFile: client-secret
  cliClientID: skep-cli
  redirectURL: https://skep.example.org/api/v1/auth/oidc/callback
  sessionKeyEnv: SKEP_SESSION_KEY
  roles:
    - {group: ops, role: admin}
    - {group: web-team, role: deployer, apps: ["web-*"]}
ci:
  - issuer: https://token.actions.githubusercontent.com
    audience: https://skep.example.org
    rules:
      - name: web from main
        claims: {repository: acme/web, ref: refs/heads/main}
        role: deployer
        apps: [web]
  - issuer: https://gitlab.example.org
    audience: https://skep.example.org
    audit: [pipeline_id]
    rules:
      - {claims: {project_path: acme/*, ref_protected: "true"}, role: viewer}
`
	cfg, err := identity.Parse(filepath.Join(dir, "oidc.yaml"), []byte(data), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := identity.Config{
		SignIn: &identity.SignInConfig{Issuer: "https://login.example.org/realms/ops", ClientID: "skep", CLIClientID: "skep-cli",
			RedirectURL: "https://skep.example.org/api/v1/auth/oidc/callback", PostLogoutRedirectURL: "https://skep.example.org/",
			Label: "login.example.org", Scopes: identity.DefaultScopes(), Claim: "groups", SessionLifetime: 12 * time.Hour, RefreshBefore: time.Minute,
			ClientSecret: wire.NewToken("web-secret"), SessionKey: wire.NewToken(env["SKEP_SESSION_KEY"]),
			Roles: []identity.GroupRule{{Group: "ops", Role: api.RoleAdmin}, {Group: "web-team", Role: api.RoleDeployer, Apps: []string{"web-*"}}}},
		CI: []identity.CIIssuer{
			{Issuer: "https://token.actions.githubusercontent.com", Audience: "https://skep.example.org", Audit: identity.DefaultAudit(),
				Rules: []identity.ClaimRule{{Name: "web from main", Claims: map[string]string{"repository": "acme/web", "ref": "refs/heads/main"}, Role: api.RoleDeployer, Apps: []string{"web"}}}},
			{Issuer: "https://gitlab.example.org", Audience: "https://skep.example.org", Audit: []string{"pipeline_id"},
				Rules: []identity.ClaimRule{{Claims: map[string]string{"project_path": "acme/*", "ref_protected": "true"}, Role: api.RoleViewer}}},
		},
	}
	secrets := cmp.Comparer(func(a, b wire.Token) bool { return a.Reveal() == b.Reveal() })
	if d := cmp.Diff(want, cfg, secrets); d != "" {
		t.Errorf("Parse (-want +got):\n%s", d)
	}
}

func TestParseReportsEveryProblemWithItsField(t *testing.T) {
	good := `signIn:
  issuer: https://login.example.org
  clientID: skep
  redirectURL: https://skep.example.org/api/v1/auth/oidc/callback
  roles: [{group: ops, role: admin}]
`
	for _, tc := range []struct {
		name, yaml string
		want       []string // "field: part of the message", each a problem
	}{
		{"an empty file trusts nobody", ``, []string{": trusts nobody"}},
		{"an unknown key", good + "  claims: groups\n", []string{"signIn.claims: unknown key"}},
		{"an issuer over plain http off loopback", strings.Replace(good, "https://login", "http://login", 1), []string{"signIn.issuer: want an https:// URL"}},
		{"a redirect URL that is not the callback", strings.Replace(good, "/api/v1/auth/oidc/callback", "/callback", 1), []string{"signIn.redirectURL: want an https:// URL"}},
		{"no rule: nobody could sign in", strings.Replace(good, "  roles: [{group: ops, role: admin}]\n", "", 1), []string{"signIn.roles: missing"}},
		{"a role that is not one", strings.Replace(good, "role: admin", "role: root", 1), []string{`signIn.roles[0].role: want viewer, deployer or admin, got "root"`}},
		{"a bad glob", strings.Replace(good, "role: admin}", "role: admin, apps: ['[']}", 1), []string{"signIn.roles[0].apps[0]: want a path.Match glob"}},
		{"a short session key", good + "  sessionKeyEnv: KEY\n", []string{"signIn.sessionKeyEnv: the session key is 5 bytes"}},
		{"a client secret from nowhere", good + "  clientSecretFile: /nonexistent/secret\n", []string{"signIn.clientSecretFile: read secret file"}},
		{"the CLI as the web client", good + "  cliClientID: skep\n", []string{"signIn.cliClientID: is clientID"}},
		{"a refresh window as long as the session", good + "  sessionLifetime: 1h\n  refreshBefore: 1h\n", []string{"signIn.refreshBefore: is not shorter"}},
		{"a duration that is not one", good + "  sessionLifetime: forever\n", []string{"signIn.sessionLifetime: want a positive duration"}},
		{"scopes without openid", good + "  scopes: [email]\n", []string{"signIn.scopes: lacks openid"}},
		{"a CI issuer with no audience and no rules", "ci:\n  - issuer: https://token.actions.githubusercontent.com\n",
			[]string{"ci[0].audience: missing", "ci[0].rules: missing"}},
		{"a CI rule without claims would take every job", "ci:\n  - issuer: https://ci.example.org\n    audience: a\n    rules: [{role: deployer}]\n",
			[]string{"ci[0].rules[0].claims: missing"}},
		{"a CI rule naming a group", "ci:\n  - issuer: https://ci.example.org\n    audience: a\n    rules: [{group: ops, claims: {ref: main}, role: deployer}]\n",
			[]string{"ci[0].rules[0].group: a CI rule matches claims"}},
		{"one CI issuer twice", "ci:\n  - {issuer: https://ci.example.org, audience: a, rules: [{claims: {ref: main}, role: viewer}]}\n  - {issuer: https://ci.example.org, audience: b, rules: [{claims: {ref: main}, role: viewer}]}\n",
			[]string{"ci[1].issuer: \"https://ci.example.org\" is given twice"}},
		{"a CI audience that is the sign-in's client", good + "ci:\n  - {issuer: https://login.example.org, audience: skep, rules: [{claims: {ref: main}, role: viewer}]}\n",
			[]string{"ci[0].audience: is a client id of signIn"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"KEY": "short"}
			_, err := identity.Parse("oidc.yaml", []byte(tc.yaml), func(k string) string { return env[k] })
			var problems configfile.Problems
			if !errors.As(err, &problems) {
				t.Fatalf("Parse error = %v, want configfile.Problems", err)
			}
			for _, w := range tc.want {
				field, msg, _ := strings.Cut(w, ": ")
				found := false
				for _, p := range problems {
					found = found || (p.Field == field && strings.Contains(p.Message, msg))
				}
				if !found {
					t.Errorf("no problem %q among:\n%v", w, problems)
				}
			}
			if len(problems) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%v", len(problems), len(tc.want), problems)
			}
		})
	}
}

func TestParseNeverPrintsASecretPastedInPlaceOfItsFile(t *testing.T) {
	data := `signIn:
  issuer: https://login.example.org
  clientID: skep
  clientSecretFile: {hunter2: hunter2}
  redirectURL: https://skep.example.org/api/v1/auth/oidc/callback
  roles: [{group: ops, role: admin}]
`
	_, err := identity.Parse("oidc.yaml", []byte(data), func(string) string { return "" })
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Parse error = %v; want a problem that does not quote the value", err)
	}
}

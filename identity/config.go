package identity

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/wire"
)

// Config is an OIDC file, decoded and checked: who may sign in and which
// CI jobs may call. Build it with Parse or LoadFile; the zero value trusts
// nobody.
type Config struct {
	// SignIn, when set, lets people sign in at an OpenID provider: the UI
	// by the authorization code flow, the CLI by `skep login`.
	SignIn *SignInConfig
	// CI lists the issuers whose ID tokens CI jobs present.
	CI []CIIssuer
}

// SignInConfig is sign-in at one OpenID provider.
type SignInConfig struct {
	// Issuer is the provider's issuer URL, as its discovery document
	// names it.
	Issuer string
	// ClientID is the web UI's client; ClientSecret is empty for a public
	// client, which PKCE alone protects.
	ClientID     string
	ClientSecret wire.Token
	// CLIClientID is the client `skep login` signs in as; its ID tokens
	// are taken as bearer tokens. Empty: the CLI cannot sign in.
	CLIClientID string
	// RedirectURL is the callback the provider sends browsers back to:
	// the controller's public URL + /api/v1/auth/oidc/callback.
	RedirectURL string
	// PostLogoutRedirectURL is where the provider sends a browser after
	// signing out there: by default the UI at RedirectURL's origin.
	PostLogoutRedirectURL string
	// Label names the provider on the sign-in page.
	Label string
	// Scopes are asked for; offline_access brings the refresh token the
	// session refreshes with.
	Scopes []string
	// Claim is the claim holding the person's groups (or roles).
	Claim string
	// SessionLifetime ends a session however often it refreshed.
	SessionLifetime time.Duration
	// RefreshBefore is how long before the ID token expires the session
	// refreshes it, re-reading the groups.
	RefreshBefore time.Duration
	// SessionKey seals the provider's tokens in the store and the
	// sign-in's flow cookie; empty means a random key per start, so
	// sessions outlive a restart only until their next refresh.
	SessionKey wire.Token
	// Roles map groups to a role and scope; the first that matches wins,
	// and a person no rule matches may not sign in.
	Roles []GroupRule
}

// GroupRule gives the members of Group a role on some applications: the
// shape of an entry of the tokens file, with a group where the token is.
type GroupRule struct {
	Group string
	Role  api.Role
	// Apps are path.Match globs; empty means every application.
	Apps []string
}

// CIIssuer is a CI platform whose jobs present ID tokens: GitHub Actions
// (https://token.actions.githubusercontent.com), GitLab CI (the GitLab
// instance's URL) or any other issuer.
type CIIssuer struct {
	// Issuer is the token's iss, as the issuer's discovery document names
	// it.
	Issuer string
	// Audience is the aud a token must carry: one this controller owns
	// (its URL, say), so a token minted for another service is refused.
	Audience string
	// Audit names the claims, besides those the matching rule reads, that
	// label what a job does (run and pipeline ids, the person who started
	// it); a claim the token lacks is left out.
	Audit []string
	// Rules map a token's claims to a role and scope; the first that
	// matches wins, and a token no rule matches is refused.
	Rules []ClaimRule
}

// ClaimRule gives the jobs whose claims all match a role on some
// applications.
type ClaimRule struct {
	// Name labels the rule in logs.
	Name string
	// Claims are claim names and path.Match patterns of their values;
	// a claim the token lacks never matches.
	Claims map[string]string
	Role   api.Role
	// Apps are path.Match globs; empty means every application.
	Apps []string
}

// Defaults of a sign-in.
const (
	DefaultClaim           = "groups"
	DefaultSessionLifetime = 12 * time.Hour
	DefaultRefreshBefore   = time.Minute
)

// DefaultScopes are asked for when the file names none.
func DefaultScopes() []string {
	return []string{"openid", "profile", "email", "groups", "offline_access"}
}

// DefaultAudit are the CI claims that label a job's actions when the file
// names none: GitHub's and GitLab's run, pipeline and person.
func DefaultAudit() []string {
	return []string{"repository", "project_path", "ref", "workflow", "environment", "run_id", "pipeline_id", "job_id", "actor", "user_login", "sha"}
}

// fileExample is the shape of an OIDC file, shown in problems about a
// file of another shape.
const fileExample = `signIn:
  issuer: https://login.example.org
  clientID: skep
  redirectURL: https://skep.example.org/api/v1/auth/oidc/callback
  roles:
    - {group: ops, role: admin}
ci:
  - issuer: https://token.actions.githubusercontent.com
    audience: https://skep.example.org
    rules:
      - {claims: {repository: acme/web, ref: refs/heads/main}, role: deployer, apps: [web]}`

// file is the OIDC file as written.
type file struct {
	SignIn *signInEntry `yaml:"signIn"`
	CI     []ciEntry    `yaml:"ci"`
}

type signInEntry struct {
	Issuer                string      `yaml:"issuer"`
	ClientID              string      `yaml:"clientID"`
	ClientSecretFile      string      `yaml:"clientSecretFile"`
	ClientSecretEnv       string      `yaml:"clientSecretEnv"`
	CLIClientID           string      `yaml:"cliClientID"`
	RedirectURL           string      `yaml:"redirectURL"`
	PostLogoutRedirectURL string      `yaml:"postLogoutRedirectURL"`
	Label                 string      `yaml:"label"`
	Scopes                []string    `yaml:"scopes"`
	Claim                 string      `yaml:"claim"`
	SessionLifetime       duration    `yaml:"sessionLifetime"`
	RefreshBefore         duration    `yaml:"refreshBefore"`
	SessionKeyFile        string      `yaml:"sessionKeyFile"`
	SessionKeyEnv         string      `yaml:"sessionKeyEnv"`
	Roles                 []ruleEntry `yaml:"roles"`
}

type ruleEntry struct {
	Name   string            `yaml:"name"`
	Group  string            `yaml:"group"`
	Claims map[string]string `yaml:"claims"`
	Role   string            `yaml:"role"`
	Apps   []string          `yaml:"apps"`
}

type ciEntry struct {
	Issuer   string      `yaml:"issuer"`
	Audience string      `yaml:"audience"`
	Audit    []string    `yaml:"audit"`
	Rules    []ruleEntry `yaml:"rules"`
}

// duration is a time.Duration written as "12h" or "90s".
type duration struct {
	value time.Duration
	set   bool
}

// UnmarshalYAML accepts what time.ParseDuration accepts, if positive.
func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil || v <= 0 {
		return fmt.Errorf("want a positive duration like 12h or 90s, got %s", configfile.Describe(n))
	}
	*d = duration{value: v, set: true}
	return nil
}

// minSessionKey is the shortest session key taken: it is hashed into the
// AES-256 key, and fewer random bytes than that would be the weak link.
const minSessionKey = 32

// LoadFile reads an OIDC file (see Parse); it may be at most 1 MiB.
func LoadFile(name string, getenv func(string) string) (Config, error) {
	data, err := api.ReadConfigFile(name)
	if err != nil {
		return Config{}, fmt.Errorf("oidc file: %w", err)
	}
	return Parse(name, data, getenv)
}

// Parse decodes an OIDC file strictly: a mapping with signIn (people) and
// ci (CI issuers), at least one of them; fileExample shows the shape.
// Secrets (the client secret, the session key) are read from the files or
// variables it names, a relative file from name's directory. Every
// problem is returned at once as configfile.Problems with file, line and
// field path; see TestParseReportsEveryProblemWithItsField.
func Parse(name string, data []byte, getenv func(string) string) (Config, error) {
	var f file
	d := configfile.Decode(name, data, &f, configfile.Options{Want: "a mapping with signIn or ci", Example: fileExample, HideValues: true})
	if d.Empty() || (f.SignIn == nil && len(f.CI) == 0) {
		d.Add("", "trusts nobody; want signIn, ci or both; for example:\n%s", fileExample)
	}
	var cfg Config
	if e := f.SignIn; e != nil {
		cfg.SignIn = parseSignIn(d, e, getenv)
	}
	issuers := map[string]bool{}
	for i, e := range f.CI {
		field := fmt.Sprintf("ci[%d]", i)
		c := CIIssuer{Issuer: e.Issuer, Audience: e.Audience, Audit: e.Audit}
		checkIssuer(d, field+".issuer", e.Issuer)
		switch {
		case issuers[e.Issuer] && e.Issuer != "":
			d.Add(field+".issuer", "%q is given twice; give one entry its rules", e.Issuer)
		case e.Audience == "":
			d.Add(field+".audience", "missing; want an audience this controller owns, such as its URL, that CI jobs ask their tokens for")
		case cfg.SignIn != nil && e.Issuer == cfg.SignIn.Issuer && (e.Audience == cfg.SignIn.ClientID || e.Audience == cfg.SignIn.CLIClientID):
			// A person's ID token would then pass for a job's.
			d.Add(field+".audience", "is a client id of signIn at the same issuer; give CI tokens an audience of their own")
		}
		issuers[e.Issuer] = true
		if c.Audit == nil {
			c.Audit = DefaultAudit()
		}
		if len(e.Rules) == 0 {
			d.Add(field+".rules", "missing; without rules no job of this issuer may do anything")
		}
		for j, r := range e.Rules {
			rf := fmt.Sprintf("%s.rules[%d]", field, j)
			rule := ClaimRule{Name: r.Name, Claims: r.Claims, Role: api.Role(r.Role), Apps: r.Apps}
			if r.Group != "" {
				d.Add(rf+".group", "a CI rule matches claims; write claims: {…}")
			}
			if len(r.Claims) == 0 {
				d.Add(rf+".claims", "missing; a rule without claims would take every job of the issuer")
			}
			for k, pattern := range r.Claims {
				if _, err := path.Match(pattern, ""); err != nil || pattern == "" {
					d.Add(rf+".claims."+k, "want a value or a path.Match pattern")
				}
			}
			checkGrant(d, rf, r.Role, r.Apps)
			c.Rules = append(c.Rules, rule)
		}
		cfg.CI = append(cfg.CI, c)
	}
	if err := d.Err(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// parseSignIn checks the signIn entry and fills in its defaults.
func parseSignIn(d *configfile.Document, e *signInEntry, getenv func(string) string) *SignInConfig {
	c := &SignInConfig{Issuer: e.Issuer, ClientID: e.ClientID, CLIClientID: e.CLIClientID, RedirectURL: e.RedirectURL,
		PostLogoutRedirectURL: e.PostLogoutRedirectURL, Label: e.Label, Scopes: e.Scopes, Claim: e.Claim,
		SessionLifetime: e.SessionLifetime.value, RefreshBefore: e.RefreshBefore.value}
	checkIssuer(d, "signIn.issuer", e.Issuer)
	if c.ClientID == "" {
		d.Add("signIn.clientID", "missing; the client the provider registered for the web UI")
	}
	if c.CLIClientID != "" && c.CLIClientID == c.ClientID {
		d.Add("signIn.cliClientID", "is clientID; register the CLI as a client of its own (a native, public one)")
	}
	redirect, err := url.Parse(e.RedirectURL)
	switch {
	case e.RedirectURL == "":
		d.Add("signIn.redirectURL", "missing; the controller's public URL + %s", callbackPath)
	case err != nil || (redirect.Scheme != "https" && !loopback(redirect)) || !strings.HasSuffix(redirect.Path, callbackPath):
		d.Add("signIn.redirectURL", "want an https:// URL (http:// on loopback only) ending %s", callbackPath)
	case c.PostLogoutRedirectURL == "":
		c.PostLogoutRedirectURL = redirect.Scheme + "://" + redirect.Host + strings.TrimSuffix(redirect.Path, callbackPath) + "/"
	}
	if secret, ok := api.ReadSecret(d, "signIn", "clientSecretFile", e.ClientSecretFile, "clientSecretEnv", e.ClientSecretEnv, getenv); ok {
		c.ClientSecret = wire.NewToken(secret)
	}
	if key, ok := api.ReadSecret(d, "signIn", "sessionKeyFile", e.SessionKeyFile, "sessionKeyEnv", e.SessionKeyEnv, getenv); ok {
		if key != "" && len(key) < minSessionKey {
			field := "signIn.sessionKeyFile"
			if e.SessionKeyFile == "" {
				field = "signIn.sessionKeyEnv"
			}
			d.Add(field, "the session key is %d bytes; want at least %d random bytes (openssl rand -base64 48)", len(key), minSessionKey)
		}
		c.SessionKey = wire.NewToken(key)
	}
	if c.Label == "" {
		c.Label = "your identity provider"
		if u, err := url.Parse(c.Issuer); err == nil && u.Host != "" {
			c.Label = u.Host
		}
	}
	if c.Scopes == nil {
		c.Scopes = DefaultScopes()
	} else if !slices.Contains(c.Scopes, "openid") {
		d.Add("signIn.scopes", "lacks openid, without which the provider issues no ID token")
	}
	if c.Claim == "" {
		c.Claim = DefaultClaim
	}
	if !e.SessionLifetime.set {
		c.SessionLifetime = DefaultSessionLifetime
	}
	if !e.RefreshBefore.set {
		c.RefreshBefore = DefaultRefreshBefore
	}
	if c.RefreshBefore >= c.SessionLifetime {
		d.Add("signIn.refreshBefore", "is not shorter than sessionLifetime")
	}
	if len(e.Roles) == 0 {
		d.Add("signIn.roles", "missing; without a rule nobody may sign in (an unmapped person has no access)")
	}
	for i, r := range e.Roles {
		field := fmt.Sprintf("signIn.roles[%d]", i)
		if r.Group == "" {
			d.Add(field+".group", "missing; the value of the %s claim this rule grants to", c.Claim)
		}
		if len(r.Claims) > 0 || r.Name != "" {
			d.Add(field, "a sign-in rule has group, role and apps only")
		}
		checkGrant(d, field, r.Role, r.Apps)
		c.Roles = append(c.Roles, GroupRule{Group: r.Group, Role: api.Role(r.Role), Apps: r.Apps})
	}
	return c
}

// callbackPath is the API's route the provider sends browsers back to.
const callbackPath = "/api/v1/auth/oidc/callback"

// checkIssuer records a problem with an issuer URL at field.
func checkIssuer(d *configfile.Document, field, issuer string) {
	u, err := url.Parse(issuer)
	switch {
	case issuer == "":
		d.Add(field, "missing; the issuer URL, as the provider's discovery document names it")
	case err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || (u.Scheme != "https" && !loopback(u)):
		d.Add(field, "want an https:// URL without query or fragment (http:// on loopback only)")
	}
}

// loopback reports whether u is plain http to this host, which a test
// provider, never a real one, serves.
func loopback(u *url.URL) bool {
	h := u.Hostname()
	return u.Scheme == "http" && (h == "localhost" || h == "127.0.0.1" || h == "::1")
}

// checkGrant records problems with a rule's role and application globs.
func checkGrant(d *configfile.Document, field, role string, apps []string) {
	if !api.Role(role).Valid() {
		d.Add(field+".role", "want viewer, deployer or admin, got %q", role)
	}
	for i, g := range apps {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			d.Add(fmt.Sprintf("%s.apps[%d]", field, i), "want a path.Match glob of application names")
		}
	}
}

package gitsource

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"

	"github.com/skep-cd/skep/secret"
)

// CredentialKind says how a Credential authenticates.
type CredentialKind string

const (
	// KindBasic is HTTP basic auth: a user name and a password (or a
	// personal access token used as the password, as GitHub and GitLab want).
	KindBasic CredentialKind = "basic"
	// KindBearer is an HTTP "Authorization: Bearer" token.
	KindBearer CredentialKind = "bearer"
	// KindSSH is an ssh private key, checked against a known_hosts file.
	KindSSH CredentialKind = "ssh"
)

// Credential says how to authenticate to the repositories under one URL
// prefix. It holds only where secrets live (a file path or an environment
// variable name), never a secret: they are read each time a remote is
// contacted, so rotated files take effect without a restart.
type Credential struct {
	URLPrefix                 string // as written in the file
	Username                  string // basic auth user; ssh user (default: the URL's, else "git")
	PasswordFile, PasswordEnv string // basic auth: exactly one
	TokenFile, TokenEnv       string // bearer: exactly one
	SSHKeyFile                string // ssh: PEM or OpenSSH private key
	PassphraseFile            string // ssh: optional key passphrase, at most one of these two
	PassphraseEnv             string
	KnownHostsFile            string // ssh: required

	prefix string // URLPrefix normalised like a repository URL
	source string // "file:line" of the entry, for messages
}

// Kind reports how c authenticates.
func (c Credential) Kind() CredentialKind {
	switch {
	case c.SSHKeyFile != "":
		return KindSSH
	case c.TokenFile != "" || c.TokenEnv != "":
		return KindBearer
	default:
		return KindBasic
	}
}

// secretSource describes where the secret comes from, never what it is.
func (c Credential) secretSource() string {
	for _, s := range []secret.Source{
		secretSource(c.PasswordFile, c.PasswordEnv),
		secretSource(c.TokenFile, c.TokenEnv),
		{File: c.SSHKeyFile},
	} {
		if !s.IsZero() {
			return s.String()
		}
	}
	return ""
}

// String describes c without any secret, e.g.
// "https://git.example.org/team/ basic user=ci secret=file:/run/secrets/p".
func (c Credential) String() string {
	var b strings.Builder
	b.WriteString(RedactURL(c.URLPrefix))
	b.WriteString(" " + string(c.Kind()))
	if c.Username != "" {
		b.WriteString(" user=" + c.Username)
	}
	b.WriteString(" secret=" + c.secretSource())
	return b.String()
}

// LogValue describes c without any secret.
func (c Credential) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("urlPrefix", RedactURL(c.URLPrefix)),
		slog.String("kind", string(c.Kind())),
		slog.String("secret", c.secretSource()),
	}
	if c.Username != "" {
		attrs = append(attrs, slog.String("user", c.Username))
	}
	return slog.GroupValue(attrs...)
}

// Credentials maps repository URL prefixes to credentials; the longest
// matching prefix wins. A loaded value is immutable and safe for concurrent
// use. A nil *Credentials holds none: every remote is contacted anonymously
// (ssh then falls back to go-git's defaults: the ssh agent and
// ~/.ssh/known_hosts).
type Credentials struct {
	list []Credential // longest prefix first
}

// Len reports how many credentials c holds.
func (c *Credentials) Len() int {
	if c == nil {
		return 0
	}
	return len(c.list)
}

// String lists the URL prefixes c covers, without secrets.
func (c *Credentials) String() string {
	if c.Len() == 0 {
		return "no git credentials"
	}
	prefixes := make([]string, len(c.list))
	for i, cr := range c.list {
		prefixes[i] = RedactURL(cr.URLPrefix)
	}
	return fmt.Sprintf("git credentials for %s", strings.Join(prefixes, ", "))
}

// LogValue lists the credentials, without secrets.
func (c *Credentials) LogValue() slog.Value {
	if c.Len() == 0 {
		return slog.GroupValue()
	}
	attrs := make([]slog.Attr, len(c.list))
	for i, cr := range c.list {
		attrs[i] = slog.Any(strconv.Itoa(i), cr)
	}
	return slog.GroupValue(attrs...)
}

// Match returns a copy of the credential with the longest URL prefix that
// covers repo (a repository URL or path in any form Cache accepts).
// Prefixes match whole path segments after normalisation: "https://h/team/"
// and "https://h/team" both cover "https://h/team/app", neither covers
// "https://h/team-b/app"; user names in URLs are ignored when matching.
func (c *Credentials) Match(repo string) (Credential, bool) {
	l, err := parseLocation(repo)
	if err != nil {
		return Credential{}, false
	}
	return c.match(l)
}

// match is Match for a parsed location. The list is sorted longest prefix
// first, so the first hit is the most specific credential.
func (c *Credentials) match(l location) (Credential, bool) {
	if c == nil {
		return Credential{}, false
	}
	for _, cr := range c.list {
		if matchesPrefix(l.match, cr.prefix) {
			return cr, true
		}
	}
	return Credential{}, false
}

// auth reads the secrets c names and builds the go-git auth method for l.
// Errors name the file or variable, never its content.
func (c Credential) auth(l location) (transport.AuthMethod, error) {
	switch c.Kind() {
	case KindBasic:
		p, err := readSecret("password", c.PasswordFile, c.PasswordEnv)
		if err != nil {
			return nil, err
		}
		return &githttp.BasicAuth{Username: c.Username, Password: p}, nil
	case KindBearer:
		t, err := readSecret("token", c.TokenFile, c.TokenEnv)
		if err != nil {
			return nil, err
		}
		return &githttp.TokenAuth{Token: t}, nil
	}
	pass := ""
	if c.PassphraseFile != "" || c.PassphraseEnv != "" {
		p, err := readSecret("passphrase", c.PassphraseFile, c.PassphraseEnv)
		if err != nil {
			return nil, err
		}
		pass = p
	}
	pem, err := os.ReadFile(c.SSHKeyFile)
	if err != nil {
		return nil, fmt.Errorf("ssh key file: %w", err)
	}
	user := c.Username
	if user == "" {
		user = l.user
	}
	if user == "" {
		user = "git"
	}
	keys, err := gitssh.NewPublicKeys(user, pem, pass)
	if err != nil {
		// The parser's message is about the key format; it holds no key bytes.
		return nil, fmt.Errorf("ssh key file %s: %w", c.SSHKeyFile, err)
	}
	hostKeys, err := gitssh.NewKnownHostsCallback(c.KnownHostsFile)
	if err != nil {
		return nil, fmt.Errorf("known hosts file %s: %w", c.KnownHostsFile, err)
	}
	keys.HostKeyCallback = hostKeys
	return keys, nil
}

// readSecret returns the secret in file or in the environment variable
// env, with what it is for in any error.
func readSecret(what, file, env string) (string, error) {
	v, err := secretSource(file, env).Read(os.Getenv)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

// secretSource is where a secret named by a file and an environment
// variable field pair lives; the file wins, as validation allows only one.
func secretSource(file, env string) secret.Source {
	if file != "" {
		return secret.Source{File: file}
	}
	return secret.Source{Env: env}
}

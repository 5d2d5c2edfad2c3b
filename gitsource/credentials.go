package gitsource

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"go.yaml.in/yaml/v3"
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
	for _, s := range []struct{ kind, v string }{
		{"file", c.PasswordFile}, {"env", c.PasswordEnv},
		{"file", c.TokenFile}, {"env", c.TokenEnv}, {"file", c.SSHKeyFile},
	} {
		if s.v != "" {
			return s.kind + ":" + s.v
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

// LoadCredentials reads and parses the credentials file at path (see
// ParseCredentials), then checks that every secret it names can be read, so
// a typo shows at start-up rather than at the first fetch. Every problem is
// reported, each as "path:line: field: message".
func LoadCredentials(path string) (*Credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read git credentials: %w", err)
	}
	c, err := ParseCredentials(path, data)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, cr := range c.list {
		if _, err := cr.auth(location{}); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", cr.source, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// ParseCredentials decodes a credentials document; name (a file name, or
// e.g. "$SKEP_GIT_CREDENTIALS" for a document held in an environment
// variable) prefixes every error. It does no I/O. The schema, strictly
// decoded (unknown keys are errors):
//
//	credentials:
//	  - urlPrefix: https://git.example.org/team/
//	    username: ci
//	    passwordFile: /run/secrets/git-password   # or passwordEnv: GIT_PASSWORD
//	  - urlPrefix: https://git.example.org/other/
//	    tokenFile: /run/secrets/git-token         # or tokenEnv; sent as a Bearer token
//	  - urlPrefix: ssh://git@git.example.org/
//	    sshKeyFile: /run/secrets/id_ed25519
//	    knownHostsFile: /run/secrets/known_hosts
//	    passphraseFile: /run/secrets/passphrase   # optional, or passphraseEnv
//
// Secrets are never written inline: only by absolute file path or by
// environment variable name. An empty document holds no credentials.
func ParseCredentials(name string, data []byte) (*Credentials, error) {
	var doc struct {
		Credentials []struct {
			URLPrefix      string `yaml:"urlPrefix"`
			Username       string `yaml:"username"`
			PasswordFile   string `yaml:"passwordFile"`
			PasswordEnv    string `yaml:"passwordEnv"`
			TokenFile      string `yaml:"tokenFile"`
			TokenEnv       string `yaml:"tokenEnv"`
			SSHKeyFile     string `yaml:"sshKeyFile"`
			PassphraseFile string `yaml:"passphraseFile"`
			PassphraseEnv  string `yaml:"passphraseEnv"`
			KnownHostsFile string `yaml:"knownHostsFile"`
		} `yaml:"credentials"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlError(name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s:%d: want one YAML document, found more", name, extra.Line)
	}
	// A second pass as nodes gives each entry's line; the typed pass above
	// already proved the shape, so this one cannot fail on valid input.
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root)
	lines := entryLines(&root)

	var errs []error
	c := &Credentials{}
	seen := map[string]string{}
	for i, e := range doc.Credentials {
		line := 0
		if i < len(lines) {
			line = lines[i]
		}
		cr := Credential{
			URLPrefix: e.URLPrefix, Username: e.Username,
			PasswordFile: e.PasswordFile, PasswordEnv: e.PasswordEnv,
			TokenFile: e.TokenFile, TokenEnv: e.TokenEnv,
			SSHKeyFile: e.SSHKeyFile, PassphraseFile: e.PassphraseFile, PassphraseEnv: e.PassphraseEnv,
			KnownHostsFile: e.KnownHostsFile,
			source:         fmt.Sprintf("%s:%d", name, line),
		}
		field := fmt.Sprintf("credentials[%d]", i)
		problems := validateCredential(&cr)
		for _, p := range problems {
			errs = append(errs, fmt.Errorf("%s: %s.%s", cr.source, field, p))
		}
		if len(problems) > 0 {
			continue
		}
		if prev, dup := seen[cr.prefix]; dup {
			errs = append(errs, fmt.Errorf("%s: %s.urlPrefix: same prefix as the entry at %s", cr.source, field, prev))
			continue
		}
		seen[cr.prefix] = cr.source
		c.list = append(c.list, cr)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.SliceStable(c.list, func(i, j int) bool { return len(c.list[i].prefix) > len(c.list[j].prefix) })
	return c, nil
}

// validateCredential checks one entry and sets its normalised prefix. Each
// problem reads "field: message". Values of secret-naming fields are never
// echoed: someone may have pasted a secret where its path belongs.
func validateCredential(c *Credential) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	var scheme string
	if c.URLPrefix == "" {
		add("urlPrefix: required")
	} else if l, err := parseLocation(c.URLPrefix); err != nil {
		add("urlPrefix: %v", err)
	} else {
		c.prefix, scheme = l.match, l.scheme
	}

	for _, f := range []struct{ name, v string }{
		{"passwordFile", c.PasswordFile}, {"tokenFile", c.TokenFile}, {"sshKeyFile", c.SSHKeyFile},
		{"passphraseFile", c.PassphraseFile}, {"knownHostsFile", c.KnownHostsFile},
	} {
		if f.v != "" && !filepath.IsAbs(f.v) {
			add("%s: want an absolute path", f.name)
		}
	}
	for _, f := range []struct{ name, v string }{
		{"passwordEnv", c.PasswordEnv}, {"tokenEnv", c.TokenEnv}, {"passphraseEnv", c.PassphraseEnv},
	} {
		if f.v != "" && !envName.MatchString(f.v) {
			add("%s: want an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", f.name)
		}
	}

	password := c.PasswordFile != "" || c.PasswordEnv != ""
	token := c.TokenFile != "" || c.TokenEnv != ""
	sshKey := c.SSHKeyFile != ""
	passphrase := c.PassphraseFile != "" || c.PassphraseEnv != ""
	switch n := btoi(password) + btoi(token) + btoi(sshKey); {
	case n == 0:
		add("want one of passwordFile/passwordEnv, tokenFile/tokenEnv or sshKeyFile")
	case n > 1:
		add("want only one kind of secret: password, token or ssh key")
	}
	if c.PasswordFile != "" && c.PasswordEnv != "" {
		add("passwordEnv: set either passwordFile or passwordEnv")
	}
	if c.TokenFile != "" && c.TokenEnv != "" {
		add("tokenEnv: set either tokenFile or tokenEnv")
	}
	if c.PassphraseFile != "" && c.PassphraseEnv != "" {
		add("passphraseEnv: set either passphraseFile or passphraseEnv")
	}
	if password && c.Username == "" {
		add("username: required with a password")
	}
	if token && c.Username != "" {
		add("username: a bearer token takes no user name; use passwordFile for a token sent as a password")
	}
	if passphrase && !sshKey {
		add("passphraseFile: only used with sshKeyFile")
	}
	if c.KnownHostsFile != "" && !sshKey {
		add("knownHostsFile: only used with sshKeyFile")
	}
	if sshKey && c.KnownHostsFile == "" {
		add("knownHostsFile: required with sshKeyFile (host keys are always checked)")
	}
	if scheme != "" {
		if sshKey && scheme != "ssh" {
			add("sshKeyFile: urlPrefix must be an ssh URL")
		}
		if (password || token) && scheme != "http" && scheme != "https" {
			add("urlPrefix: a password or token needs an http or https URL")
		}
	}
	return problems
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// entryLines returns the line of each item of the top-level credentials list.
func entryLines(root *yaml.Node) []int {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "credentials" && m.Content[i+1].Kind == yaml.SequenceNode {
			lines := make([]int, len(m.Content[i+1].Content))
			for j, n := range m.Content[i+1].Content {
				lines[j] = n.Line
			}
			return lines
		}
	}
	return nil
}

var (
	yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	// yaml quotes offending values in backticks; a value may be a secret
	// pasted in the wrong place, so it never reaches the message.
	yamlValue = regexp.MustCompile("`[^`]*`")
)

// yamlError turns a yaml error into "name:line: message" lines.
func yamlError(name string, err error) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	errs := make([]error, 0, len(msgs))
	for _, m := range msgs {
		m = yamlValue.ReplaceAllString(m, "value")
		if g := yamlLine.FindStringSubmatch(m); g != nil {
			errs = append(errs, fmt.Errorf("%s:%s: %s", name, g[1], g[2]))
		} else {
			errs = append(errs, fmt.Errorf("%s: %s", name, strings.TrimPrefix(m, "yaml: ")))
		}
	}
	return errors.Join(errs...)
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

// readSecret returns the secret in file (trailing newline trimmed) or in
// the environment variable env.
func readSecret(what, file, env string) (string, error) {
	if env != "" {
		v, ok := os.LookupEnv(env)
		if !ok || v == "" {
			return "", fmt.Errorf("%s: environment variable %s is not set", what, env)
		}
		return v, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s file: %w", what, err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s file %s is empty", what, file)
	}
	return s, nil
}

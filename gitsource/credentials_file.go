package gitsource

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"github.com/skep-cd/skep/configfile"
)

// credentialsFile is the schema of a credentials document.
type credentialsFile struct {
	Credentials []credentialEntry `yaml:"credentials"`
}

type credentialEntry struct {
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
}

// LoadCredentials reads and parses the credentials file at path (see
// ParseCredentials), then checks that every secret it names can be read, so
// a typo shows at start-up rather than at the first fetch. Every problem is
// reported, each as "path:line:column: field: message".
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
// variable) starts every error. It does no I/O. The schema, strictly
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
// Every problem is reported at once as configfile.Problems, each line
// "name:line:column: field: message".
func ParseCredentials(name string, data []byte) (*Credentials, error) {
	var doc credentialsFile
	// Values stay out of the decoder's messages: a secret may have been
	// pasted where its file belongs.
	d := configfile.Decode(name, data, &doc, configfile.Options{Want: "a mapping with a credentials list", HideValues: true})
	c := &Credentials{}
	seen := map[string]string{}
	for i, e := range doc.Credentials {
		field := fmt.Sprintf("credentials[%d]", i)
		line, column := d.Position(field)
		cr := Credential{
			URLPrefix: e.URLPrefix, Username: e.Username,
			PasswordFile: e.PasswordFile, PasswordEnv: e.PasswordEnv,
			TokenFile: e.TokenFile, TokenEnv: e.TokenEnv,
			SSHKeyFile: e.SSHKeyFile, PassphraseFile: e.PassphraseFile, PassphraseEnv: e.PassphraseEnv,
			KnownHostsFile: e.KnownHostsFile,
			source:         fmt.Sprintf("%s:%d:%d", name, line, column),
		}
		problems := validateCredential(&cr)
		for _, p := range problems {
			d.Add(field+"."+p.field, "%s", p.msg)
		}
		if len(problems) > 0 {
			continue
		}
		if prev, dup := seen[cr.prefix]; dup {
			d.Add(field+".urlPrefix", "same prefix as the entry at %s", prev)
			continue
		}
		seen[cr.prefix] = cr.source
		c.list = append(c.list, cr)
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	sort.SliceStable(c.list, func(i, j int) bool { return len(c.list[i].prefix) > len(c.list[j].prefix) })
	return c, nil
}

type problem struct{ field, msg string }

// validateCredential checks one entry and sets its normalised prefix.
// Values of secret-naming fields are never echoed: someone may have pasted
// a secret where its path belongs.
func validateCredential(c *Credential) []problem {
	var problems []problem
	add := func(field, format string, args ...any) {
		problems = append(problems, problem{field, fmt.Sprintf(format, args...)})
	}

	var scheme string
	if c.URLPrefix == "" {
		add("urlPrefix", "required")
	} else if l, err := parsePrefix(c.URLPrefix); err != nil {
		add("urlPrefix", "%v", err)
	} else {
		c.prefix, scheme = l.match, l.scheme
	}

	for _, f := range []struct{ name, v string }{
		{"passwordFile", c.PasswordFile}, {"tokenFile", c.TokenFile}, {"sshKeyFile", c.SSHKeyFile},
		{"passphraseFile", c.PassphraseFile}, {"knownHostsFile", c.KnownHostsFile},
	} {
		if f.v != "" && !filepath.IsAbs(f.v) {
			add(f.name, "want an absolute path")
		}
	}
	for _, f := range []struct{ name, v string }{
		{"passwordEnv", c.PasswordEnv}, {"tokenEnv", c.TokenEnv}, {"passphraseEnv", c.PassphraseEnv},
	} {
		if f.v != "" && !envName.MatchString(f.v) {
			add(f.name, "want an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
		}
	}

	password := c.PasswordFile != "" || c.PasswordEnv != ""
	token := c.TokenFile != "" || c.TokenEnv != ""
	sshKey := c.SSHKeyFile != ""
	passphrase := c.PassphraseFile != "" || c.PassphraseEnv != ""
	switch n := btoi(password) + btoi(token) + btoi(sshKey); {
	case n == 0:
		add("urlPrefix", "want one of passwordFile/passwordEnv, tokenFile/tokenEnv or sshKeyFile")
	case n > 1:
		add("urlPrefix", "want one kind of secret: a password, a token or an ssh key")
	}
	if c.PasswordFile != "" && c.PasswordEnv != "" {
		add("passwordEnv", "set either passwordFile or passwordEnv")
	}
	if c.TokenFile != "" && c.TokenEnv != "" {
		add("tokenEnv", "set either tokenFile or tokenEnv")
	}
	if c.PassphraseFile != "" && c.PassphraseEnv != "" {
		add("passphraseEnv", "set either passphraseFile or passphraseEnv")
	}
	if password && c.Username == "" {
		add("username", "required with a password")
	}
	if token && c.Username != "" {
		add("username", "a bearer token takes no user name; for a token sent as a password use passwordFile")
	}
	if passphrase && !sshKey {
		add("passphraseFile", "only used with sshKeyFile")
	}
	if c.KnownHostsFile != "" && !sshKey {
		add("knownHostsFile", "only used with sshKeyFile")
	}
	if sshKey && c.KnownHostsFile == "" {
		add("knownHostsFile", "required with sshKeyFile: host keys are always checked")
	}
	if scheme != "" {
		if sshKey && scheme != "ssh" {
			add("sshKeyFile", "needs an ssh urlPrefix")
		}
		if (password || token) && scheme != "http" && scheme != "https" {
			add("urlPrefix", "a password or token needs an http or https URL")
		}
	}
	return problems
}

// envName is a portable environment variable name (POSIX): a credential
// naming anything else is a typo, not a variable the shell could set.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// btoi is 1 for true, for counting how many of a field pair are set.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

package gitsource

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
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
// Every problem is reported at once, as "name:line:column: field: message".
func ParseCredentials(name string, data []byte) (*Credentials, error) {
	// The node tree gives positions; the typed decode below checks shape.
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(name, nil, err)
	}
	var errs []error
	var doc credentialsFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		// A TypeError leaves the rest decoded: check that too, so every
		// problem is reported at once.
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, yamlError(name, &root, err)
		}
		errs = append(errs, yamlError(name, &root, err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlError(name, nil, err)
		}
		return nil, fmt.Errorf("%s:%d: want one YAML document, found more", name, extra.Line)
	}

	entries := entryNodes(&root)
	c := &Credentials{}
	seen := map[string]string{}
	for i, e := range doc.Credentials {
		var node *yaml.Node
		if i < len(entries) {
			node = entries[i]
		}
		cr := Credential{
			URLPrefix: e.URLPrefix, Username: e.Username,
			PasswordFile: e.PasswordFile, PasswordEnv: e.PasswordEnv,
			TokenFile: e.TokenFile, TokenEnv: e.TokenEnv,
			SSHKeyFile: e.SSHKeyFile, PassphraseFile: e.PassphraseFile, PassphraseEnv: e.PassphraseEnv,
			KnownHostsFile: e.KnownHostsFile,
			source:         name + ":" + position(node, ""),
		}
		problems := validateCredential(&cr)
		for _, p := range problems {
			errs = append(errs, fmt.Errorf("%s:%s: credentials[%d].%s: %s", name, position(node, p.field), i, p.field, p.msg))
		}
		if len(problems) > 0 {
			continue
		}
		if prev, dup := seen[cr.prefix]; dup {
			errs = append(errs, fmt.Errorf("%s:%s: credentials[%d].urlPrefix: same prefix as the entry at %s", name, position(node, "urlPrefix"), i, prev))
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

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// entryNodes returns the items of the top-level credentials list.
func entryNodes(root *yaml.Node) []*yaml.Node {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "credentials" && m.Content[i+1].Kind == yaml.SequenceNode {
			return m.Content[i+1].Content
		}
	}
	return nil
}

// position returns "line:column" of key field in mapping node, or of node
// itself when the field is absent.
func position(node *yaml.Node, field string) string {
	if node == nil {
		return "1:1"
	}
	if node.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(node.Content); i += 2 {
			if k := node.Content[i]; k.Value == field {
				return fmt.Sprintf("%d:%d", k.Line, k.Column)
			}
		}
	}
	return fmt.Sprintf("%d:%d", node.Line, node.Column)
}

var (
	yamlLine     = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	yamlUnknown  = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
	yamlMismatch = regexp.MustCompile(`^cannot unmarshal (!!\w+) .* into (\S+)$`)
)

var yamlTags = map[string]string{
	"!!str": "a string", "!!int": "a number", "!!float": "a number", "!!bool": "a boolean",
	"!!seq": "a list", "!!map": "a mapping", "!!null": "nothing", "!!binary": "binary data",
	"!!timestamp": "a timestamp",
}

var goTypes = map[string]string{
	"[]gitsource.credentialEntry": "a list of credentials",
	"gitsource.credentialEntry":   "a mapping of credential fields",
	"gitsource.credentialsFile":   "a mapping with the key credentials",
	"string":                      "a string",
}

// yamlError turns a yaml error into "name:line:column: field: message"
// lines. yaml quotes offending values; a value may be a secret pasted in
// the wrong place, so none reaches the message.
func yamlError(name string, root *yaml.Node, err error) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	errs := make([]error, 0, len(msgs))
	for _, m := range msgs {
		g := yamlLine.FindStringSubmatch(m)
		if g == nil {
			errs = append(errs, fmt.Errorf("%s: %s", name, strings.TrimPrefix(m, "yaml: ")))
			continue
		}
		line, _ := strconv.Atoi(g[1])
		msg := g[2]
		if u := yamlUnknown.FindStringSubmatch(msg); u != nil {
			msg = "unknown field"
		} else if u := yamlMismatch.FindStringSubmatch(msg); u != nil {
			want, got := goTypes[u[2]], yamlTags[u[1]]
			if want == "" {
				want = "another type"
			}
			if got == "" {
				got = "a value of another type"
			}
			msg = fmt.Sprintf("want %s, got %s", want, got)
		}
		where, col := fieldAt(root, line)
		if where == "" {
			errs = append(errs, fmt.Errorf("%s:%d: %s", name, line, msg))
			continue
		}
		errs = append(errs, fmt.Errorf("%s:%d:%d: %s: %s", name, line, col, where, msg))
	}
	return errors.Join(errs...)
}

// fieldAt returns the field path and column of the first key or list item
// on line, in document order.
func fieldAt(root *yaml.Node, line int) (string, int) {
	if root == nil || len(root.Content) == 0 {
		return "", 0
	}
	var walk func(n *yaml.Node, path string) (string, int)
	walk = func(n *yaml.Node, path string) (string, int) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if k.Line == line {
					return p, k.Column
				}
				if w, c := walk(v, p); w != "" {
					return w, c
				}
			}
		case yaml.SequenceNode:
			for i, item := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				if item.Line == line && item.Kind != yaml.MappingNode {
					return p, item.Column
				}
				if w, c := walk(item, p); w != "" {
					return w, c
				}
			}
		}
		return "", 0
	}
	return walk(root.Content[0], "")
}

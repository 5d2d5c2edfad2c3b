package gitsource

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func errorLines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

func TestParseCredentialsReportsEveryProblemWithItsPosition(t *testing.T) {
	cases := []struct {
		name, doc string
		want      []string
	}{
		{
			name: "empty document holds no credentials",
			doc:  "",
		},
		{
			name: "misspelled key with the other entries' problems",
			doc: `credentials:
  - urlPrefix: https://git.example.org/team/
    usernme: ci
    passwordFile: /run/secrets/p
  - urlPrefix: https://git.example.org/other/
    tokenFile: relative/token
`,
			want: []string{
				"c.yaml:2:5: credentials[0].username: required with a password",
				"c.yaml:3:5: credentials[0].usernme: unknown key; want one of urlPrefix, username, passwordFile, passwordEnv, tokenFile, tokenEnv, sshKeyFile, passphraseFile, passphraseEnv, knownHostsFile",
				"c.yaml:6:16: credentials[1].tokenFile: want an absolute path",
			},
		},
		{
			name: "credentials is not a list",
			doc:  "credentials: hunter2\n",
			want: []string{"c.yaml:1:14: credentials: want a list, got a string"},
		},
		{
			name: "unknown top-level key",
			doc:  "credentials: []\nsecrets: {}\n",
			want: []string{"c.yaml:2:1: secrets: unknown key; want one of credentials"},
		},
		{
			name: "no secret at all",
			doc:  "credentials:\n  - urlPrefix: https://h/x\n",
			want: []string{"c.yaml:2:16: credentials[0].urlPrefix: want one of passwordFile/passwordEnv, tokenFile/tokenEnv or sshKeyFile"},
		},
		{
			name: "two kinds of secret and both sources of one",
			doc: `credentials:
  - urlPrefix: https://h/x
    username: ci
    passwordFile: /p
    passwordEnv: P
    tokenEnv: T
`,
			want: []string{
				"c.yaml:2:16: credentials[0].urlPrefix: want one kind of secret: a password, a token or an ssh key",
				"c.yaml:3:15: credentials[0].username: a bearer token takes no user name; for a token sent as a password use passwordFile",
				"c.yaml:5:18: credentials[0].passwordEnv: set either passwordFile or passwordEnv",
			},
		},
		{
			name: "ssh key without known hosts and on an https prefix",
			doc: `credentials:
  - urlPrefix: https://h/x
    sshKeyFile: /k
`,
			want: []string{
				"c.yaml:2:5: credentials[0].knownHostsFile: required with sshKeyFile: host keys are always checked",
				"c.yaml:3:17: credentials[0].sshKeyFile: needs an ssh urlPrefix",
			},
		},
		{
			name: "password for an ssh prefix",
			doc:  "credentials:\n  - urlPrefix: ssh://git@h/\n    username: u\n    passwordEnv: P\n",
			want: []string{"c.yaml:2:16: credentials[0].urlPrefix: a password or token needs an http or https URL"},
		},
		{
			name: "bad environment variable name",
			doc:  "credentials:\n  - urlPrefix: https://h/\n    tokenEnv: 1-TOKEN\n",
			want: []string{"c.yaml:3:15: credentials[0].tokenEnv: want an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"},
		},
		{
			name: "duplicate prefix after normalisation",
			doc: `credentials:
  - urlPrefix: https://h/team/
    tokenEnv: A
  - urlPrefix: HTTPS://H:443/team
    tokenEnv: B
`,
			want: []string{"c.yaml:4:16: credentials[1].urlPrefix: same prefix as the entry at c.yaml:2:5"},
		},
		{
			name: "password in the prefix URL",
			doc:  "credentials:\n  - urlPrefix: https://u:hunter2@h/\n    tokenEnv: A\n",
			want: []string{`c.yaml:2:16: credentials[0].urlPrefix: repository URL "https://h/": a password in the URL is not allowed: put it in the credentials file`},
		},
		{
			name: "two documents",
			doc:  "credentials: []\n---\ncredentials: []\n",
			want: []string{"c.yaml:2:1: a second YAML document; a file holds one"},
		},
		{
			name: "syntax error",
			doc:  "credentials: [\n",
			want: []string{"c.yaml:1: invalid YAML: did not find expected node content"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCredentials("c.yaml", []byte(tc.doc))
			if diff := cmp.Diff(tc.want, errorLines(err)); diff != "" {
				t.Errorf("ParseCredentials errors (-want +got):\n%s", diff)
			}
			if (c == nil) == (err == nil) {
				t.Errorf("ParseCredentials = %v, %v: want exactly one of a value and an error", c, err)
			}
		})
	}
}

func TestErrorsNeverEchoAValuePastedWhereAPathBelongs(t *testing.T) {
	docs := []string{
		"credentials:\n  - urlPrefix: https://h/\n    username: u\n    passwordFile: hunter2\n",
		"credentials:\n  - urlPrefix: https://h/\n    username: u\n    passwordFile: [hunter2]\n",
		"credentials:\n  - urlPrefix: https://h/\n    tokenEnv: hunter2!\n",
		"credentials: hunter2\n",
		"hunter2: 1\n",
	}
	for _, doc := range docs {
		_, err := ParseCredentials("c.yaml", []byte(doc))
		if err == nil {
			t.Fatalf("ParseCredentials(%q) succeeded, want an error", doc)
		}
		if strings.Contains(err.Error(), "hunter2") && !strings.HasPrefix(doc, "hunter2") {
			t.Errorf("ParseCredentials(%q) error %q echoes the value", doc, err)
		}
	}
}

func TestMatchPicksTheLongestPrefixOnPathSegments(t *testing.T) {
	c := mustCredentials(t, `credentials:
  - urlPrefix: https://git.example.org/
    tokenEnv: HOST
  - urlPrefix: https://git.example.org/team
    tokenEnv: TEAM
  - urlPrefix: https://git.example.org/team/special/
    tokenEnv: SPECIAL
  - urlPrefix: ssh://git@git.example.org/
    sshKeyFile: /k
    knownHostsFile: /kh
`)
	cases := []struct {
		repo string
		want string // the matching tokenEnv, "ssh", or "" for none
	}{
		{"https://git.example.org/team/app.git", "TEAM"},
		{"https://git.example.org/team", "TEAM"},
		{"https://git.example.org/team/special/app", "SPECIAL"},
		{"https://git.example.org/team-b/app", "HOST"},
		{"https://GIT.example.org:443/team/app", "TEAM"},
		{"https://ci@git.example.org/team/app", "TEAM"},
		{"https://git.example.org.evil.test/team/app", ""},
		{"http://git.example.org/team/app", ""},
		{"https://git.example.org:8443/team/app", ""},
		{"ssh://git.example.org/team/app", "ssh"},
		{"git@git.example.org:team/app.git", "ssh"},
		{"/srv/git/app", ""},
		{"not a url ://", ""},
	}
	for _, tc := range cases {
		t.Run(tc.repo, func(t *testing.T) {
			got := ""
			if cr, ok := c.Match(tc.repo); ok {
				got = cr.TokenEnv
				if cr.Kind() == KindSSH {
					got = "ssh"
				}
			}
			if got != tc.want {
				t.Errorf("Match(%q) = %q, want %q", tc.repo, got, tc.want)
			}
		})
	}
	var none *Credentials
	if _, ok := none.Match("https://git.example.org/team/app"); ok {
		t.Error("nil Credentials matched a repository")
	}
}

func TestCredentialTextNeverHoldsTheSecret(t *testing.T) {
	dir := t.TempDir()
	const secret = "pa55-w0rd-value"
	passwordFile := writeFile(t, dir, "password", secret+"\n")
	tokenFile := writeFile(t, dir, "token", secret)
	t.Setenv("SKEP_TEST_SECRET", secret)
	credsFile := writeFile(t, dir, "credentials.yaml", fmt.Sprintf(`credentials:
  - urlPrefix: https://git.example.org/team/
    username: ci
    passwordFile: %s
  - urlPrefix: https://git.example.org/env/
    username: ci
    passwordEnv: SKEP_TEST_SECRET
  - urlPrefix: https://git.example.org/token/
    tokenFile: %s
`, passwordFile, tokenFile))
	c, err := LoadCredentials(credsFile)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&logs, nil), slog.NewTextHandler(&logs, nil)} {
		slog.New(h).Info("credentials", "all", c)
		for _, repo := range []string{"https://git.example.org/team/a", "https://git.example.org/env/a", "https://git.example.org/token/a"} {
			cr, ok := c.Match(repo)
			if !ok {
				t.Fatalf("Match(%s) found nothing", repo)
			}
			slog.New(h).Info("credential", "credential", cr)
			fmt.Fprintf(&logs, "%v %+v %#v %s\n", cr, cr, cr, cr)
			auth, err := cr.auth(location{})
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&logs, "%v %s\n", auth, auth)
		}
	}
	fmt.Fprintf(&logs, "%v %s\n", c, c)
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the secret appears in log or print output:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "file:"+passwordFile) || !strings.Contains(logs.String(), "env:SKEP_TEST_SECRET") {
		t.Errorf("output does not say where the secrets come from:\n%s", logs.String())
	}
}

func TestLoadCredentialsChecksThatEverySecretCanBeRead(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	empty := writeFile(t, dir, "empty", "\n")
	key := writeFile(t, dir, "key", "not a key")
	known := writeFile(t, dir, "known_hosts", "")
	path := writeFile(t, dir, "credentials.yaml", fmt.Sprintf(`credentials:
  - urlPrefix: https://h/a
    username: ci
    passwordFile: %s
  - urlPrefix: https://h/b
    tokenEnv: SKEP_TEST_UNSET_VARIABLE
  - urlPrefix: https://h/c
    tokenFile: %s
  - urlPrefix: ssh://h/
    sshKeyFile: %s
    knownHostsFile: %s
`, missing, empty, key, known))
	_, err := LoadCredentials(path)
	want := []string{
		path + ":2:5: password: read secret file: open " + missing + ": no such file or directory",
		path + ":5:5: token: environment variable SKEP_TEST_UNSET_VARIABLE is not set or empty",
		path + ":7:5: token: secret file " + empty + " is empty",
		path + ":9:5: ssh key file " + key + ": ssh: no key found",
	}
	if diff := cmp.Diff(want, errorLines(err)); diff != "" {
		t.Errorf("LoadCredentials errors (-want +got):\n%s", diff)
	}
	if _, err := LoadCredentials(filepath.Join(dir, "nope.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadCredentials(missing file) error = %v, want not exist", err)
	}
}

// FuzzParseCredentials checks that any input gives either an error or a
// valid value: every entry is found again by its own prefix, and printing
// it works.
func FuzzParseCredentials(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "credentials", "*.yaml"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no fuzz seeds in testdata/credentials: %v", err)
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCredentials("fuzz.yaml", data)
		if err != nil {
			if c != nil {
				t.Fatalf("got both a value and an error: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Errorf("error %q does not start with the file name", err)
			}
			return
		}
		_ = c.String()
		for _, cr := range c.list {
			if cr.prefix == "" || cr.secretSource() == "" {
				t.Errorf("accepted an entry without a prefix or a secret: %+v", cr)
			}
			got, ok := c.match(location{match: cr.prefix})
			if !ok || got.prefix != cr.prefix {
				t.Errorf("entry %q is not found by its own prefix: got %q", cr.prefix, got.prefix)
			}
			_ = cr.String()
		}
	})
}

package notify

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/golden"
	"github.com/skep-cd/skep/secret"
)

func TestLoadConfigReadsEveryField(t *testing.T) {
	cfg, err := LoadConfig("testdata/notifications/valid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	two, zero := 2, 0
	file := "testdata/notifications/valid.yaml"
	want := Config{File: file, Notifiers: []NotifierConfig{
		{
			Name: "production-alerts",
			Webhook: &WebhookConfig{
				URL:    SecretRef{Source: secret.Source{Env: "SKEP_TEST_PROD_URL"}, Origin: file + ":6:12: notifiers[0].webhook.url"},
				Secret: &SecretRef{Source: secret.Source{File: "testdata/notifications/secrets/hmac"}, Origin: file + ":7:15: notifiers[0].webhook.secret"},
			},
			Match:    Match{Swarms: []string{"prod*"}, Types: []EventType{SyncFailed, PruneFailed, ResourcesPruned}},
			Suppress: 10 * time.Minute, Timeout: 5 * time.Second, Retries: &two, Backoff: 500 * time.Millisecond, Queue: 64,
		},
		{
			Name: "staging-chat",
			Shoutrrr: &ShoutrrrConfig{
				URL:   SecretRef{Source: secret.Source{File: "/run/secrets/slack-url"}, Origin: file + ":18:12: notifiers[1].shoutrrr.url"},
				Title: "{{.Application}}", Template: "{{.Type}} {{short .Revision}}",
			},
			Match:   Match{Swarms: []string{"staging"}, Applications: []string{"web-*", "api"}},
			Retries: &zero,
		},
		{
			Name: "gitlab-status",
			Forge: &ForgeConfig{
				Provider: GitLab, URL: "https://gitlab.example.org/api/v4",
				Token:        SecretRef{Source: secret.Source{File: "testdata/notifications/secrets/gitlab-token"}, Origin: file + ":29:14: notifiers[2].forge.token"},
				Repositories: map[string]string{"web": "platform/web", "api-*": "4711"},
				Context:      "skep/{{.Swarm}}/{{.Application}}", TargetURL: "https://skep.example.org/applications/{{.Application}}",
			},
			Match: Match{Types: []EventType{SyncStarted, SyncSucceeded, SyncFailed}},
		},
	}}
	if d := cmp.Diff(want, cfg); d != "" {
		t.Errorf("LoadConfig (-want +got):\n%s", d)
	}
}

func TestParseConfigAcceptsSmallFiles(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       int
	}{
		{name: "a single notifier with defaults", file: "minimal.yaml", want: 1},
		{name: "an empty notifier list", file: "empty-list.yaml", want: 0},
		{name: "anchors under an x- key", file: "aliases.yaml", want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := LoadConfig(filepath.Join("testdata/notifications", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Notifiers) != tc.want {
				t.Errorf("%d notifiers, want %d", len(cfg.Notifiers), tc.want)
			}
		})
	}
}

func TestParseConfigReportsEveryProblemWithItsPosition(t *testing.T) {
	data, err := os.ReadFile("testdata/notifications/invalid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ParseConfig("invalid.yaml", data)
	var errs configfile.Problems
	if !errors.As(err, &errs) {
		t.Fatalf("ParseConfig = %v, want configfile.Problems", err)
	}
	golden.Check(t, "testdata/notifications/invalid.errors", []byte(errs.Error()+"\n"))
}

func TestParseConfigRefusesBadDocuments(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{name: "an empty file", yaml: "", want: "f.yaml: empty; want apiVersion, kind and notifiers"},
		{name: "broken yaml names its line", yaml: "apiVersion: skep/v1\nnotifiers: [\n", want: "f.yaml:2: invalid YAML: did not find expected node content"},
		{name: "a list at the top", yaml: "- a\n", want: "f.yaml:1:1: want a mapping with apiVersion, kind and notifiers, got a list"},
		{name: "a repeated key", yaml: "apiVersion: skep/v1\nkind: Notifications\nkind: Notifications\n", want: "f.yaml:3:1: kind: key written twice; first at line 2"},
		{name: "a merged notifier is checked like a written one", yaml: "apiVersion: skep/v1\nkind: Notifications\nnotifiers:\n  - <<: {name: a}\n", want: "f.yaml:4:5: notifiers[0]: want one of webhook, shoutrrr or forge"},
		{name: "a secret from both", yaml: "apiVersion: skep/v1\nkind: Notifications\nnotifiers:\n  - name: a\n    webhook: {url: {env: A, file: b}}\n",
			want: "f.yaml:5:20: notifiers[0].webhook.url: want exactly one of file or env"},
		{name: "retries out of range", yaml: "apiVersion: skep/v1\nkind: Notifications\nnotifiers:\n  - name: a\n    webhook: {url: {env: A}}\n    retries: 99\n",
			want: "f.yaml:6:14: notifiers[0].retries: want a whole number from 0 to 20, got \"99\""},
		{name: "a negative duration", yaml: "apiVersion: skep/v1\nkind: Notifications\nnotifiers:\n  - name: a\n    webhook: {url: {env: A}}\n    timeout: -1s\n",
			want: "notifiers[0].timeout: want a non-negative duration"},
		{name: "a string where a list goes", yaml: "apiVersion: skep/v1\nkind: Notifications\nnotifiers:\n  - name: a\n    webhook: {url: {env: A}}\n    match: {types: sync-failed}\n",
			want: "notifiers[0].match.types: want a list, got \"sync-failed\""},
		{name: "nested aliases past the budget", yaml: billionLaughs(), want: "document too large or too deeply aliased"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("f.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("ParseConfig accepted it")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseConfig = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// billionLaughs is a short file whose aliases make the parser visit far
// more nodes than it holds: many notifiers aliasing one that aliases a
// long list.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString("apiVersion: skep/v1\nkind: Notifications\nx-apps: &apps [")
	for i := range 1000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("a")
	}
	b.WriteString("]\nx-n: &n {name: a, webhook: {url: {env: A}}, match: {applications: *apps}}\nnotifiers: [")
	for i := range 200 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("*n")
	}
	b.WriteString("]\n")
	return b.String()
}

func TestBuildReadsSecretsFromFilesAndEnvironment(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("url", "http://127.0.0.1:9/hook\n")
	write("empty", "\n")
	t.Setenv("SKEP_TEST_HOOK_URL", "http://127.0.0.1:9/hook")
	t.Setenv("SKEP_TEST_HOOK_SECRET", "hmac-key-value")
	t.Setenv("SKEP_TEST_CHAT_URL", "generic+http://127.0.0.1:9/chat")
	parse := func(t *testing.T, body string) Config {
		t.Helper()
		cfg, err := ParseConfig(filepath.Join(dir, "n.yaml"), []byte("apiVersion: skep/v1\nkind: Notifications\nnotifiers:\n"+body))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	for _, tc := range []struct {
		name      string
		body      string
		wantNames []string
		wantErrs  []string
	}{
		{
			name: "secrets from a relative file and from the environment build both kinds",
			body: "  - name: hook\n    webhook: {url: {file: url}, secret: {env: SKEP_TEST_HOOK_SECRET}}\n" +
				"  - name: chat\n    shoutrrr: {url: {env: SKEP_TEST_CHAT_URL}}\n",
			wantNames: []string{"hook", "chat"},
		},
		{
			name: "every unreadable secret is reported with its position",
			body: "  - name: a\n    webhook: {url: {env: SKEP_TEST_UNSET_VARIABLE}}\n" +
				"  - name: b\n    webhook: {url: {file: missing}}\n" +
				"  - name: c\n    webhook: {url: {file: empty}}\n" +
				"  - name: d\n    webhook: {url: {env: SKEP_TEST_HOOK_SECRET}}\n",
			wantErrs: []string{
				"n.yaml:5:20: notifiers[0].webhook.url: environment variable SKEP_TEST_UNSET_VARIABLE is not set",
				"n.yaml:7:20: notifiers[1].webhook.url: read secret file",
				"n.yaml:9:20: notifiers[2].webhook.url: secret file " + filepath.Join(dir, "empty") + " is empty",
				"n.yaml:11:20: notifiers[3].webhook.url: webhook d: url is not an absolute http or https URL",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, err := Build(parse(t, tc.body), slog.New(slog.DiscardHandler))
			if len(tc.wantErrs) > 0 {
				if err == nil || ns != nil {
					t.Fatalf("Build = %v, %v; want an error and no notifiers", ns, err)
				}
				for _, want := range tc.wantErrs {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error lacks %q:\n%v", want, err)
					}
				}
				if strings.Contains(err.Error(), "hmac-key-value") {
					t.Errorf("error names a secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, n := range ns {
				names = append(names, n.(Named).Name())
			}
			if d := cmp.Diff(tc.wantNames, names); d != "" {
				t.Errorf("notifiers (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseConfigRefusesBadForgeNotifiers(t *testing.T) {
	const head = "apiVersion: skep/v1\nkind: Notifications\nnotifiers:\n  - name: f\n    forge:\n"
	const good = "      provider: github\n      url: https://api.github.com\n      token: {file: t}\n      repositories: {web: acme/web}\n"
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{name: "an unknown key names its line", yaml: good + "      branch: main\n",
			want: []string{"f.yaml:10:7: notifiers[0].forge.branch: unknown key; want one of provider, url, token, repositories, context, targetURL"}},
		{name: "a missing token", yaml: "      provider: github\n      url: https://api.github.com\n      repositories: {web: acme/web}\n",
			want: []string{"f.yaml:6:7: notifiers[0].forge.token: missing; name a file or an env var holding the API token"}},
		{name: "an inline token is refused without echoing it", yaml: "      provider: github\n      url: https://api.github.com\n      token: ghp_inline\n      repositories: {web: acme/web}\n",
			want: []string{"f.yaml:8:14: notifiers[0].forge.token: inline secrets are refused"}},
		{name: "an unknown provider", yaml: "      provider: bitbucket\n      url: https://api.example.org\n      token: {env: T}\n      repositories: {web: acme/web}\n",
			want: []string{`f.yaml:6:17: notifiers[0].forge.provider: want github, gitlab or gitea (also for Forgejo), got "bitbucket"`}},
		{name: "a repository that is not a string", yaml: "      provider: github\n      url: https://api.github.com\n      token: {env: T}\n      repositories:\n        web: {owner: acme}\n",
			want: []string{"f.yaml:10:14: notifiers[0].forge.repositories.web: want a string, got a mapping"}},
		{name: "a repository not in the provider's form and a bad glob", yaml: "      provider: github\n      url: https://api.github.com\n      token: {env: T}\n      repositories: {web: acme, \"[x\": a/b}\n",
			want: []string{`f.yaml:9:27: notifiers[0].forge.repositories.web: want owner/name, got "acme"`,
				`f.yaml:9:39: notifiers[0].forge.repositories.[x: bad glob "[x"`}},
		{name: "no repositories and no url", yaml: "      provider: gitea\n      token: {env: T}\n",
			want: []string{"notifiers[0].forge.url: missing", "notifiers[0].forge.repositories: missing"}},
		{name: "a url with credentials", yaml: "      provider: gitea\n      url: https://u:p@gitea.example.org/api/v1\n      token: {env: T}\n      repositories: {web: acme/web}\n",
			want: []string{"f.yaml:7:12: notifiers[0].forge.url: carries credentials"}},
		{name: "a template naming no field", yaml: good + "      context: \"{{.Branch}}\"\n",
			want: []string{"f.yaml:10:16: notifiers[0].forge.context: template: "}},
		{name: "a forge beside a webhook", yaml: good + "    webhook: {url: {env: A}}\n",
			want: []string{"f.yaml:4:5: notifiers[0]: want one of webhook, shoutrrr or forge, not more"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("f.yaml", []byte(head+tc.yaml))
			if err == nil {
				t.Fatal("ParseConfig accepted it")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("ParseConfig = %v\nwant it to contain %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "ghp_inline") {
				t.Errorf("ParseConfig echoes the inline token: %v", err)
			}
		})
	}
}

func TestBuildMakesAForgeWithItsTokenAndPreviews(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("glpat-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(filepath.Join(dir, "n.yaml"), []byte("apiVersion: skep/v1\nkind: Notifications\nnotifiers:\n"+
		"  - name: lab\n    forge: {provider: gitlab, url: https://gitlab.example.org/api/v4, token: {file: token}, repositories: {web: \"12\"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	lookup := previews{}
	ns, err := BuildOptions{Logger: slog.New(slog.DiscardHandler), Previews: lookup}.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := ns[0].(*Forge)
	if f.token != "glpat-value" || f.provider != GitLab || f.previews == nil || f.Name() != "lab" {
		t.Errorf("Build made provider %s, previews %v, name %s, token read %v", f.provider, f.previews, f.Name(), f.token == "glpat-value")
	}
}

func TestBuildTurnsZeroRetriesIntoNone(t *testing.T) {
	t.Setenv("SKEP_TEST_HOOK_URL", "http://127.0.0.1:9/hook")
	cfg, err := ParseConfig("n.yaml", []byte("apiVersion: skep/v1\nkind: Notifications\nnotifiers:\n"+
		"  - name: none\n    webhook: {url: {env: SKEP_TEST_HOOK_URL}}\n    retries: 0\n"+
		"  - name: default\n    webhook: {url: {env: SKEP_TEST_HOOK_URL}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := Build(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if got := ns[0].(*Webhook).out.d.Retries; got != 0 {
		t.Errorf("retries: 0 gave %d retries, want none", got)
	}
	if got := ns[1].(*Webhook).out.d.Retries; got != 3 {
		t.Errorf("no retries key gave %d retries, want the default 3", got)
	}
}

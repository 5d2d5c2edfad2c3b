package notify

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/secret"
)

// ConfigAPIVersion is the apiVersion a notifications file declares.
const ConfigAPIVersion = "skep/v1"

// ConfigKind is the kind a notifications file declares.
const ConfigKind = "Notifications"

// Config is a loaded notifications file: the outbound notifiers the
// controller adds to the log notifier and the event stream. It is immutable
// once loaded; Build turns it into notifiers.
//
//	apiVersion: skep/v1
//	kind: Notifications
//	notifiers:
//	  - name: production-alerts
//	    webhook:
//	      url: {env: PROD_WEBHOOK_URL}
//	      secret: {file: /run/secrets/prod-webhook-hmac}
//	    match: {swarms: ["prod*"], types: [sync-failed, prune-failed]}
//	    suppress: 10m
//	  - name: staging-chat
//	    shoutrrr:
//	      url: {file: slack-url}        # relative to this file
//	      template: "{{.Application}}: {{.Type}}"
//	    match: {swarms: [staging]}
//	  - name: github-status
//	    forge:
//	      provider: github
//	      url: https://api.github.com
//	      token: {file: /run/secrets/github-token}
//	      repositories: {web: acme/web, "api-*": acme/api}
//
// Secrets (URLs, tokens, HMAC keys) are never written inline: each names a
// file or an environment variable, read by Build.
type Config struct {
	// File is the name the configuration was loaded under.
	File string
	// Notifiers are in file order; Build keeps that order.
	Notifiers []NotifierConfig
}

// NotifierConfig is one outbound notifier: exactly one of Webhook,
// Shoutrrr and Forge is set.
type NotifierConfig struct {
	// Name labels the notifier in logs and metrics; unique in the file.
	Name     string
	Webhook  *WebhookConfig
	Shoutrrr *ShoutrrrConfig
	Forge    *ForgeConfig
	// Match selects the events sent; the zero value sends all.
	Match Match
	// IncidentWindow is Delivery's: nil means its default, 0 off.
	IncidentWindow *time.Duration
	// Suppress, Queue, Timeout and Backoff are Delivery's; zero means its
	// default.
	Suppress time.Duration
	Queue    int
	Timeout  time.Duration
	Backoff  time.Duration
	// Retries is nil when not set (Delivery's default); 0 means none.
	Retries *int
}

// WebhookConfig is a generic webhook (Webhook).
type WebhookConfig struct {
	// URL names where the receiver's URL is kept: it often embeds a token.
	URL SecretRef
	// Secret, when set, names the HMAC key that signs each body.
	Secret *SecretRef
}

// ShoutrrrConfig is a chat or e-mail provider (Chat).
type ShoutrrrConfig struct {
	// URL names where the shoutrrr service URL is kept; it carries the
	// provider's credentials.
	URL SecretRef
	// Title and Template are message templates (ParseTemplate); empty
	// means DefaultTitle and DefaultTemplate.
	Title, Template string
}

// ForgeConfig is a forge's commit statuses and preview comments (Forge);
// the fields are ForgeOptions'.
type ForgeConfig struct {
	Provider ForgeProvider
	// URL is the API's base URL; it is not a secret and may not carry one.
	URL string
	// Token names where the API token is kept.
	Token SecretRef
	// Repositories maps application names or globs to repositories. The
	// map is the loaded configuration's: callers must not change it.
	Repositories       map[string]string
	Context, TargetURL string
}

// SecretRef is a secret.Source as a notifications file names it: exactly
// one of File and Env. A File written relative is made relative to the
// configuration file's directory.
type SecretRef struct {
	secret.Source
	// Origin locates the reference in its file, for errors: "file:line:col:
	// field".
	Origin string
}

// Read returns the secret. It fails on a missing or empty file or variable;
// the error starts with Origin and names the reference, never the secret.
func (r SecretRef) Read() (string, error) {
	v, err := r.Source.Read(os.Getenv)
	if err != nil {
		return "", fmt.Errorf("%s: %w", r.Origin, err)
	}
	return v, nil
}

// LoadConfig reads and validates the notifications file at path.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("load notifications: %w", err)
	}
	return ParseConfig(path, data)
}

// configDoc is the file form of a notifications file, as configfile
// decodes it; ParseConfig validates it and turns it into a Config.
type configDoc struct {
	APIVersion string        `yaml:"apiVersion"`
	Kind       string        `yaml:"kind"`
	Notifiers  []notifierDoc `yaml:"notifiers"`
}

type notifierDoc struct {
	Name     string       `yaml:"name"`
	Webhook  *webhookDoc  `yaml:"webhook"`
	Shoutrrr *shoutrrrDoc `yaml:"shoutrrr"`
	Forge    *forgeDoc    `yaml:"forge"`
	Match    matchDoc     `yaml:"match"`
	Suppress duration     `yaml:"suppress"`
	Queue    *int         `yaml:"queue"`
	Timeout  duration     `yaml:"timeout"`
	Backoff  duration     `yaml:"backoff"`
	Retries  *int         `yaml:"retries"`
	// IncidentWindow is nil when the file gives none.
	IncidentWindow *duration `yaml:"incidentWindow"`
}

type webhookDoc struct {
	URL    *secretDoc `yaml:"url"`
	Secret *secretDoc `yaml:"secret"`
}

type shoutrrrDoc struct {
	URL      *secretDoc `yaml:"url"`
	Title    string     `yaml:"title"`
	Template string     `yaml:"template"`
}

type forgeDoc struct {
	Provider     string            `yaml:"provider"`
	URL          string            `yaml:"url"`
	Token        *secretDoc        `yaml:"token"`
	Repositories map[string]string `yaml:"repositories"`
	Context      string            `yaml:"context"`
	TargetURL    string            `yaml:"targetURL"`
}

type matchDoc struct {
	Types        []string `yaml:"types"`
	Swarms       []string `yaml:"swarms"`
	Applications []string `yaml:"applications"`
}

// duration is a non-negative time.Duration written as "30s" or "10m".
type duration time.Duration

// UnmarshalYAML accepts what time.ParseDuration accepts, if not negative.
func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil || v < 0 {
		return fmt.Errorf("want a non-negative duration like 30s or 10m, got %s", configfile.Describe(n))
	}
	*d = duration(v)
	return nil
}

// secretDoc is a secret reference, {file: PATH} or {env: NAME}.
type secretDoc secret.Source

// envName is what an environment variable's name may be.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// UnmarshalYAML accepts a mapping with exactly one of file and env. A
// scalar is refused without being echoed: it is most likely the secret.
func (s *secretDoc) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		return errors.New("inline secrets are refused; write {file: PATH} or {env: NAME}")
	case yaml.MappingNode:
	default:
		return fmt.Errorf("want {file: PATH} or {env: NAME}, got %s", configfile.Describe(n))
	}
	var out secretDoc
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		if k.Value != "file" && k.Value != "env" {
			return fmt.Errorf("unknown key %s; want file or env", configfile.Quote(k.Value))
		}
		if seen[k.Value] {
			return fmt.Errorf("key %s written twice", k.Value)
		}
		seen[k.Value] = true
		if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
			return fmt.Errorf("%s: want a string, got %s", k.Value, configfile.Describe(v))
		}
		if k.Value == "file" {
			out.File = v.Value
		} else {
			out.Env = v.Value
		}
	}
	switch {
	case seen["file"] == seen["env"]:
		return errors.New("want exactly one of file or env")
	case seen["file"] && out.File == "":
		return errors.New("file: want a path, got an empty string")
	case seen["env"] && !envName.MatchString(out.Env):
		return fmt.Errorf("env: want an environment variable name, got %s", configfile.Quote(out.Env))
	}
	*s = out
	return nil
}

// ParseConfig validates a notifications file read from name. It reports
// every problem at once, as configfile.Problems, and reads no secret.
func ParseConfig(name string, data []byte) (Config, error) {
	var doc configDoc
	d := configfile.Decode(name, data, &doc, configfile.Options{Want: "a mapping with apiVersion, kind and notifiers"})
	if d.Empty() {
		d.Add("", "empty; want apiVersion, kind and notifiers")
		return Config{}, d.Err()
	}
	switch {
	case !d.Present("apiVersion"):
		d.Add("apiVersion", "missing; want %s", ConfigAPIVersion)
	case doc.APIVersion != ConfigAPIVersion:
		d.Add("apiVersion", "want %s, got %q", ConfigAPIVersion, doc.APIVersion)
	}
	switch {
	case !d.Present("kind"):
		d.Add("kind", "missing; want %s", ConfigKind)
	case doc.Kind != ConfigKind:
		d.Add("kind", "want %s, got %q", ConfigKind, doc.Kind)
	}
	cfg := Config{File: name}
	names := map[string]string{}
	for i, n := range doc.Notifiers {
		field := fmt.Sprintf("notifiers[%d]", i)
		if first, dup := names[n.Name]; dup && n.Name != "" {
			d.Add(field+".name", "name %q already used by %s", n.Name, first)
		}
		names[n.Name] = field
		cfg.Notifiers = append(cfg.Notifiers, notifier(d, field, n))
	}
	if err := d.Err(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// notifierName is what a notifier's name may be: it labels metrics.
var notifierName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// notifier validates the decoded notifier at field and converts it,
// recording problems in d.
func notifier(d *configfile.Document, field string, n notifierDoc) NotifierConfig {
	nc := NotifierConfig{
		Name: n.Name, Suppress: time.Duration(n.Suppress), Timeout: time.Duration(n.Timeout),
		Backoff: time.Duration(n.Backoff), Retries: n.Retries,
	}
	if n.IncidentWindow != nil {
		w := time.Duration(*n.IncidentWindow)
		nc.IncidentWindow = &w
	}
	switch {
	case !d.Present(field + ".name"):
		d.Add(field+".name", "missing")
	case !notifierName.MatchString(n.Name):
		d.Add(field+".name", "want a DNS label (lower-case letters, digits and '-', at most 63), got %q", n.Name)
	}
	switch kinds := btoi(n.Webhook != nil) + btoi(n.Shoutrrr != nil) + btoi(n.Forge != nil); {
	case kinds == 0:
		d.Add(field, "want one of webhook, shoutrrr or forge")
	case kinds > 1:
		d.Add(field, "want one of webhook, shoutrrr or forge, not more")
	}
	if w := n.Webhook; w != nil {
		nc.Webhook = &WebhookConfig{URL: secretRef(d, field+".webhook.url", w.URL)}
		if w.URL == nil {
			d.Add(field+".webhook.url", "missing; name a file or an env var holding the URL")
		}
		if w.Secret != nil {
			s := secretRef(d, field+".webhook.secret", w.Secret)
			nc.Webhook.Secret = &s
		}
	}
	if c := n.Shoutrrr; c != nil {
		nc.Shoutrrr = &ShoutrrrConfig{URL: secretRef(d, field+".shoutrrr.url", c.URL), Title: c.Title, Template: c.Template}
		if c.URL == nil {
			d.Add(field+".shoutrrr.url", "missing; name a file or an env var holding the shoutrrr URL")
		}
		checkTemplate(d, field+".shoutrrr.title", c.Title)
		checkTemplate(d, field+".shoutrrr.template", c.Template)
	}
	if f := n.Forge; f != nil {
		nc.Forge = forge(d, field+".forge", f)
	}
	if n.Queue != nil {
		if *n.Queue < 1 || *n.Queue > 100_000 {
			d.Add(field+".queue", "want a whole number from 1 to 100000, got %q", strconv.Itoa(*n.Queue))
		}
		nc.Queue = *n.Queue
	}
	if n.Retries != nil && (*n.Retries < 0 || *n.Retries > 20) {
		d.Add(field+".retries", "want a whole number from 0 to 20, got %q", strconv.Itoa(*n.Retries))
	}
	nc.Match = match(d, field+".match", n.Match)
	return nc
}

// btoi is 1 for true.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// forge validates the decoded forge notifier at field and converts it.
func forge(d *configfile.Document, field string, f *forgeDoc) *ForgeConfig {
	fc := &ForgeConfig{Provider: ForgeProvider(f.Provider), URL: f.URL, Token: secretRef(d, field+".token", f.Token),
		Repositories: f.Repositories, Context: f.Context, TargetURL: f.TargetURL}
	switch {
	case !d.Present(field + ".provider"):
		d.Add(field+".provider", "missing; want github, gitlab or gitea")
	case !slices.Contains(ForgeProviders(), fc.Provider):
		d.Add(field+".provider", "want github, gitlab or gitea (also for Forgejo), got %q", f.Provider)
	}
	u, err := url.Parse(f.URL)
	switch {
	case !d.Present(field + ".url"):
		d.Add(field+".url", "missing; want the API's base URL, such as https://api.github.com")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		d.Add(field+".url", "want an absolute http or https URL, got %q", f.URL)
	case u.User != nil:
		d.Add(field+".url", "carries credentials; name the token under token instead")
	}
	if f.Token == nil {
		d.Add(field+".token", "missing; name a file or an env var holding the API token")
	}
	if len(f.Repositories) == 0 {
		d.Add(field+".repositories", "missing; map application names or globs to repositories")
	}
	for _, app := range slices.Sorted(maps.Keys(f.Repositories)) {
		at := field + ".repositories." + app
		if _, err := path.Match(app, ""); err != nil {
			d.Add(at, "bad glob %q: %s", app, err)
		}
		if slices.Contains(ForgeProviders(), fc.Provider) {
			if err := CheckRepository(fc.Provider, f.Repositories[app]); err != nil {
				d.Add(at, "%s", err)
			}
		}
	}
	checkTemplate(d, field+".context", f.Context)
	checkTemplate(d, field+".targetURL", f.TargetURL)
	return fc
}

// secretRef turns a decoded reference at field into a SecretRef; nil (the
// key was absent or null) gives a SecretRef naming nothing.
func secretRef(d *configfile.Document, field string, s *secretDoc) SecretRef {
	line, column := d.Position(field)
	ref := SecretRef{Origin: fmt.Sprintf("%s:%d:%d: %s", d.File(), line, column, field)}
	if s == nil {
		return ref
	}
	ref.Source = secret.Source(*s)
	if ref.File != "" && !filepath.IsAbs(ref.File) {
		ref.File = filepath.Join(filepath.Dir(d.File()), ref.File)
	}
	return ref
}

// sampleEvent is what templates are tried on at load, so a misspelt field
// is reported with its line rather than at the first send.
var sampleEvent = Event{Application: "web", Type: SyncFailed, Revision: "0123456789abcdef", Message: "m",
	At: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), Swarm: "s", Actor: "a"}

// checkTemplate parses and trial-runs the template at field, if the file
// set it, and files any error under field.
func checkTemplate(d *configfile.Document, field, text string) {
	if !d.Present(field) {
		return
	}
	t, err := ParseTemplate(field, text)
	if err == nil {
		err = t.Execute(discard{}, sampleEvent)
	}
	if err != nil {
		d.Add(field, "%s", err)
	}
}

// discard is the writer a template's trial run renders into.
type discard struct{}

// Write implements io.Writer, keeping nothing.
func (discard) Write(b []byte) (int, error) { return len(b), nil }

// match checks a match key, filing each unknown type and bad glob under
// its own index so that every mistake is reported at once.
func match(d *configfile.Document, field string, m matchDoc) Match {
	var out Match
	for i, s := range m.Types {
		if !slices.Contains(Types(), EventType(s)) {
			d.Add(fmt.Sprintf("%s.types[%d]", field, i), "unknown event type %q; want one of %s", s, typeList())
			continue
		}
		out.Types = append(out.Types, EventType(s))
	}
	globs := func(key string, list []string) []string {
		for i, g := range list {
			if _, err := path.Match(g, ""); err != nil {
				d.Add(fmt.Sprintf("%s.%s[%d]", field, key, i), "bad glob %q: %s", g, err)
			}
		}
		return list
	}
	out.Swarms = globs("swarms", m.Swarms)
	out.Applications = globs("applications", m.Applications)
	return out
}

// typeList is the event types for a message, comma-separated.
func typeList() string {
	var s []string
	for _, t := range Types() {
		s = append(s, string(t))
	}
	return strings.Join(s, ", ")
}

// Build makes the notifiers cfg describes, as BuildOptions.Build does with
// only a Logger.
func Build(cfg Config, logger *slog.Logger) ([]Notifier, error) {
	return BuildOptions{Logger: logger}.Build(cfg)
}

// BuildOptions is what notifiers built from a file get from the controller
// rather than the file. The zero value logs to slog.Default and gives forge
// notifiers no PreviewLookup.
type BuildOptions struct {
	// Logger receives the notifiers' logs.
	Logger *slog.Logger
	// Previews tells forge notifiers which events are about previews.
	Previews PreviewLookup
	// Transport carries the requests of webhook and forge notifiers,
	// redirects included; nil means http.DefaultTransport. The controller
	// passes its egress policy's. Chat notifiers cannot take one: shoutrrr
	// gives most of its services http.DefaultClient.
	Transport http.RoundTripper
}

// client is the HTTP client of a notifier Build makes: one each, so none
// shares another's redirect state; nil without a Transport (the
// notifier's default).
func (o BuildOptions) client() *http.Client {
	if o.Transport == nil {
		return nil
	}
	return &http.Client{Transport: o.Transport}
}

// Build makes the notifiers cfg describes, reading their secrets. It reports
// every problem at once; on error it returns no notifiers. The notifiers
// deliver once the caller runs them (RunAll).
func (o BuildOptions) Build(cfg Config) ([]Notifier, error) {
	logger := o.Logger
	var (
		out  []Notifier
		errs []error
	)
	for _, nc := range cfg.Notifiers {
		d := Delivery{Match: nc.Match, Suppress: nc.Suppress, Queue: nc.Queue, Timeout: nc.Timeout, Backoff: nc.Backoff}
		if w := nc.IncidentWindow; w != nil {
			d.IncidentWindow = *w
			if *w == 0 {
				d.IncidentWindow = -1
			}
		}
		if nc.Retries != nil {
			d.Retries = *nc.Retries
			if d.Retries == 0 {
				d.Retries = -1
			}
		}
		switch {
		case nc.Webhook != nil:
			url, err := nc.Webhook.URL.Read()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			var key []byte
			if nc.Webhook.Secret != nil {
				s, err := nc.Webhook.Secret.Read()
				if err != nil {
					errs = append(errs, err)
					continue
				}
				key = []byte(s)
			}
			w, err := NewWebhook(WebhookOptions{Name: nc.Name, URL: url, Secret: key, Delivery: d, Logger: logger, Client: o.client()})
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", nc.Webhook.URL.Origin, err))
				continue
			}
			out = append(out, w)
		case nc.Shoutrrr != nil:
			url, err := nc.Shoutrrr.URL.Read()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			c, err := NewChat(ChatOptions{Name: nc.Name, URL: url, Title: nc.Shoutrrr.Title, Template: nc.Shoutrrr.Template, Delivery: d, Logger: logger})
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", nc.Shoutrrr.URL.Origin, err))
				continue
			}
			out = append(out, c)
		case nc.Forge != nil:
			token, err := nc.Forge.Token.Read()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			// A commit status belongs to each application's own commit,
			// whatever cause it shares with others.
			d.IncidentWindow = -1
			f, err := NewForge(ForgeOptions{Name: nc.Name, Provider: nc.Forge.Provider, URL: nc.Forge.URL, Token: Token(token),
				Repositories: nc.Forge.Repositories, Context: nc.Forge.Context, TargetURL: nc.Forge.TargetURL,
				Previews: o.Previews, Delivery: d, Logger: logger, Client: o.client()})
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", nc.Forge.Token.Origin, err))
				continue
			}
			out = append(out, f)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("build notifiers from %s: %w", cfg.File, errors.Join(errs...))
	}
	return out, nil
}

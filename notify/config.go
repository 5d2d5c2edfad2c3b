package notify

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
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
//
// Secrets (URLs, tokens, HMAC keys) are never written inline: each names a
// file or an environment variable, read by Build.
type Config struct {
	// File is the name the configuration was loaded under.
	File      string
	Notifiers []NotifierConfig
}

// NotifierConfig is one outbound notifier: exactly one of Webhook and
// Shoutrrr is set.
type NotifierConfig struct {
	Name     string
	Webhook  *WebhookConfig
	Shoutrrr *ShoutrrrConfig
	Match    Match
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
	URL SecretRef
	// Secret, when set, names the HMAC key that signs each body.
	Secret *SecretRef
}

// ShoutrrrConfig is a chat or e-mail provider (Chat).
type ShoutrrrConfig struct {
	URL SecretRef
	// Title and Template are message templates (ParseTemplate); empty
	// means DefaultTitle and DefaultTemplate.
	Title, Template string
}

// SecretRef names where a secret is read from: exactly one of File and Env.
type SecretRef struct {
	// File is a path, made relative to the configuration file's directory
	// when it was written relative. Its content, trailing white space
	// trimmed, is the secret.
	File string
	// Env is an environment variable's name.
	Env string
	// Origin locates the reference in its file, for errors: "file:line:col:
	// field".
	Origin string
}

// Read returns the secret. It fails on a missing or empty file or variable;
// the error names the reference, never the secret.
func (r SecretRef) Read() (string, error) {
	var v string
	switch {
	case r.File != "":
		b, err := os.ReadFile(r.File)
		if err != nil {
			return "", fmt.Errorf("%s: read secret file: %w", r.Origin, err)
		}
		v = strings.TrimRight(string(b), " \t\r\n")
	case r.Env != "":
		var ok bool
		if v, ok = os.LookupEnv(r.Env); !ok {
			return "", fmt.Errorf("%s: environment variable %s is not set", r.Origin, r.Env)
		}
		v = strings.TrimSpace(v)
	default:
		return "", fmt.Errorf("%s: no file or env named", r.Origin)
	}
	if v == "" {
		return "", fmt.Errorf("%s: secret is empty", r.Origin)
	}
	return v, nil
}

// ConfigError is one problem in a notifications file.
type ConfigError struct {
	File string
	// Line and Column are 1-based; 0 when unknown.
	Line, Column int
	// Field is the value's path, like notifiers[1].match.swarms[0].
	Field   string
	Message string
}

// Error formats e as file:line:col: field: message.
func (e ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Message)
	return b.String()
}

// ConfigErrors is every problem found in a notifications file, in file
// order. LoadConfig and ParseConfig return it; find it with errors.As.
type ConfigErrors []ConfigError

// Error lists the problems, one per line.
func (es ConfigErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// LoadConfig reads and validates the notifications file at path.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("load notifications: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig validates a notifications file read from name. It reports
// every problem at once, as ConfigErrors, and reads no secret.
func ParseConfig(name string, data []byte) (Config, error) {
	p := &configParser{file: name, budget: configNodeBudget}
	cfg := Config{File: name}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, msg := yamlError(err)
		return Config{}, ConfigErrors{{File: name, Line: line, Message: msg}}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return Config{}, ConfigErrors{{File: name, Message: "empty file; want apiVersion, kind and notifiers"}}
	}
	p.document(doc.Content[0], &cfg)
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b ConfigError) int {
			if a.Line != b.Line {
				return a.Line - b.Line
			}
			return a.Column - b.Column
		})
		return Config{}, p.errs
	}
	return cfg, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// yamlError splits yaml.v3's "yaml: line N: message" into N and message.
func yamlError(err error) (int, string) {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n, msg[len(m[0]):]
	}
	return 0, msg
}

// configNodeBudget bounds the nodes a file may make the parser visit,
// aliases expanded, so a small file of nested aliases costs little.
const configNodeBudget = 100_000

type configParser struct {
	file   string
	errs   ConfigErrors
	budget int
}

func (p *configParser) add(n *yaml.Node, field, format string, args ...any) {
	e := ConfigError{File: p.file, Field: field, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	p.errs = append(p.errs, e)
}

func (p *configParser) origin(n *yaml.Node, field string) string {
	return fmt.Sprintf("%s:%d:%d: %s", p.file, n.Line, n.Column, field)
}

// resolve follows aliases and spends the budget; nil means stop.
func (p *configParser) resolve(n *yaml.Node, field string) *yaml.Node {
	for depth := 0; n != nil && n.Kind == yaml.AliasNode; depth++ {
		if depth > 100 {
			p.add(n, field, "alias chain too deep")
			return nil
		}
		n = n.Alias
	}
	p.budget--
	if p.budget == -1 {
		p.add(n, field, "document too large or too deeply aliased: more than %d nodes", configNodeBudget)
	}
	if p.budget < 0 || n == nil {
		return nil
	}
	return n
}

// fields walks a mapping, reporting unknown and repeated keys, and calls
// each known key's handler with its value.
func (p *configParser) fields(n *yaml.Node, field string, handlers map[string]func(v *yaml.Node, field string)) {
	if n = p.resolve(n, field); n == nil {
		return
	}
	if n.Kind != yaml.MappingNode {
		p.add(n, field, "want a mapping, got %s", describeNode(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		sub := joinField(field, key)
		if k.Kind != yaml.ScalarNode {
			p.add(k, field, "want a string key, got %s", describeNode(k))
			continue
		}
		if key == "<<" {
			p.add(k, field, "merge keys are not supported")
			continue
		}
		h, ok := handlers[key]
		if !ok && field == "" && strings.HasPrefix(key, "x-") {
			continue // an extension field at the top: a home for anchors
		}
		if !ok {
			p.add(k, sub, "unknown key; want one of %s", strings.Join(sortedKeys(handlers), ", "))
			continue
		}
		if seen[key] {
			p.add(k, sub, "repeated key")
			continue
		}
		seen[key] = true
		h(v, sub)
	}
}

func (p *configParser) str(n *yaml.Node, field string, out *string) bool {
	if n = p.resolve(n, field); n == nil {
		return false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		p.add(n, field, "want a string, got %s", describeNode(n))
		return false
	}
	*out = n.Value
	return true
}

func (p *configParser) strs(n *yaml.Node, field string, check func(v *yaml.Node, field, s string) bool) []string {
	if n = p.resolve(n, field); n == nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.add(n, field, "want a list, got %s", describeNode(n))
		return nil
	}
	var out []string
	for i, item := range n.Content {
		sub := fmt.Sprintf("%s[%d]", field, i)
		var s string
		if p.str(item, sub, &s) && check(item, sub, s) {
			out = append(out, s)
		}
	}
	return out
}

func (p *configParser) duration(n *yaml.Node, field string, out *time.Duration) {
	var s string
	if !p.str(n, field, &s) {
		return
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		p.add(n, field, "want a non-negative duration like 30s or 10m, got %q", s)
		return
	}
	*out = d
}

func (p *configParser) integer(n *yaml.Node, field string, lo, hi int, out *int) bool {
	if n = p.resolve(n, field); n == nil {
		return false
	}
	v, err := strconv.Atoi(n.Value)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || err != nil || v < lo || v > hi {
		p.add(n, field, "want a whole number from %d to %d, got %s", lo, hi, describeNode(n))
		return false
	}
	*out = v
	return true
}

func (p *configParser) document(n *yaml.Node, cfg *Config) {
	var apiVersion, kind string
	var sawVersion, sawKind bool
	var notifiers *yaml.Node
	p.fields(n, "", map[string]func(*yaml.Node, string){
		"apiVersion": func(v *yaml.Node, f string) {
			sawVersion = true
			if p.str(v, f, &apiVersion) && apiVersion != ConfigAPIVersion {
				p.add(v, f, "want %s, got %q", ConfigAPIVersion, apiVersion)
			}
		},
		"kind": func(v *yaml.Node, f string) {
			sawKind = true
			if p.str(v, f, &kind) && kind != ConfigKind {
				p.add(v, f, "want %s, got %q", ConfigKind, kind)
			}
		},
		"notifiers": func(v *yaml.Node, f string) { notifiers = v },
	})
	if n.Kind == yaml.MappingNode || n.Kind == yaml.AliasNode {
		if !sawVersion {
			p.add(n, "apiVersion", "missing; want %s", ConfigAPIVersion)
		}
		if !sawKind {
			p.add(n, "kind", "missing; want %s", ConfigKind)
		}
	}
	if notifiers == nil {
		return
	}
	list := p.resolve(notifiers, "notifiers")
	if list == nil {
		return
	}
	if list.Kind != yaml.SequenceNode {
		p.add(list, "notifiers", "want a list, got %s", describeNode(list))
		return
	}
	names := map[string]string{}
	for i, item := range list.Content {
		field := fmt.Sprintf("notifiers[%d]", i)
		nc, ok := p.notifier(item, field)
		if first, dup := names[nc.Name]; dup && nc.Name != "" {
			p.add(item, field+".name", "name %q already used by %s", nc.Name, first)
			continue
		}
		names[nc.Name] = field
		if ok {
			cfg.Notifiers = append(cfg.Notifiers, nc)
		}
	}
}

// notifierName is what a notifier's name may be: it labels metrics.
var notifierName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func (p *configParser) notifier(n *yaml.Node, field string) (NotifierConfig, bool) {
	before := len(p.errs)
	var nc NotifierConfig
	var sawName bool
	p.fields(n, field, map[string]func(*yaml.Node, string){
		"name": func(v *yaml.Node, f string) {
			sawName = true
			if p.str(v, f, &nc.Name) && !notifierName.MatchString(nc.Name) {
				p.add(v, f, "want a DNS label (lower-case letters, digits and '-', at most 63), got %q", nc.Name)
			}
		},
		"webhook": func(v *yaml.Node, f string) {
			nc.Webhook = &WebhookConfig{}
			p.fields(v, f, map[string]func(*yaml.Node, string){
				"url": func(v *yaml.Node, f string) { nc.Webhook.URL = p.secret(v, f) },
				"secret": func(v *yaml.Node, f string) {
					s := p.secret(v, f)
					nc.Webhook.Secret = &s
				},
			})
			if nc.Webhook.URL.Origin == "" && isMapping(v) {
				p.add(v, f+".url", "missing; name a file or an env var holding the URL")
			}
		},
		"shoutrrr": func(v *yaml.Node, f string) {
			nc.Shoutrrr = &ShoutrrrConfig{}
			p.fields(v, f, map[string]func(*yaml.Node, string){
				"url":      func(v *yaml.Node, f string) { nc.Shoutrrr.URL = p.secret(v, f) },
				"title":    func(v *yaml.Node, f string) { p.template(v, f, &nc.Shoutrrr.Title) },
				"template": func(v *yaml.Node, f string) { p.template(v, f, &nc.Shoutrrr.Template) },
			})
			if nc.Shoutrrr.URL.Origin == "" && isMapping(v) {
				p.add(v, f+".url", "missing; name a file or an env var holding the shoutrrr URL")
			}
		},
		"match":    func(v *yaml.Node, f string) { nc.Match = p.match(v, f) },
		"suppress": func(v *yaml.Node, f string) { p.duration(v, f, &nc.Suppress) },
		"queue":    func(v *yaml.Node, f string) { p.integer(v, f, 1, 100_000, &nc.Queue) },
		"timeout":  func(v *yaml.Node, f string) { p.duration(v, f, &nc.Timeout) },
		"backoff":  func(v *yaml.Node, f string) { p.duration(v, f, &nc.Backoff) },
		"retries": func(v *yaml.Node, f string) {
			var r int
			if p.integer(v, f, 0, 20, &r) {
				nc.Retries = &r
			}
		},
	})
	if r := p.resolve(n, field); r != nil && r.Kind == yaml.MappingNode {
		if !sawName {
			p.add(r, field+".name", "missing")
		}
		switch {
		case nc.Webhook == nil && nc.Shoutrrr == nil:
			p.add(r, field, "want one of webhook or shoutrrr")
		case nc.Webhook != nil && nc.Shoutrrr != nil:
			p.add(r, field, "want one of webhook or shoutrrr, not both")
		}
	}
	return nc, len(p.errs) == before
}

// envName is what an environment variable's name may be.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (p *configParser) secret(n *yaml.Node, field string) SecretRef {
	ref := SecretRef{Origin: p.origin(n, field)}
	r := p.resolve(n, field)
	if r == nil {
		return ref
	}
	if r.Kind == yaml.ScalarNode {
		p.add(r, field, "inline secrets are refused; write {file: PATH} or {env: NAME}")
		return ref
	}
	var sawFile, sawEnv bool
	p.fields(r, field, map[string]func(*yaml.Node, string){
		"file": func(v *yaml.Node, f string) {
			sawFile = true
			if p.str(v, f, &ref.File) {
				if ref.File == "" {
					p.add(v, f, "want a path, got an empty string")
				} else if !filepath.IsAbs(ref.File) {
					ref.File = filepath.Join(filepath.Dir(p.file), ref.File)
				}
			}
		},
		"env": func(v *yaml.Node, f string) {
			sawEnv = true
			if p.str(v, f, &ref.Env) && !envName.MatchString(ref.Env) {
				p.add(v, f, "want an environment variable name, got %q", ref.Env)
			}
		},
	})
	if r.Kind == yaml.MappingNode && sawFile == sawEnv {
		p.add(r, field, "want exactly one of file or env")
	}
	return ref
}

// sampleEvent is what templates are tried on at load, so a misspelt field
// is reported with its line rather than at the first send.
var sampleEvent = Event{Application: "web", Type: SyncFailed, Revision: "0123456789abcdef", Message: "m",
	At: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), Swarm: "s", Actor: "a"}

func (p *configParser) template(n *yaml.Node, field string, out *string) {
	if !p.str(n, field, out) {
		return
	}
	t, err := ParseTemplate(field, *out)
	if err == nil {
		err = t.Execute(discard{}, sampleEvent)
	}
	if err != nil {
		p.add(n, field, "%s", err)
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

func (p *configParser) match(n *yaml.Node, field string) Match {
	var m Match
	glob := func(v *yaml.Node, f, s string) bool {
		if _, err := path.Match(s, ""); err != nil {
			p.add(v, f, "bad glob %q: %s", s, err)
			return false
		}
		return true
	}
	p.fields(n, field, map[string]func(*yaml.Node, string){
		"types": func(v *yaml.Node, f string) {
			for _, s := range p.strs(v, f, func(v *yaml.Node, f, s string) bool {
				if !slices.Contains(Types(), EventType(s)) {
					p.add(v, f, "unknown event type %q; want one of %s", s, typeList())
					return false
				}
				return true
			}) {
				m.Types = append(m.Types, EventType(s))
			}
		},
		"swarms":       func(v *yaml.Node, f string) { m.Swarms = p.strs(v, f, glob) },
		"applications": func(v *yaml.Node, f string) { m.Applications = p.strs(v, f, glob) },
	})
	return m
}

func typeList() string {
	var s []string
	for _, t := range Types() {
		s = append(s, string(t))
	}
	return strings.Join(s, ", ")
}

func isMapping(n *yaml.Node) bool {
	for depth := 0; n != nil && n.Kind == yaml.AliasNode && depth < 100; depth++ {
		n = n.Alias
	}
	return n != nil && n.Kind == yaml.MappingNode
}

func joinField(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing"
		}
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return strconv.Quote(v)
	}
	return "an unexpected node"
}

// Build makes the notifiers cfg describes, reading their secrets. It reports
// every problem at once; on error it returns no notifiers. The notifiers
// deliver once the caller runs them (RunAll); they log to logger.
func Build(cfg Config, logger *slog.Logger) ([]Notifier, error) {
	var (
		out  []Notifier
		errs []error
	)
	for _, nc := range cfg.Notifiers {
		d := Delivery{Match: nc.Match, Suppress: nc.Suppress, Queue: nc.Queue, Timeout: nc.Timeout, Backoff: nc.Backoff}
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
			w, err := NewWebhook(WebhookOptions{Name: nc.Name, URL: url, Secret: key, Delivery: d, Logger: logger})
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
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("build notifiers from %s: %w", cfg.File, errors.Join(errs...))
	}
	return out, nil
}

package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"text/template"

	"github.com/nicholas-fedor/shoutrrr"
	"github.com/nicholas-fedor/shoutrrr/pkg/router"
	"github.com/nicholas-fedor/shoutrrr/pkg/types"
)

// DefaultTemplate is the chat message text when a notifier sets none.
// An event about a swarm rather than an application (swarm-unreachable)
// has no application, and the text leaves it out rather than say nothing.
const DefaultTemplate = `{{.Type}}{{with .Application}}: {{.}}{{end}}{{with .Swarm}} on swarm {{.}}{{end}}` +
	`{{with .Revision}} at {{short .}}{{end}}{{with .Actor}} by {{.}}{{end}}{{with .Message}}: {{.}}{{end}}`

// DefaultTitle is the chat message title, for providers that show one.
const DefaultTitle = `skep: {{with .Application}}{{.}} {{end}}{{.Type}}`

// ParseTemplate parses a chat message template: Go text/template over an
// Event, with the functions short (a revision's first 7 characters) and
// json (the event's wire JSON). Unknown fields are errors when parsed
// templates execute, not here.
func ParseTemplate(name, text string) (*template.Template, error) {
	t, err := template.New(name).Option("missingkey=error").Funcs(template.FuncMap{
		"short": func(rev string) string { return rev[:min(len(rev), 7)] },
		"json": func(e Event) (string, error) {
			b, err := MarshalWire(e)
			return string(b), err
		},
	}).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parse template %s: %w", name, err)
	}
	return t, nil
}

// ChatOptions configures a Chat notifier.
type ChatOptions struct {
	// Name identifies the notifier in logs and metrics.
	Name string
	// URL is a shoutrrr service URL (slack://, discord://, teams://,
	// telegram://, smtp://, generic+https:// and the others shoutrrr
	// supports). It is a secret: it never appears in a log line or an error.
	URL string
	// Title and Template are the message's title and text (ParseTemplate).
	// Empty means DefaultTitle and DefaultTemplate.
	Title, Template string
	// Delivery sets routing, suppression, queue, timeout and retries.
	Delivery Delivery
	// Logger receives a Warn line per event not delivered. Default
	// slog.Default().
	Logger *slog.Logger
}

// Chat sends each event as a message through a chat or e-mail provider,
// by way of github.com/nicholas-fedor/shoutrrr. Notify never blocks: events
// queue and are sent by Run, with retries as Webhook does. Build it with
// NewChat; it is safe for concurrent use.
//
// A provider that never answers holds a goroutine inside shoutrrr, which
// has no cancellation: each attempt is abandoned after Delivery.Timeout,
// but its goroutine lives until the connection fails.
type Chat struct {
	out     *outbound
	sender  *router.ServiceRouter
	title   *template.Template
	text    *template.Template
	secrets []string
}

// NewChat returns a chat notifier. It fails on a URL shoutrrr cannot use or
// a template that does not parse; the error does not contain the URL.
func NewChat(opts ChatOptions) (*Chat, error) {
	if opts.Title == "" {
		opts.Title = DefaultTitle
	}
	if opts.Template == "" {
		opts.Template = DefaultTemplate
	}
	c := &Chat{secrets: secretParts(opts.URL)}
	var err error
	if c.title, err = ParseTemplate("title", opts.Title); err != nil {
		return nil, fmt.Errorf("chat %s: %w", opts.Name, err)
	}
	if c.text, err = ParseTemplate("template", opts.Template); err != nil {
		return nil, fmt.Errorf("chat %s: %w", opts.Name, err)
	}
	if c.sender, err = shoutrrr.CreateSender(opts.URL); err != nil {
		return nil, fmt.Errorf("chat %s: url: %w", opts.Name, c.redact(err))
	}
	c.out = newOutbound(opts.Name, opts.Delivery, opts.Logger, c.send)
	c.sender.Timeout = c.out.d.Timeout
	return c, nil
}

// Name implements Named.
func (c *Chat) Name() string { return c.out.Name() }

// Notify implements Notifier: it routes, suppresses and queues e.
func (c *Chat) Notify(ctx context.Context, e Event) { c.out.Notify(ctx, e) }

// Run implements Runner: it sends queued events until ctx is done.
func (c *Chat) Run(ctx context.Context) error { return c.out.Run(ctx) }

// Stats implements Counted.
func (c *Chat) Stats() Stats { return c.out.Stats() }

// Message returns the title and text e is sent with.
func (c *Chat) Message(e Event) (title, text string, err error) {
	var b strings.Builder
	if err := c.title.Execute(&b, e); err != nil {
		return "", "", fmt.Errorf("render title: %w", err)
	}
	title = b.String()
	b.Reset()
	if err := c.text.Execute(&b, e); err != nil {
		return "", "", fmt.Errorf("render message: %w", err)
	}
	return title, b.String(), nil
}

// send makes one attempt. A template that fails on this event fails on
// every retry too, so it is permanent. shoutrrr's Send takes no context,
// so Delivery.Timeout and shutdown cannot cut an attempt short.
func (c *Chat) send(_ context.Context, e Event) error {
	title, text, err := c.Message(e)
	if err != nil {
		return permanentError{err}
	}
	params := types.Params{}
	params.SetTitle(title)
	for _, err := range c.sender.Send(text, &params) {
		if err != nil {
			return fmt.Errorf("send: %w", c.redact(err))
		}
	}
	return nil
}

// redact returns err's text with every secret part of the URL cut out.
// shoutrrr's errors quote the URL, and HTTP errors name the endpoint it
// derived from it, whose path is often the token.
func (c *Chat) redact(err error) error {
	msg := err.Error()
	for _, s := range c.secrets {
		msg = strings.ReplaceAll(msg, s, "[redacted]")
	}
	return errors.New(msg)
}

// secretParts lists the substrings of a provider URL that may carry a
// credential, longest first so a part is cut before its pieces: the URL
// itself, its user and password, host, path segments and query values.
func secretParts(raw string) []string {
	parts := []string{raw}
	if u, err := url.Parse(raw); err == nil {
		if u.User != nil {
			parts = append(parts, u.User.String(), u.User.Username())
			if p, ok := u.User.Password(); ok {
				parts = append(parts, p)
			}
		}
		parts = append(parts, u.Host)
		parts = append(parts, strings.Split(u.Path, "/")...)
		for _, vs := range u.Query() {
			parts = append(parts, vs...)
		}
	}
	var out []string
	for _, p := range parts {
		// Short parts ("1", "yes") are too common to be secrets and would
		// shred the message.
		if len(p) >= 4 {
			out = append(out, p)
			if esc := url.PathEscape(p); esc != p {
				out = append(out, esc)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

var _ interface {
	Notifier
	Runner
	Named
	Counted
} = (*Chat)(nil)

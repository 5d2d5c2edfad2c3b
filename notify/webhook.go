package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
)

// SignatureHeader carries a webhook body's signature: "sha256=" followed by
// the lower-case hex HMAC-SHA256 of the exact body bytes under the shared
// secret. A receiver recomputes it over the body it read and compares in
// constant time (hmac.Equal).
const SignatureHeader = "X-Skep-Signature"

// EventHeader carries the event type, so a receiver can route before
// parsing the body.
const EventHeader = "X-Skep-Event"

// Sign returns the SignatureHeader value of body under secret.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// WebhookOptions configures a Webhook.
type WebhookOptions struct {
	// Name identifies the notifier in logs and metrics.
	Name string
	// URL is where events are POSTed, http or https. It is a secret (such
	// URLs carry tokens): it never appears in a log line or an error.
	URL string
	// Secret, when not empty, signs each body (SignatureHeader).
	Secret []byte
	// Delivery sets routing, suppression, queue, timeout and retries.
	Delivery Delivery
	// Client sends the requests. Default: a client with no timeout of its
	// own (Delivery.Timeout bounds each attempt).
	Client *http.Client
	// Logger receives a Warn line per event not delivered. Default
	// slog.Default().
	Logger *slog.Logger
}

// Webhook POSTs each event's wire JSON (see Wire) to a URL, signed when a
// secret is set. Notify never blocks: events queue and are sent by Run, with
// each attempt bounded by a timeout and failures retried with exponential
// backoff, except answers in 4xx other than 408 and 429, which a retry
// cannot fix. Build it with NewWebhook; it is safe for concurrent use.
type Webhook struct {
	out    *outbound
	url    string
	secret []byte
	client *http.Client
}

// NewWebhook returns a webhook notifier. It fails on a URL that is not
// absolute http or https; the error does not contain the URL.
func NewWebhook(opts WebhookOptions) (*Webhook, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("webhook %s: url is not an absolute http or https URL", opts.Name)
	}
	if opts.Client == nil {
		opts.Client = &http.Client{}
	}
	w := &Webhook{url: opts.URL, secret: opts.Secret, client: opts.Client}
	w.out = newOutbound(opts.Name, opts.Delivery, opts.Logger, w.post)
	return w, nil
}

// Name implements Named.
func (w *Webhook) Name() string { return w.out.Name() }

// Notify implements Notifier: it routes, suppresses and queues e.
func (w *Webhook) Notify(ctx context.Context, e Event) { w.out.Notify(ctx, e) }

// Run implements Runner: it sends queued events until ctx is done.
func (w *Webhook) Run(ctx context.Context) error { return w.out.Run(ctx) }

// Stats implements Counted.
func (w *Webhook) Stats() Stats { return w.out.Stats() }

// post makes one attempt. A 4xx answer is permanent, except 408 and 429,
// which ask the sender to come back later.
func (w *Webhook) post(ctx context.Context, e Event) error {
	body, err := MarshalWire(e)
	if err != nil {
		return permanentError{err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return permanentError{errors.New("build request")}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "skep")
	req.Header.Set(EventHeader, string(e.Type))
	if len(w.secret) > 0 {
		req.Header.Set(SignatureHeader, Sign(w.secret, body))
	}
	resp, err := w.client.Do(req)
	if err != nil {
		// url.Error names the URL, which is a secret; keep only its cause.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			return fmt.Errorf("post: %w", uerr.Err)
		}
		return fmt.Errorf("post: %w", err)
	}
	defer resp.Body.Close()
	// Drain a little of the body so the connection can be reused, but not
	// all of it: a receiver answering with an endless body must not stall
	// the queue.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err = fmt.Errorf("receiver answered %s", resp.Status)
	if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests {
		return permanentError{err}
	}
	return err
}

var _ interface {
	Notifier
	Runner
	Named
	Counted
} = (*Webhook)(nil)

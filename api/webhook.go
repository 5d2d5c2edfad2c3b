package api

import (
	"bytes"
	"cmp"
	"container/list"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skep-cd/skep/wire"
)

// The webhook providers, as named in POST /api/v1/webhooks/{provider}.
const (
	ProviderGitHub    = "github"
	ProviderGitLab    = "gitlab"
	ProviderGitea     = "gitea"
	ProviderForgejo   = "forgejo"
	ProviderBitbucket = "bitbucket"
	ProviderGeneric   = "generic"
)

// Providers lists every provider a webhooks file may configure; the slice
// is fresh on every call.
func Providers() []string {
	return []string{ProviderGitHub, ProviderGitLab, ProviderGitea, ProviderForgejo, ProviderBitbucket, ProviderGeneric}
}

// Results counted in skep_webhook_deliveries_total.
const (
	webhookAccepted         = "accepted"
	webhookDuplicate        = "duplicate"
	webhookIgnored          = "ignored"
	webhookMissingSignature = "missing_signature"
	webhookBadSignature     = "invalid_signature"
	webhookBadPayload       = "bad_payload"
	webhookTooLarge         = "too_large"
	webhookBusy             = "busy"
	webhookUnknownProvider  = "unknown_provider"
)

// Errors of VerifyWebhook.
var (
	ErrMissingSignature = errors.New("missing signature")
	ErrBadSignature     = errors.New("signature does not match")
)

// WebhookSpec is one configured endpoint: a provider and its secret (the
// HMAC key, or GitLab's token).
type WebhookSpec struct {
	// Provider is one of Providers.
	Provider string
	// Secret is the key the forge signs with; it never reaches a log.
	Secret wire.Token
}

// WebhooksOptions tune Webhooks; the zero value means the defaults.
type WebhooksOptions struct {
	// Queue bounds deliveries accepted and not yet processed; a full queue
	// answers 503 so the forge retries. Default 64.
	Queue int
	// Remember is how many delivery ids are kept to drop duplicates.
	// Default 1024.
	Remember int
	// Timeout bounds processing one delivery. Default 30s.
	Timeout time.Duration
}

// Webhooks verifies inbound webhook deliveries and queues the pushes they
// report. Its methods are safe for concurrent use; a nil *Webhooks has no
// provider configured.
type Webhooks struct {
	secrets map[string]wire.Token // by provider; read-only after NewWebhooks
	queue   chan Push             // drained by Server.Run
	seen    *deliveries
	timeout time.Duration
}

// NewWebhooks checks specs (known providers, each once, non-empty secrets)
// and reports every problem at once. Zero fields of opts take their
// defaults.
func NewWebhooks(specs []WebhookSpec, opts WebhooksOptions) (*Webhooks, error) {
	if opts.Queue <= 0 {
		opts.Queue = 64
	}
	if opts.Remember <= 0 {
		opts.Remember = 1024
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	h := &Webhooks{secrets: map[string]wire.Token{}, queue: make(chan Push, opts.Queue), seen: newDeliveries(opts.Remember), timeout: opts.Timeout}
	var errs []error
	for _, s := range specs {
		switch {
		case !slices.Contains(Providers(), s.Provider):
			errs = append(errs, fmt.Errorf("webhook provider %q: want one of %s", s.Provider, strings.Join(Providers(), ", ")))
		case s.Secret.Empty():
			errs = append(errs, fmt.Errorf("webhook provider %q: empty secret", s.Provider))
		case !h.secrets[s.Provider].Empty():
			errs = append(errs, fmt.Errorf("webhook provider %q: configured twice", s.Provider))
		default:
			h.secrets[s.Provider] = s.Secret
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return h, nil
}

// Providers returns the configured providers, sorted.
func (h *Webhooks) Providers() []string {
	if h == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(h.secrets))
}

// secret returns provider's secret; ok is false when it is not configured
// or h is nil.
func (h *Webhooks) secret(provider string) (wire.Token, bool) {
	if h == nil {
		return wire.Token{}, false
	}
	t, ok := h.secrets[provider]
	return t, ok
}

// run processes queued pushes one at a time until ctx ends, so a burst of
// pushes costs one refresh after another, never a burst of parallel git
// reads. With no webhooks configured it just waits for ctx.
func (h *Webhooks) run(ctx context.Context, rec Reconciler, log *slog.Logger) {
	if h == nil {
		<-ctx.Done()
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case push := <-h.queue:
			pctx, cancel := context.WithTimeout(ctx, h.timeout)
			got, err := rec.RefreshRepository(pctx, push)
			cancel()
			if err != nil {
				log.Warn("webhook refresh failed", "repositories", push.Repositories, "refs", push.Refs, "err", err)
				continue
			}
			log.Info("webhook refreshed", "refs", push.Refs, "applications", got.Applications, "appset", got.AppSet)
		}
	}
}

// Run processes accepted webhook deliveries until ctx ends; start it once
// beside serving. It returns when ctx is done.
func (s *Server) Run(ctx context.Context) {
	s.webhooks.run(ctx, s.rec, s.log)
}

// WebhookResponse is the body of a webhook answer.
type WebhookResponse struct {
	// Status is accepted, duplicate or ignored.
	Status string `json:"status"`
	// Applications names the applications an accepted push refreshes, and
	// AppSet whether it reloads the app set, so a forge's delivery log
	// shows when a push matched nothing. The caller proved it holds the
	// webhook secret, which every application of the controller shares.
	Applications []string `json:"applications,omitempty"`
	AppSet       bool     `json:"appSet,omitempty"`
}

// webhook serves POST /api/v1/webhooks/{provider}: verify, parse, drop a
// duplicate, queue, and answer at once; the refresh runs in Run.
func (s *Server) webhook(w http.ResponseWriter, r *http.Request, _ Subject) {
	provider := r.PathValue("provider")
	secret, ok := s.webhooks.secret(provider)
	if !ok {
		s.metrics.webhook(provider, webhookUnknownProvider)
		writeError(w, http.StatusNotFound, wire.CodeNotFound, fmt.Sprintf("no webhook is configured for provider %q", provider))
		return
	}
	// The signature covers the raw bytes, so the body is read whole and
	// verified before any of it is decoded.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		s.metrics.webhook(provider, webhookTooLarge)
		s.fail(w, r, err)
		return
	}
	if err := VerifyWebhook(provider, r.Header, body, secret); err != nil {
		result := webhookBadSignature
		if errors.Is(err, ErrMissingSignature) {
			result = webhookMissingSignature
		}
		s.metrics.webhook(provider, result)
		w.Header().Set("WWW-Authenticate", "Signature")
		writeError(w, http.StatusUnauthorized, wire.CodeUnauthorized, fmt.Sprintf("%s webhook: %v", provider, err))
		return
	}
	push, isPush, err := ParseWebhook(provider, r.Header, body)
	switch {
	case err != nil:
		s.metrics.webhook(provider, webhookBadPayload)
		writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("%s webhook: %v", provider, err))
		return
	case !isPush:
		s.metrics.webhook(provider, webhookIgnored)
		writeJSON(w, http.StatusOK, WebhookResponse{Status: webhookIgnored})
		return
	}
	// Forges redeliver after a timeout and on a user's "redeliver"; the
	// delivery id drops the second copy. A delivery without one is never a
	// duplicate.
	id := DeliveryID(provider, r.Header)
	if id != "" && !s.webhooks.seen.add(provider+"/"+id) {
		s.metrics.webhook(provider, webhookDuplicate)
		writeJSON(w, http.StatusOK, WebhookResponse{Status: webhookDuplicate})
		return
	}
	// Answer before the refresh runs: forges give a delivery about ten
	// seconds and a git fetch can take longer. A full queue is a 503 so the
	// forge retries instead of the push being lost.
	select {
	case s.webhooks.queue <- push:
	default:
		if id != "" {
			s.webhooks.seen.remove(provider + "/" + id) // let the retry through
		}
		s.metrics.webhook(provider, webhookBusy)
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusServiceUnavailable, wire.CodeUnavailable, "webhook queue is full; retry later")
		return
	}
	s.metrics.webhook(provider, webhookAccepted)
	matched := s.rec.MatchPush(push)
	writeJSON(w, http.StatusAccepted, WebhookResponse{Status: webhookAccepted, Applications: matched.Applications, AppSet: matched.AppSet})
}

// VerifyWebhook checks a delivery's signature or token against secret in
// constant time: an HMAC-SHA256 of the body for GitHub
// (X-Hub-Signature-256: sha256=<hex>), Gitea and Forgejo
// (X-Gitea-Signature or X-Forgejo-Signature: <hex>), Bitbucket Cloud
// (X-Hub-Signature: sha256=<hex>) and the generic form
// (X-Skep-Signature: sha256=<hex>); GitLab's X-Gitlab-Token is compared as
// a token. It returns ErrMissingSignature or ErrBadSignature.
func VerifyWebhook(provider string, h http.Header, body []byte, secret wire.Token) error {
	switch provider {
	case ProviderGitLab:
		got := h.Get("X-Gitlab-Token")
		if got == "" {
			return fmt.Errorf("X-Gitlab-Token: %w", ErrMissingSignature)
		}
		// Compare digests: ConstantTimeCompare returns at once on a length
		// mismatch, which would time the secret's length.
		a, b := wire.NewToken(got).Digest(), secret.Digest()
		if subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
			return fmt.Errorf("X-Gitlab-Token: %w", ErrBadSignature)
		}
		return nil
	case ProviderGitea, ProviderForgejo:
		// Forgejo, a fork of Gitea, may send either header, or both with
		// the same value; the first present decides.
		for _, name := range []string{"X-Forgejo-Signature", "X-Gitea-Signature"} {
			if v := h.Get(name); v != "" {
				return checkHMAC(name, v, "", body, secret)
			}
		}
		return fmt.Errorf("X-Gitea-Signature or X-Forgejo-Signature: %w", ErrMissingSignature)
	}
	name := map[string]string{
		ProviderGitHub:    "X-Hub-Signature-256",
		ProviderBitbucket: "X-Hub-Signature",
		ProviderGeneric:   "X-Skep-Signature",
	}[provider]
	if name == "" {
		return fmt.Errorf("unknown provider %q", provider)
	}
	v := h.Get(name)
	if v == "" {
		return fmt.Errorf("%s: %w", name, ErrMissingSignature)
	}
	return checkHMAC(name, v, "sha256=", body, secret)
}

// checkHMAC checks value, hex after prefix, of header against the body's
// HMAC under secret; hmac.Equal compares in constant time. The error names
// the header and never the expected value.
func checkHMAC(header, value, prefix string, body []byte, secret wire.Token) error {
	if prefix != "" {
		rest, ok := strings.CutPrefix(value, prefix)
		if !ok {
			return fmt.Errorf("%s: want %s<hex>: %w", header, prefix, ErrBadSignature)
		}
		value = rest
	}
	got, err := hex.DecodeString(strings.TrimSpace(value))
	if err != nil {
		return fmt.Errorf("%s: not hex: %w", header, ErrBadSignature)
	}
	if !hmac.Equal(got, Sign(body, secret)) {
		return fmt.Errorf("%s: %w", header, ErrBadSignature)
	}
	return nil
}

// Sign returns the HMAC-SHA256 of body under secret: what a sender of the
// generic webhook puts, hex-encoded after "sha256=", in X-Skep-Signature.
func Sign(body []byte, secret wire.Token) []byte {
	m := hmac.New(sha256.New, []byte(secret.Reveal()))
	m.Write(body)
	return m.Sum(nil)
}

// DeliveryID returns the provider's delivery id header, or "". The names
// are tried in order; Gitea and Forgejo may send either family.
func DeliveryID(provider string, h http.Header) string {
	names := map[string][]string{
		ProviderGitHub:    {"X-GitHub-Delivery"},
		ProviderGitLab:    {"X-Gitlab-Event-UUID", "X-Gitlab-Webhook-UUID"},
		ProviderGitea:     {"X-Gitea-Delivery", "X-Forgejo-Delivery"},
		ProviderForgejo:   {"X-Forgejo-Delivery", "X-Gitea-Delivery"},
		ProviderBitbucket: {"X-Request-UUID"},
		ProviderGeneric:   {"X-Skep-Delivery"},
	}[provider]
	for _, n := range names {
		if v := strings.TrimSpace(h.Get(n)); v != "" {
			return v
		}
	}
	return ""
}

// forgeRepository is the repository object of GitHub, Gitea, Forgejo and
// GitLab payloads; only the URL fields are read.
type forgeRepository struct {
	CloneURL   string `json:"clone_url"`
	SSHURL     string `json:"ssh_url"`
	HTMLURL    string `json:"html_url"`
	GitHTTPURL string `json:"git_http_url"`
	GitSSHURL  string `json:"git_ssh_url"`
	WebURL     string `json:"web_url"`
	Homepage   string `json:"homepage"`
}

// urls returns r's non-empty URLs without repeats; nil for no repository.
// Any may be the form an application's repo is written in.
func (r *forgeRepository) urls() []string {
	if r == nil {
		return nil
	}
	var out []string
	for _, u := range []string{r.CloneURL, r.SSHURL, r.HTMLURL, r.GitHTTPURL, r.GitSSHURL, r.WebURL, r.Homepage} {
		if u != "" && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out
}

// forgePush is the part of a GitHub, Gitea, Forgejo or GitLab push payload
// that is read. GitLab names the repository in project as well as in
// repository, each with other URL fields; both are read.
type forgePush struct {
	Ref        string           `json:"ref"`
	Repository *forgeRepository `json:"repository"`
	Project    *forgeRepository `json:"project"` // GitLab
}

// bitbucketPush is the part of a Bitbucket Cloud repo:push payload that is
// read: the repository's links and the refs each change moved.
type bitbucketPush struct {
	Repository *struct {
		FullName string `json:"full_name"`
		Links    struct {
			HTML struct {
				Href string `json:"href"`
			} `json:"html"`
		} `json:"links"`
	} `json:"repository"`
	Push struct {
		Changes []struct {
			New *bitbucketRef `json:"new"`
			Old *bitbucketRef `json:"old"`
		} `json:"changes"`
	} `json:"push"`
}

// bitbucketRef is one side of a Bitbucket change; a bare branch or tag
// name, which ParseWebhook turns into a full ref.
type bitbucketRef struct {
	Type string `json:"type"` // branch or tag
	Name string `json:"name"`
}

// GenericPush is the body of the generic webhook: the repository URL and,
// optionally, the ref that moved.
type GenericPush struct {
	// Repository is matched by RepoKey against applications' repos.
	Repository string `json:"repository"`
	// Ref is a full ref or a bare branch name; empty matches any.
	Ref string `json:"ref,omitempty"`
}

// ParseWebhook reads what a verified delivery says moved. isPush is false
// for events that are not pushes (a ping, an issue); err is set for a push
// whose payload cannot be read or names no repository. It never panics.
func ParseWebhook(provider string, h http.Header, body []byte) (push Push, isPush bool, err error) {
	switch provider {
	case ProviderGitHub, ProviderGitea, ProviderForgejo, ProviderGitLab:
		if !isPushEvent(provider, h) {
			return Push{}, false, nil
		}
		var p forgePush
		if err := json.Unmarshal(body, &p); err != nil {
			return Push{}, true, fmt.Errorf("payload: %w", err)
		}
		push.Repositories = append(p.Project.urls(), p.Repository.urls()...)
		if p.Ref != "" {
			push.Refs = []string{p.Ref}
		}
	case ProviderBitbucket:
		if h.Get("X-Event-Key") != "repo:push" {
			return Push{}, false, nil
		}
		var p bitbucketPush
		if err := json.Unmarshal(body, &p); err != nil {
			return Push{}, true, fmt.Errorf("payload: %w", err)
		}
		if p.Repository != nil {
			if u := p.Repository.Links.HTML.Href; u != "" {
				push.Repositories = append(push.Repositories, u)
			}
			if p.Repository.FullName != "" {
				push.Repositories = append(push.Repositories, "https://bitbucket.org/"+p.Repository.FullName)
			}
		}
		for _, c := range p.Push.Changes {
			// A deleted branch or tag has no new side; its old side still
			// names what moved.
			ref := c.New
			if ref == nil {
				ref = c.Old
			}
			if ref == nil || ref.Name == "" {
				continue
			}
			full := "refs/heads/" + ref.Name
			if ref.Type == "tag" {
				full = "refs/tags/" + ref.Name
			}
			if !slices.Contains(push.Refs, full) {
				push.Refs = append(push.Refs, full)
			}
		}
	case ProviderGeneric:
		// Strict, unlike the forges' payloads: the generic body is ours,
		// so a misspelt field is a mistake to report, not extra data.
		var p GenericPush
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return Push{}, true, fmt.Errorf("payload: want {\"repository\": URL, \"ref\": REF}: %w", err)
		}
		if p.Repository != "" {
			push.Repositories = []string{p.Repository}
		}
		if p.Ref != "" {
			push.Refs = []string{p.Ref}
		}
	default:
		return Push{}, false, fmt.Errorf("unknown provider %q", provider)
	}
	push.Repositories = dedupe(push.Repositories)
	if !slices.ContainsFunc(push.Repositories, func(u string) bool { return RepoKey(u) != "" }) {
		return Push{}, true, errors.New("payload names no repository URL")
	}
	return push, true, nil
}

// dedupe returns list without repeats, in first-seen order. Lists here are
// a handful of URLs, so the quadratic scan costs nothing.
func dedupe(list []string) []string {
	var out []string
	for _, s := range list {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// isPushEvent reports whether the event header says push. Forges send
// other events (ping, issues) to the same URL; those are answered
// "ignored", not refused, so the forge does not mark the hook failing.
func isPushEvent(provider string, h http.Header) bool {
	switch provider {
	case ProviderGitHub:
		return h.Get("X-GitHub-Event") == "push"
	case ProviderGitLab:
		e := h.Get("X-Gitlab-Event")
		return e == "Push Hook" || e == "Tag Push Hook"
	default: // Gitea and Forgejo send either header
		e := cmp.Or(h.Get("X-Forgejo-Event"), h.Get("X-Gitea-Event"))
		return e == "push"
	}
}

// deliveries remembers the last n delivery ids, dropping the oldest: the
// list keeps arrival order, the map finds an id. It is safe for
// concurrent use.
type deliveries struct {
	mu    sync.Mutex
	n     int
	order *list.List
	ids   map[string]*list.Element
}

// newDeliveries returns an empty memory of n ids; n must be positive.
func newDeliveries(n int) *deliveries {
	return &deliveries{n: n, order: list.New(), ids: map[string]*list.Element{}}
}

// add records id and reports whether it was new.
func (d *deliveries) add(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.ids[id]; ok {
		return false
	}
	d.ids[id] = d.order.PushBack(id)
	for d.order.Len() > d.n {
		oldest := d.order.Front()
		d.order.Remove(oldest)
		delete(d.ids, oldest.Value.(string))
	}
	return true
}

// remove forgets id, so a delivery that could not be queued is accepted
// when the forge retries it.
func (d *deliveries) remove(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.ids[id]; ok {
		d.order.Remove(e)
		delete(d.ids, id)
	}
}

// webhooksExample is the shape of a webhooks file, shown in problems about
// a file of another shape.
const webhooksExample = "webhooks:\n  - provider: github\n    secretFile: /run/secrets/github-webhook"

// webhooksFile is the file form of a webhooks file.
type webhooksFile struct {
	Webhooks []webhookEntry `yaml:"webhooks"`
}

// webhookEntry is one entry of a webhooks file as written; ParseWebhooks
// checks it.
type webhookEntry struct {
	Provider   string `yaml:"provider"`
	SecretFile string `yaml:"secretFile"`
	SecretEnv  string `yaml:"secretEnv"`
}

// LoadWebhooksFile reads a webhooks file (see ParseWebhooks). The file may
// be at most 1 MiB.
func LoadWebhooksFile(name string, getenv func(string) string) ([]WebhookSpec, error) {
	data, err := readSmallFile(name)
	if err != nil {
		return nil, fmt.Errorf("webhooks file: %w", err)
	}
	return ParseWebhooks(name, data, getenv)
}

// ParseWebhooks decodes a webhooks file strictly:
//
//	webhooks:
//	  - provider: github        # github | gitlab | gitea | forgejo | bitbucket | generic
//	    secretFile: github.key  # or secretEnv: VAR
//
// A relative secretFile is read from name's directory. Every problem is
// returned at once as configfile.Problems; no spec is returned then.
func ParseWebhooks(name string, data []byte, getenv func(string) string) ([]WebhookSpec, error) {
	var file webhooksFile
	d := decodeList(name, data, &file, "webhooks", webhooksExample)
	var specs []WebhookSpec
	seen := map[string]bool{}
	for i, e := range file.Webhooks {
		field := fmt.Sprintf("webhooks[%d]", i)
		p := e.Provider
		switch {
		case p == "":
			d.Add(field+".provider", "missing")
		case !slices.Contains(Providers(), p):
			d.Add(field+".provider", "want one of %s, got %q", strings.Join(Providers(), ", "), p)
		case seen[p]:
			d.Add(field+".provider", "%q is configured twice", p)
		}
		seen[p] = true
		value, ok := readSecret(d, field, "secretFile", e.SecretFile, "secretEnv", e.SecretEnv, getenv)
		if !ok {
			d.Add(field, "no secret: give secretFile or secretEnv")
		}
		specs = append(specs, WebhookSpec{Provider: p, Secret: wire.NewToken(value)})
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return specs, nil
}

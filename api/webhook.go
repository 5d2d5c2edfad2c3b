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
// ProviderGitLab takes project hooks and instance-wide system hooks alike;
// ProviderBitbucket is Bitbucket Cloud and ProviderBitbucketServer its
// self-hosted sibling (Server and Data Center), whose payload differs.
const (
	ProviderGitHub          = "github"
	ProviderGitLab          = "gitlab"
	ProviderGitea           = "gitea"
	ProviderForgejo         = "forgejo"
	ProviderGogs            = "gogs"
	ProviderBitbucket       = "bitbucket"
	ProviderBitbucketServer = "bitbucket-server"
	ProviderGeneric         = "generic"
)

// Providers lists every provider a webhooks file may configure; the slice
// is fresh on every call.
func Providers() []string {
	return []string{ProviderGitHub, ProviderGitLab, ProviderGitea, ProviderForgejo, ProviderGogs, ProviderBitbucket, ProviderBitbucketServer, ProviderGeneric}
}

// Scheme is how one provider's deliveries are told apart and checked: the
// headers read, each list in the order it is tried, and the form of the
// signature. docs/api.md's provider table is held to it
// (TestWebhookReferenceNamesEveryHeaderChecked).
type Scheme struct {
	// Event names the headers saying which event a delivery is; the first
	// present decides. Empty for the generic form, which is always a push.
	Event []string
	// PushEvents are the event header's values that may move a ref, and
	// PullEvents those that report a pull request; any other value is
	// answered "ignored".
	PushEvents, PullEvents []string
	// Signature names the headers carrying the signature or token; the
	// first present is checked.
	Signature []string
	// Prefix precedes the hex HMAC-SHA256 of the body ("sha256="), or is
	// "" for bare hex.
	Prefix string
	// Token is true when the header carries the secret itself (GitLab),
	// which proves the sender but does not cover the body.
	Token bool
	// Delivery names the delivery id headers, tried in order.
	Delivery []string
}

// schemes holds each provider's Scheme; read-only.
var schemes = map[string]Scheme{
	ProviderGitHub: {Event: []string{"X-GitHub-Event"}, PushEvents: []string{"push"}, PullEvents: []string{"pull_request"},
		Signature: []string{"X-Hub-Signature-256"}, Prefix: "sha256=", Delivery: []string{"X-GitHub-Delivery"}},
	// A system hook says "System Hook" for every event; its body's
	// event_name tells a push from the rest.
	ProviderGitLab: {Event: []string{"X-Gitlab-Event"}, PushEvents: []string{"Push Hook", "Tag Push Hook", "System Hook"}, PullEvents: []string{"Merge Request Hook"},
		Signature: []string{"X-Gitlab-Token"}, Token: true, Delivery: []string{"X-Gitlab-Event-UUID", "X-Gitlab-Webhook-UUID"}},
	// Forgejo, a fork of Gitea, sends both families of headers.
	ProviderGitea: {Event: []string{"X-Gitea-Event", "X-Forgejo-Event"}, PushEvents: []string{"push"}, PullEvents: []string{"pull_request", "pull_request_sync"},
		Signature: []string{"X-Gitea-Signature", "X-Forgejo-Signature"}, Delivery: []string{"X-Gitea-Delivery", "X-Forgejo-Delivery"}},
	ProviderForgejo: {Event: []string{"X-Forgejo-Event", "X-Gitea-Event"}, PushEvents: []string{"push"}, PullEvents: []string{"pull_request", "pull_request_sync"},
		Signature: []string{"X-Forgejo-Signature", "X-Gitea-Signature"}, Delivery: []string{"X-Forgejo-Delivery", "X-Gitea-Delivery"}},
	// Gogs announces a pushed tag only with a create event.
	ProviderGogs: {Event: []string{"X-Gogs-Event"}, PushEvents: []string{"push", "create"},
		Signature: []string{"X-Gogs-Signature"}, Delivery: []string{"X-Gogs-Delivery"}},
	ProviderBitbucket: {Event: []string{"X-Event-Key"}, PushEvents: []string{"repo:push"},
		PullEvents: []string{"pullrequest:created", "pullrequest:updated", "pullrequest:fulfilled", "pullrequest:rejected"},
		Signature:  []string{"X-Hub-Signature"}, Prefix: "sha256=", Delivery: []string{"X-Request-UUID"}},
	ProviderBitbucketServer: {Event: []string{"X-Event-Key"}, PushEvents: []string{"repo:refs_changed"},
		PullEvents: []string{"pr:opened", "pr:from_ref_updated", "pr:merged", "pr:declined", "pr:deleted"},
		Signature:  []string{"X-Hub-Signature"}, Prefix: "sha256=", Delivery: []string{"X-Request-Id"}},
	ProviderGeneric: {Signature: []string{"X-Skep-Signature"}, Prefix: "sha256=", Delivery: []string{"X-Skep-Delivery"}},
}

// SchemeOf returns provider's Scheme; ok is false for an unknown provider.
// The slices are fresh on every call.
func SchemeOf(provider string) (s Scheme, ok bool) {
	s, ok = schemes[provider]
	s.Event, s.PushEvents, s.PullEvents = slices.Clone(s.Event), slices.Clone(s.PushEvents), slices.Clone(s.PullEvents)
	s.Signature, s.Delivery = slices.Clone(s.Signature), slices.Clone(s.Delivery)
	return s, ok
}

// first returns the first non-empty value among the headers names.
func first(h http.Header, names []string) (name, value string) {
	for _, n := range names {
		if v := strings.TrimSpace(h.Get(n)); v != "" {
			return n, v
		}
	}
	return "", ""
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
	webhookUnauthorized     = "unauthorized" // a bearer credential refused
	webhookForbidden        = "forbidden"    // a bearer credential without the right
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
	// Window is how long a delivery id is kept: a repeat within it is a
	// duplicate, one after it is taken again (a user's deliberate
	// "redeliver" the next day). Default one hour.
	Window time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
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
	if opts.Window <= 0 {
		opts.Window = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &Webhooks{secrets: map[string]wire.Token{}, queue: make(chan Push, opts.Queue),
		seen: newDeliveries(opts.Remember, opts.Window, opts.Now), timeout: opts.Timeout}
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
	// Reason says why a delivery was ignored: not a push, or a push that
	// only deleted refs.
	Reason string `json:"reason,omitempty"`
	// Applications names the applications an accepted push refreshes, and
	// AppSet whether it reloads the app set, so a forge's delivery log
	// shows when a push matched nothing. The caller proved it holds the
	// webhook secret, which every application of the controller shares.
	Applications []string `json:"applications,omitempty"`
	AppSet       bool     `json:"appSet,omitempty"`
	// PullRequest is the number of the pull request whose plan an
	// accepted delivery queued; Applications are then those whose
	// repository and branch it merges into.
	PullRequest int64 `json:"pullRequest,omitempty"`
}

// webhook serves POST /api/v1/webhooks/{provider}: verify, parse, drop a
// duplicate, queue, and answer at once; the refresh runs in Run.
func (s *Server) webhook(w http.ResponseWriter, r *http.Request, _ Subject) {
	provider := r.PathValue("provider")
	if _, ok := Bearer(r); ok && provider == ProviderGeneric {
		s.webhookByBearer(w, r)
		return
	}
	secret, ok := s.webhooks.secret(provider)
	if !ok {
		s.metrics.webhook(provider, webhookUnknownProvider)
		writeError(w, http.StatusNotFound, wire.CodeNotFound, fmt.Sprintf("no webhook is configured for provider %q", provider))
		return
	}
	// The signature covers the raw bytes, so the body is read whole and
	// verified before any of it is decoded.
	body, ok := s.webhookBody(w, r, provider)
	if !ok {
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
	if IsPullRequest(provider, r.Header, body) {
		s.pullRequest(w, r, provider, body)
		return
	}
	push, ignored, err := ParseWebhook(provider, r.Header, body)
	switch {
	case err != nil:
		s.metrics.webhook(provider, webhookBadPayload)
		writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("%s webhook: %v", provider, err))
		return
	case ignored != "":
		s.metrics.webhook(provider, webhookIgnored)
		writeJSON(w, http.StatusOK, WebhookResponse{Status: webhookIgnored, Reason: ignored})
		return
	}
	s.queuePush(w, r, provider, push, s.rec.MatchPush(push))
}

// webhookBody reads a delivery's body whole, up to the server's limit;
// ok is false when it answered the failure.
func (s *Server) webhookBody(w http.ResponseWriter, r *http.Request, provider string) (body []byte, ok bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		s.metrics.webhook(provider, webhookTooLarge)
		s.fail(w, r, err)
		return nil, false
	}
	return body, true
}

// queuePush drops a duplicate delivery, queues push and answers with
// what it matched.
func (s *Server) queuePush(w http.ResponseWriter, r *http.Request, provider string, push Push, matched Refreshed) {
	// Forges redeliver after a timeout and on a user's "redeliver"; the
	// delivery id drops the second copy. A delivery without one is never a
	// duplicate. Only a verified delivery records its id, so a forged one
	// cannot claim an id ahead of the real delivery (see
	// TestWebhookReplayIsADuplicateWithinTheWindow).
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
	writeJSON(w, http.StatusAccepted, WebhookResponse{Status: webhookAccepted, Applications: matched.Applications, AppSet: matched.AppSet})
}

// webhookByBearer takes a generic push whose sender proves itself with a
// bearer credential instead of a signature: a CI job's ID token, or a
// token of the tokens file. The subject needs the deployer role, and one
// scoped to some applications may only move those, never the app set, so
// a job's push refreshes its own application and no other.
func (s *Server) webhookByBearer(w http.ResponseWriter, r *http.Request) {
	const provider = ProviderGeneric
	subj, err := s.auth.Authenticate(r.Context(), r)
	if err != nil {
		result := webhookUnauthorized
		if errors.Is(err, ErrForbidden) {
			result = webhookForbidden
		}
		s.metrics.webhook(provider, result)
		s.refuse(w, "/api/v1/webhooks/{provider}", err)
		return
	}
	if !subj.Allows(RoleDeployer) {
		s.metrics.webhook(provider, webhookForbidden)
		writeError(w, http.StatusForbidden, wire.CodeForbidden, fmt.Sprintf("%s has role %s; a push needs deployer", subj.Name, subj.Role))
		return
	}
	body, ok := s.webhookBody(w, r, provider)
	if !ok {
		return
	}
	push, _, err := ParseWebhook(provider, r.Header, body)
	if err != nil {
		s.metrics.webhook(provider, webhookBadPayload)
		writeError(w, http.StatusBadRequest, wire.CodeBadRequest, fmt.Sprintf("%s webhook: %v", provider, err))
		return
	}
	matched := s.rec.MatchPush(push)
	if subj.Scoped() && (matched.AppSet || slices.ContainsFunc(matched.Applications, func(a string) bool { return !subj.Sees(a) })) {
		// The applications are not named: the subject may not learn of
		// those outside its scope.
		s.metrics.webhook(provider, webhookForbidden)
		writeError(w, http.StatusForbidden, wire.CodeForbidden,
			fmt.Sprintf("%s may not refresh what this push names: it moves applications outside its scope or the app set", subj.Name))
		return
	}
	s.log.Info("webhook by bearer", "actor", subj.Name, "repositories", push.Repositories, "refs", push.Refs, "applications", matched.Applications)
	s.queuePush(w, r, provider, push, matched)
}

// VerifyWebhook checks a delivery's signature or token against secret in
// constant time, as provider's Scheme says: an HMAC-SHA256 of the body,
// hex after the scheme's prefix, or (GitLab) the secret itself. It returns
// an error wrapping ErrMissingSignature or ErrBadSignature.
func VerifyWebhook(provider string, h http.Header, body []byte, secret wire.Token) error {
	sc, ok := schemes[provider]
	if !ok {
		return fmt.Errorf("unknown provider %q", provider)
	}
	name, v := first(h, sc.Signature)
	if v == "" {
		return fmt.Errorf("%s: %w", strings.Join(sc.Signature, " or "), ErrMissingSignature)
	}
	if sc.Token {
		// Compare digests: ConstantTimeCompare returns at once on a length
		// mismatch, which would time the secret's length.
		a, b := wire.NewToken(v).Digest(), secret.Digest()
		if subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
			return fmt.Errorf("%s: %w", name, ErrBadSignature)
		}
		return nil
	}
	return checkHMAC(name, v, sc.Prefix, body, secret)
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
// are tried in the order of its Scheme.
func DeliveryID(provider string, h http.Header) string {
	_, v := first(h, schemes[provider].Delivery)
	return v
}

// forgeRepository is the repository object of GitHub, Gitea, Forgejo, Gogs
// and GitLab payloads; only the URL fields are read.
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

// forgePush is the part of a GitHub, Gitea, Forgejo, Gogs or GitLab push
// (or Gogs create) payload that is read. GitLab names the repository in
// project as well as in repository, each with other URL fields; both are
// read.
type forgePush struct {
	Ref        string           `json:"ref"`
	After      string           `json:"after"`
	Deleted    bool             `json:"deleted"`  // GitHub
	RefType    string           `json:"ref_type"` // Gogs create: branch or tag, Ref a bare name
	EventName  string           `json:"event_name"`
	ObjectKind string           `json:"object_kind"`
	Repository *forgeRepository `json:"repository"`
	Project    *forgeRepository `json:"project"` // GitLab
}

// bitbucketPush is the part of a Bitbucket Cloud repo:push payload that is
// read: the repository's links and the refs each change moved.
type bitbucketPush struct {
	Repository *bitbucketRepository `json:"repository"`
	Push       struct {
		Changes []struct {
			New *bitbucketRef `json:"new"`
			Old *bitbucketRef `json:"old"`
		} `json:"changes"`
	} `json:"push"`
}

// bitbucketRepository is the repository of a Bitbucket Cloud payload: its
// full name and web page.
type bitbucketRepository struct {
	FullName string `json:"full_name"`
	Links    struct {
		HTML struct {
			Href string `json:"href"`
		} `json:"html"`
	} `json:"links"`
}

// urls returns r's web page and bitbucket.org's address of its full name;
// nil for no repository.
func (r *bitbucketRepository) urls() []string {
	if r == nil {
		return nil
	}
	var out []string
	if u := r.Links.HTML.Href; u != "" {
		out = append(out, u)
	}
	if r.FullName != "" {
		out = append(out, "https://bitbucket.org/"+r.FullName)
	}
	return out
}

// bitbucketRef is one side of a Bitbucket change; a bare branch or tag
// name, which ParseWebhook turns into a full ref.
type bitbucketRef struct {
	Type string `json:"type"` // branch or tag
	Name string `json:"name"`
}

// bitbucketServerPush is the part of a Bitbucket Server or Data Center
// repo:refs_changed payload that is read: the clone links and each change.
type bitbucketServerPush struct {
	Repository *struct {
		Links struct {
			Clone []struct {
				Href string `json:"href"`
			} `json:"clone"`
		} `json:"links"`
	} `json:"repository"`
	Changes []struct {
		Ref struct {
			ID        string `json:"id"`        // refs/heads/main
			DisplayID string `json:"displayId"` // main
			Type      string `json:"type"`      // BRANCH or TAG
		} `json:"ref"`
		RefID  string `json:"refId"`
		ToHash string `json:"toHash"`
		Type   string `json:"type"` // ADD, UPDATE or DELETE
	} `json:"changes"`
}

// GenericPush is the body of the generic webhook: the repository URL and,
// optionally, the ref that moved.
type GenericPush struct {
	// Repository is matched by RepoKey against applications' repos.
	Repository string `json:"repository"`
	// Ref is a full ref or a bare branch name; empty matches any.
	Ref string `json:"ref,omitempty"`
}

// refChanges gathers the refs a delivery moved and those it deleted. A
// deletion brings no commit to deploy, so it never refreshes anything;
// an application whose branch is gone learns it at its next interval.
type refChanges struct {
	moved, deleted []string
}

func (c *refChanges) add(ref string, deleted bool) {
	switch {
	case ref == "":
	case deleted && !slices.Contains(c.deleted, ref):
		c.deleted = append(c.deleted, ref)
	case !deleted && !slices.Contains(c.moved, ref):
		c.moved = append(c.moved, ref)
	}
}

// ParseWebhook reads what a verified delivery says moved. ignored is
// non-empty, and says why, for a delivery that moves nothing to deploy:
// an event that is not a push (a ping, an issue, a project created) or a
// push that only deleted refs. err is set for a push whose payload cannot
// be read or names no repository. It never panics.
func ParseWebhook(provider string, h http.Header, body []byte) (push Push, ignored string, err error) {
	sc, ok := schemes[provider]
	if !ok {
		return Push{}, "", fmt.Errorf("unknown provider %q", provider)
	}
	// Forges send other events (ping, issues) to the same URL; those are
	// answered "ignored", not refused, so the forge does not mark the hook
	// failing.
	header, event := first(h, sc.Event)
	if len(sc.Event) > 0 && !slices.Contains(sc.PushEvents, event) {
		return Push{}, fmt.Sprintf("%s %q is not a push", strings.Join(sc.Event, " or "), event), nil
	}
	var refs refChanges
	switch provider {
	case ProviderGitHub, ProviderGitea, ProviderForgejo, ProviderGitLab, ProviderGogs:
		var p forgePush
		if err := json.Unmarshal(body, &p); err != nil {
			return Push{}, "", fmt.Errorf("payload: %w", err)
		}
		if event == "System Hook" {
			if e := cmp.Or(p.EventName, p.ObjectKind); e != "push" && e != "tag_push" {
				return Push{}, fmt.Sprintf("%s event %q is not a push", header, e), nil
			}
		}
		ref := p.Ref
		if event == "create" { // Gogs: a bare name; a new branch's commits come in the push that follows
			if p.RefType != "tag" {
				return Push{}, fmt.Sprintf("%s create of a %s: its push follows", header, cmp.Or(p.RefType, "ref")), nil
			}
			ref = "refs/tags/" + p.Ref
		}
		push.Repositories = append(p.Project.urls(), p.Repository.urls()...)
		if ref != "" {
			refs.add(ref, p.Deleted || isZeroHash(p.After))
		} else if p.Deleted {
			return Push{}, "the push deleted a ref", nil
		}
	case ProviderBitbucket:
		var p bitbucketPush
		if err := json.Unmarshal(body, &p); err != nil {
			return Push{}, "", fmt.Errorf("payload: %w", err)
		}
		push.Repositories = p.Repository.urls()
		for _, c := range p.Push.Changes {
			// A deleted branch or tag has no new side; its old side still
			// names what went.
			ref, deleted := c.New, c.New == nil
			if deleted {
				ref = c.Old
			}
			if ref == nil || ref.Name == "" {
				continue
			}
			full := "refs/heads/" + ref.Name
			if ref.Type == "tag" {
				full = "refs/tags/" + ref.Name
			}
			refs.add(full, deleted)
		}
	case ProviderBitbucketServer:
		var p bitbucketServerPush
		if err := json.Unmarshal(body, &p); err != nil {
			return Push{}, "", fmt.Errorf("payload: %w", err)
		}
		if p.Repository != nil {
			// The clone links are the forms an application's repo is
			// written in; the self link is a web page of the repository.
			for _, l := range p.Repository.Links.Clone {
				push.Repositories = append(push.Repositories, l.Href)
			}
		}
		for _, c := range p.Changes {
			ref := cmp.Or(c.Ref.ID, c.RefID)
			if ref != "" && !strings.HasPrefix(ref, "refs/") {
				kind := "heads"
				if strings.EqualFold(c.Ref.Type, "TAG") {
					kind = "tags"
				}
				ref = "refs/" + kind + "/" + ref
			}
			refs.add(ref, strings.EqualFold(c.Type, "DELETE") || isZeroHash(c.ToHash))
		}
	case ProviderGeneric:
		// Strict, unlike the forges' payloads: the generic body is ours,
		// so a misspelt field is a mistake to report, not extra data.
		var p GenericPush
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return Push{}, "", fmt.Errorf("payload: want {\"repository\": URL, \"ref\": REF}: %w", err)
		}
		if p.Repository != "" {
			push.Repositories = []string{p.Repository}
		}
		refs.add(p.Ref, false)
	}
	push.Repositories = dedupe(push.Repositories)
	if !slices.ContainsFunc(push.Repositories, func(u string) bool { return RepoKey(u) != "" }) {
		return Push{}, "", errors.New("payload names no repository URL")
	}
	// A push naming no ref matches every revision, so one whose refs were
	// all deletions must not fall through as one naming none.
	if len(refs.moved) == 0 && len(refs.deleted) > 0 {
		return Push{}, "the push only deleted " + strings.Join(refs.deleted, ", "), nil
	}
	push.Refs = refs.moved
	return push, "", nil
}

// isZeroHash reports whether s is git's all-zero object name, which a
// forge gives as the new commit of a deleted ref.
func isZeroHash(s string) bool {
	return (len(s) == 40 || len(s) == 64) && strings.Trim(s, "0") == ""
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

// deliveries remembers the delivery ids seen within a window, at most n,
// dropping the oldest: the list keeps arrival order, the map finds an id.
// It is safe for concurrent use.
type deliveries struct {
	mu     sync.Mutex
	n      int
	window time.Duration
	now    func() time.Time
	order  *list.List // of delivery, oldest first
	ids    map[string]*list.Element
}

// delivery is one remembered id and when it was first seen.
type delivery struct {
	id string
	at time.Time
}

// newDeliveries returns an empty memory of n ids for window; n and window
// must be positive.
func newDeliveries(n int, window time.Duration, now func() time.Time) *deliveries {
	return &deliveries{n: n, window: window, now: now, order: list.New(), ids: map[string]*list.Element{}}
}

// add records id and reports whether it was new: unseen, or last seen
// longer ago than the window.
func (d *deliveries) add(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	// Arrival order is time order, so the expired ids are at the front.
	for e := d.order.Front(); e != nil && now.Sub(e.Value.(delivery).at) >= d.window; e = d.order.Front() {
		d.order.Remove(e)
		delete(d.ids, e.Value.(delivery).id)
	}
	if _, ok := d.ids[id]; ok {
		return false
	}
	d.ids[id] = d.order.PushBack(delivery{id: id, at: now})
	for d.order.Len() > d.n {
		oldest := d.order.Front()
		d.order.Remove(oldest)
		delete(d.ids, oldest.Value.(delivery).id)
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
	data, err := ReadConfigFile(name)
	if err != nil {
		return nil, fmt.Errorf("webhooks file: %w", err)
	}
	return ParseWebhooks(name, data, getenv)
}

// ParseWebhooks decodes a webhooks file strictly:
//
//	webhooks:
//	  - provider: github        # github | gitlab | gitea | forgejo | gogs | bitbucket | bitbucket-server | generic
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
		value, ok := ReadSecret(d, field, "secretFile", e.SecretFile, "secretEnv", e.SecretEnv, getenv)
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

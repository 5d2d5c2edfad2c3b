package identity

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/skep-cd/skep/api"
)

// Bearer authenticates ID tokens presented as bearer tokens: a person's
// from `skep login` (the sign-in's issuer, the CLI's client as audience)
// and CI jobs' (each CI issuer with the audience the file gives it). It is
// safe for concurrent use.
type Bearer struct {
	people *SignIn // nil: the CLI cannot sign in
	ci     []ciIssuer
	seen   *replays
	log    *slog.Logger
	now    func() time.Time
}

// ciIssuer is a CI issuer of the file and its provider.
type ciIssuer struct {
	cfg    CIIssuer
	issuer *issuer
}

// The compiler keeps Bearer in step with the seam it fills.
var _ api.Authorizer = (*Bearer)(nil)

// peeked is what an ID token says of itself before it is verified: only
// used to pick the verifier and to log a refusal, never to grant.
type peeked struct {
	Issuer   string   `json:"iss"`
	Subject  string   `json:"sub"`
	ID       string   `json:"jti"`
	Audience audience `json:"aud"`
}

// audience is aud, a string or a list of strings.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*a = many
	return nil
}

// peek reads a JWT's claims without verifying them; ok is false for
// anything that is not a JWT, such as a token of the tokens file.
func peek(raw string) (p peeked, ok bool) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 || len(raw) > 16<<10 {
		return peeked{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(payload, &p) != nil || p.Issuer == "" {
		return peeked{}, false
	}
	return p, true
}

// Authenticate implements api.Authorizer. A token that is not a JWT is
// left to the other authorizers (ErrUnauthenticated, not logged). An ID
// token from an issuer the file does not trust, for another audience,
// expired, with a bad signature, or a CI token presented a second time
// for a request that changes something, is refused (ErrUnauthenticated)
// and logged by its claims and the reason, never the token. A genuine
// token that no rule maps is ErrForbidden.
func (b *Bearer) Authenticate(ctx context.Context, r *http.Request) (api.Subject, error) {
	tok, ok := api.Bearer(r)
	if !ok {
		return api.Subject{}, fmt.Errorf("%w: no bearer token", api.ErrUnauthenticated)
	}
	raw := tok.Reveal()
	p, ok := peek(raw)
	if !ok {
		return api.Subject{}, fmt.Errorf("%w: not an ID token", api.ErrUnauthenticated)
	}
	if b.people != nil && p.Issuer == b.people.cfg.Issuer && slices.Contains(p.Audience, b.people.cfg.CLIClientID) {
		return b.person(ctx, r, raw, p)
	}
	for i := range b.ci {
		if c := &b.ci[i]; p.Issuer == c.cfg.Issuer {
			return b.job(ctx, r, raw, p, c)
		}
	}
	if b.people != nil && p.Issuer == b.people.cfg.Issuer {
		return api.Subject{}, b.refuse(r, p, "wrong audience", fmt.Errorf("aud %q is not the CLI's client %q", p.Audience, b.people.cfg.CLIClientID))
	}
	return api.Subject{}, b.refuse(r, p, "issuer not trusted", nil)
}

// refuse logs a refused token by its claims and returns ErrUnauthenticated.
// The claims are the token's own word, unverified: they are logged
// quoted and clipped, and never decide anything.
func (b *Bearer) refuse(r *http.Request, p peeked, reason string, err error) error {
	attrs := []any{"reason", reason, "issuer", clip(p.Issuer), "subject", clip(p.Subject), "jti", clip(p.ID),
		"method", r.Method, "path", r.URL.Path}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	b.log.Warn("oidc token refused", attrs...)
	return fmt.Errorf("%w: ID token refused: %s", api.ErrUnauthenticated, reason)
}

// verify checks raw against issuer for audience and returns its claims;
// a failure is refused with the reason.
func (b *Bearer) verify(ctx context.Context, r *http.Request, raw string, p peeked, is *issuer, aud string) (*oidc.IDToken, map[string]any, error) {
	if !slices.Contains(p.Audience, aud) {
		return nil, nil, b.refuse(r, p, "wrong audience", fmt.Errorf("aud %q lacks %q", p.Audience, aud))
	}
	v, err := is.verifier(ctx, aud)
	if err != nil {
		b.log.Warn("oidc token not checked", "issuer", is.url, "err", err)
		return nil, nil, err // api.ErrUnavailable: 503, the caller may retry
	}
	id, err := v.Verify(ctx, raw)
	var expired *oidc.TokenExpiredError
	switch {
	case errors.As(err, &expired):
		return nil, nil, b.refuse(r, p, "expired", err)
	case err != nil:
		return nil, nil, b.refuse(r, p, "invalid", err)
	}
	var claims map[string]any
	if err := id.Claims(&claims); err != nil {
		return nil, nil, b.refuse(r, p, "invalid", err)
	}
	return id, claims, nil
}

// person authenticates a person's ID token from `skep login`; it may be
// presented again and again until it expires, as the CLI does.
func (b *Bearer) person(ctx context.Context, r *http.Request, raw string, p peeked) (api.Subject, error) {
	id, claims, err := b.verify(ctx, r, raw, p, b.people.issuer, b.people.cfg.CLIClientID)
	if err != nil {
		return api.Subject{}, err
	}
	who := b.people.person(id, claims)
	rule, ok := b.people.cfg.match(who.groups)
	if !ok {
		b.log.Warn("oidc token refused", "reason", "no rule maps the person to a role", "actor", who.name, "groups", who.groups)
		return api.Subject{}, fmt.Errorf("%w: no rule of signIn.roles maps %s to a role", api.ErrForbidden, who.name)
	}
	return subject(who.name, rule.Role, rule.Apps), nil
}

// job authenticates a CI job's ID token. A request that changes
// something spends the token: its jti is remembered until it expires and
// a second such request with it is a replay.
func (b *Bearer) job(ctx context.Context, r *http.Request, raw string, p peeked, c *ciIssuer) (api.Subject, error) {
	id, claims, err := b.verify(ctx, r, raw, p, c.issuer, c.cfg.Audience)
	if err != nil {
		return api.Subject{}, err
	}
	if p.ID == "" {
		return api.Subject{}, b.refuse(r, p, "no jti: a replay could not be told", nil)
	}
	rule, ok := c.cfg.match(claims)
	name := jobName(id.Issuer, id.Subject, rule, c.cfg.Audit, claims)
	if !ok {
		b.log.Warn("oidc token refused", "reason", "no rule maps the job to a role", "actor", name)
		return api.Subject{}, fmt.Errorf("%w: no rule of the issuer %s maps %s to a role", api.ErrForbidden, c.cfg.Issuer, name)
	}
	if unsafeMethod(r.Method) {
		switch b.seen.spend(id.Issuer+"\x00"+p.ID, id.Expiry, b.now()) {
		case spendReplayed:
			return api.Subject{}, b.refuse(r, p, "replayed", nil)
		case spendFull:
			return api.Subject{}, b.refuse(r, p, "too many unexpired CI tokens remembered", nil)
		}
		b.log.Info("ci job authenticated", "actor", name, "rule", rule.Name, "role", rule.Role, "method", r.Method, "path", r.URL.Path)
	}
	return subject(name, rule.Role, rule.Apps), nil
}

// replays remembers the CI tokens spent, each until it expires, at most
// max at once. It is safe for concurrent use.
type replays struct {
	mu    sync.Mutex
	max   int
	spent map[string]time.Time // key → the token's expiry
}

func newReplays(max int) *replays { return &replays{max: max, spent: map[string]time.Time{}} }

// What spend says.
const (
	spendFresh = iota
	spendReplayed
	spendFull
)

// spend records key until expires, or says it was spent already. When
// max keys are remembered and none has expired, it refuses rather than
// forget one: a forgotten key could be replayed.
func (s *replays) spend(key string, expires, now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if exp, ok := s.spent[key]; ok && now.Before(exp) {
		return spendReplayed
	}
	if len(s.spent) >= s.max {
		for k, exp := range s.spent {
			if !now.Before(exp) {
				delete(s.spent, k)
			}
		}
		if len(s.spent) >= s.max {
			return spendFull
		}
	}
	s.spent[key] = expires
	return spendFresh
}

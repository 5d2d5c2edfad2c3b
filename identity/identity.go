package identity

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/store"
	"github.com/skep-cd/skep/wire"
)

// SessionStore keeps sign-in sessions; *store.Store implements it. Its
// methods are called concurrently from requests.
type SessionStore interface {
	CreateSession(ctx context.Context, s store.Session) error
	// Session returns an unexpired session or an error wrapping
	// store.ErrNoSession.
	Session(ctx context.Context, id store.SessionID) (store.Session, error)
	UpdateSession(ctx context.Context, s store.Session) error
	DeleteSession(ctx context.Context, id store.SessionID) error
}

// Options build an Identity. Config is required; the zero value of every
// other field means its default.
type Options struct {
	Config Config
	// Sessions keeps browser sessions; nil leaves the browser sign-in
	// answering 503, since a session lives only in the store. Bearer
	// tokens work without it.
	Sessions SessionStore
	// Logger receives sign-ins, sign-outs and every refused token; nil
	// discards them.
	Logger *slog.Logger
	// HTTPClient talks to the providers (discovery, keys, tokens); nil
	// means one with a 10s timeout. Providers are the operator's own
	// choice, not git's, so the egress policy does not apply to them.
	HTTPClient *http.Client
	// Now is the clock tokens and sessions are checked with; nil means
	// time.Now.
	Now func() time.Time
	// MaxReplays bounds the CI token ids remembered to refuse a replay;
	// 0 means 100,000.
	MaxReplays int
}

// Identity is what an OIDC file configures: the browser sign-in and the
// ID tokens taken as bearer tokens.
type Identity struct {
	// SignIn is nil when the file has no signIn.
	SignIn *SignIn
	// Bearer is nil when there is neither a CLI client nor a CI issuer.
	Bearer  *Bearer
	issuers []*issuer
}

// New builds the identity of opts.Config. It does no I/O: each provider
// is discovered when first needed (or by Discover).
func New(opts Options) (*Identity, error) {
	cfg := opts.Config
	if cfg.SignIn == nil && len(cfg.CI) == 0 {
		return nil, errors.New("oidc: the configuration trusts nobody")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxReplays <= 0 {
		opts.MaxReplays = 100_000
	}
	id := &Identity{}
	newIssuer := func(url string) *issuer {
		for _, i := range id.issuers {
			if i.url == url {
				return i
			}
		}
		i := &issuer{url: url, client: opts.HTTPClient, now: opts.Now}
		id.issuers = append(id.issuers, i)
		return i
	}
	var b *Bearer
	if sc := cfg.SignIn; sc != nil {
		seal, err := newSealer(sc.SessionKey)
		if err != nil {
			return nil, err
		}
		id.SignIn = &SignIn{cfg: *sc, issuer: newIssuer(sc.Issuer), sessions: opts.Sessions, seal: seal,
			client: opts.HTTPClient, log: opts.Logger, now: opts.Now}
		if sc.CLIClientID != "" {
			b = &Bearer{people: id.SignIn}
		}
	}
	for _, c := range cfg.CI {
		if b == nil {
			b = &Bearer{}
		}
		b.ci = append(b.ci, ciIssuer{cfg: c, issuer: newIssuer(c.Issuer)})
	}
	if b != nil {
		b.log, b.now, b.seen = opts.Logger, opts.Now, newReplays(opts.MaxReplays)
		id.Bearer = b
	}
	return id, nil
}

// Authorizers returns what to chain after the tokens file's Authorizer:
// the session cookie's, then the bearer ID tokens'.
func (id *Identity) Authorizers() []api.Authorizer {
	var out []api.Authorizer
	if id.SignIn != nil {
		out = append(out, id.SignIn)
	}
	if id.Bearer != nil {
		out = append(out, id.Bearer)
	}
	return out
}

// Discover asks every provider for its discovery document now, so that a
// wrong issuer URL shows when the controller starts. It returns every
// failure, joined; the identity works without it, discovering each
// provider on first use (and again after a failure).
func (id *Identity) Discover(ctx context.Context) error {
	var errs []error
	for _, i := range id.issuers {
		if _, err := i.discover(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Issuers returns the trusted issuers' URLs, for the start-up log.
func (id *Identity) Issuers() []string {
	out := make([]string, len(id.issuers))
	for i, is := range id.issuers {
		out[i] = is.url
	}
	return out
}

// writeError answers the API's error object; msg reaches the client and
// holds no secret.
func writeError(w http.ResponseWriter, code int, c wire.ErrorCode, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(wire.Error{Code: c, Message: msg}) // the client went away
}

package identity

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/skep-cd/skep/api"
)

// retryDiscovery is how long a failed discovery is answered from memory
// before the provider is asked again: a provider that is down costs one
// request per period, not one per API call.
const retryDiscovery = 10 * time.Second

// issuer is one OpenID provider the controller trusts, discovered on
// first use: its discovery document and, through go-oidc, its published
// keys, fetched again whenever a token names a key id not yet seen (the
// provider rotated its key). It is safe for concurrent use.
type issuer struct {
	url    string
	client *http.Client
	now    func() time.Time

	mu       sync.Mutex
	provider *oidc.Provider
	failed   time.Time // of the last failed discovery
	err      error     // its error
	// endSession is the discovery document's end_session_endpoint, or "".
	endSession string
}

// discover returns the provider, asking it for its discovery document
// first if need be. Concurrent callers wait for one discovery, which the
// client's timeout bounds. A failure wraps api.ErrUnavailable.
func (i *issuer) discover(ctx context.Context) (*oidc.Provider, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.provider != nil {
		return i.provider, nil
	}
	if i.err != nil && i.now().Sub(i.failed) < retryDiscovery {
		return nil, i.err
	}
	// The provider keeps this context's client for its key fetches; its
	// cancellation is not kept (go-oidc drops it), and it must not be:
	// the keys outlive this request.
	p, err := oidc.NewProvider(oidc.ClientContext(context.WithoutCancel(ctx), i.client), i.url)
	if err != nil {
		i.failed, i.err = i.now(), fmt.Errorf("%w: the OpenID provider %s cannot be discovered: %w", api.ErrUnavailable, i.url, err)
		return nil, i.err
	}
	var meta struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := p.Claims(&meta); err == nil {
		i.endSession = meta.EndSession
	}
	i.provider, i.err = p, nil
	return p, nil
}

// verifier returns a verifier of ID tokens for audience: the signature by
// a key the provider publishes, iss, aud and exp (with the clock i.now).
// The nonce is the caller's to check.
func (i *issuer) verifier(ctx context.Context, audience string) (*oidc.IDTokenVerifier, error) {
	p, err := i.discover(ctx)
	if err != nil {
		return nil, err
	}
	return p.Verifier(&oidc.Config{ClientID: audience, Now: i.now}), nil
}

// endSessionURL returns the end_session_endpoint of a discovered
// provider, or "".
func (i *issuer) endSessionURL() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.endSession
}

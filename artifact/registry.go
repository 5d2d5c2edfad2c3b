package artifact

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Default durations of the registry gate's cache.
const (
	// DefaultPushedFor is how long a found manifest is trusted before it is
	// asked again: a moved tag is seen within it.
	DefaultPushedFor = 10 * time.Minute
	// DefaultMissingFor is how long "not pushed yet" is trusted: the delay
	// between a push and the deploy it allows is at most about this.
	DefaultMissingFor = 10 * time.Second
	// DefaultBackoff and DefaultMaxBackoff bound how often a registry that
	// failed is asked again.
	DefaultBackoff    = 5 * time.Second
	DefaultMaxBackoff = 5 * time.Minute
	// DefaultTimeout bounds one check (the HEAD request, a token exchange,
	// the retries of a 5xx or 429): a registry that accepts the connection
	// and never answers must not hold a reconcile.
	DefaultTimeout = 30 * time.Second
)

// RegistryOptions configure a Registry. The zero value is usable: Docker
// config credentials and the defaults above.
type RegistryOptions struct {
	// Keychain finds credentials per registry; nil means authn.DefaultKeychain
	// (the Docker config file and its credential helpers).
	Keychain authn.Keychain
	// Transport carries the requests; nil means http.DefaultTransport.
	Transport http.RoundTripper
	// PushedFor, MissingFor, Backoff, MaxBackoff and Timeout override the
	// defaults.
	PushedFor, MissingFor, Backoff, MaxBackoff, Timeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Registry answers whether an image's manifest exists, with a HEAD request
// per image reference, cached (pushed for long, missing briefly) and backed
// off per registry host after a failure. It is safe for concurrent use.
type Registry struct {
	opts  RegistryOptions
	mu    sync.Mutex
	known map[string]check       // by image reference
	hosts map[string]hostBackoff // by registry host
	// platforms are Platforms' answers, by image reference.
	platforms map[string]platformAnswer
}

// check is one cached answer.
type check struct {
	Check
	until time.Time
}

// hostBackoff holds a failing registry back until until.
type hostBackoff struct {
	failures int
	until    time.Time
	reason   string
}

// Check is the registry's answer about one image reference.
type Check struct {
	Condition Condition
	// Digest is the manifest digest when Pushed.
	Digest string
	// Reason says why when not Pushed; it never holds a credential.
	Reason string
}

// NewRegistry returns a registry gate with opts' defaults filled in.
func NewRegistry(opts RegistryOptions) *Registry {
	if opts.Keychain == nil {
		opts.Keychain = authn.DefaultKeychain
	}
	if opts.Transport == nil {
		opts.Transport = http.DefaultTransport
	}
	if opts.PushedFor <= 0 {
		opts.PushedFor = DefaultPushedFor
	}
	if opts.MissingFor <= 0 {
		opts.MissingFor = DefaultMissingFor
	}
	if opts.Backoff <= 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Registry{opts: opts, known: map[string]check{}, hosts: map[string]hostBackoff{}, platforms: map[string]platformAnswer{}}
}

// Check asks whether image:tag exists. A cached answer is returned without
// a request; a host in backoff answers Failed with its last reason. It
// blocks for at most one HEAD request, bounded by ctx and by the timeout;
// a registry that does not answer within it is a failed host like any
// other.
func (r *Registry) Check(ctx context.Context, image, tag string) Check {
	ref, err := name.NewTag(image+":"+tag, name.StrictValidation)
	if err != nil {
		return Check{Condition: Failed, Reason: fmt.Sprintf("image %s:%s: %v", image, tag, err)}
	}
	key, host := ref.String(), ref.RegistryStr()
	now := r.opts.Now()
	r.mu.Lock()
	if c, ok := r.known[key]; ok && now.Before(c.until) {
		r.mu.Unlock()
		return c.Check
	}
	if b, ok := r.hosts[host]; ok && now.Before(b.until) {
		r.mu.Unlock()
		return Check{Condition: Failed, Reason: b.reason}
	}
	r.mu.Unlock()

	call, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	desc, err := remote.Head(ref, remote.WithContext(call), remote.WithAuthFromKeychain(r.opts.Keychain),
		remote.WithTransport(r.opts.Transport))
	if err != nil && ctx.Err() == nil && errors.Is(call.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %s: %w", r.opts.Timeout, err)
	}
	now = r.opts.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		delete(r.hosts, host)
		c := Check{Condition: Pushed, Digest: desc.Digest.String()}
		r.known[key] = check{Check: c, until: now.Add(r.opts.PushedFor)}
		return c
	case isMissing(err):
		delete(r.hosts, host)
		c := Check{Condition: Waiting, Reason: fmt.Sprintf("image %s is not in the registry yet", key)}
		r.known[key] = check{Check: c, until: now.Add(r.opts.MissingFor)}
		return c
	case ctx.Err() != nil:
		return Check{Condition: Failed, Reason: fmt.Sprintf("check image %s: %v", key, ctx.Err())}
	default:
		reason := fmt.Sprintf("check image %s: %v", key, err)
		r.failHost(host, reason, now)
		return Check{Condition: Failed, Reason: reason}
	}
}

// failHost backs host off after a failure that reason describes, doubling
// the wait with each failure in a row up to MaxBackoff. r.mu is held.
func (r *Registry) failHost(host, reason string, now time.Time) {
	b := r.hosts[host]
	b.failures++
	wait := r.opts.Backoff
	for i := 1; i < b.failures && wait < r.opts.MaxBackoff; i++ {
		wait *= 2
	}
	b.until = now.Add(min(wait, r.opts.MaxBackoff))
	b.reason = reason
	r.hosts[host] = b
}

// isMissing reports whether err is the registry saying the manifest (or the
// whole repository) does not exist, as opposed to failing to answer.
func isMissing(err error) bool {
	var terr *transport.Error
	if !errors.As(err, &terr) {
		return false
	}
	return terr.StatusCode == http.StatusNotFound
}

package gitsource

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/skep-cd/skep/egress"
)

var (
	// ErrRevisionNotFound means the remote has no branch, tag or commit by
	// the name asked for. Retrying the same revision will not help until git
	// changes.
	ErrRevisionNotFound = errors.New("revision not found")

	// ErrRepositoryNotFound means the remote says there is no such
	// repository (or hides it from these credentials).
	ErrRepositoryNotFound = errors.New("repository not found")

	// ErrAuth means the remote refused the credentials, none were found
	// where some are needed, a secret could not be read, or an ssh host key
	// is unknown or does not match known_hosts.
	ErrAuth = errors.New("git authentication failed")

	// ErrOutsideTree means a path, after following symlinks, would leave the
	// checked-out tree.
	ErrOutsideTree = errors.New("path leaves the tree")

	// ErrHostRefused means Options.CheckHost refused the remote's host, or
	// the egress policy behind Options.DialContext refused an address the
	// call was about to connect to (a redirect's among them); no connection
	// was made to it. Retrying will not help until the URL, the remote or
	// the controller's configuration changes.
	ErrHostRefused = errors.New("host refused")
)

// RemoteError is a failure talking to a repository's remote. Repo is the
// normalised URL without userinfo. errors.Is sees ErrAuth and
// ErrRepositoryNotFound through it when they are the cause; any other cause
// (network, server) is transient.
type RemoteError struct {
	Op   string // "ls-remote" or "fetch"
	Repo string
	Err  error
}

// Error names the operation and the redacted repository.
func (e *RemoteError) Error() string {
	return fmt.Sprintf("git %s %s: %v", e.Op, e.Repo, e.Err)
}

// Unwrap returns the cause, through which errors.Is sees ErrAuth and
// ErrRepositoryNotFound.
func (e *RemoteError) Unwrap() error { return e.Err }

// Transient reports whether asking again later may succeed without anyone
// changing configuration: false for authentication failures, missing
// repositories, refused hosts and repositories over a cap, true otherwise.
func (e *RemoteError) Transient() bool {
	return !errors.Is(e.Err, ErrAuth) && !errors.Is(e.Err, ErrRepositoryNotFound) && !errors.Is(e.Err, ErrHostRefused) &&
		!errors.Is(e.Err, ErrTooLarge)
}

// classify attaches this package's sentinels to go-git's errors; auth is
// what was offered, so a refusal can say when nothing was.
func classify(err error, auth transport.AuthMethod) error {
	var keyErr *knownhosts.KeyError
	var revoked *knownhosts.RevokedError
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired),
		errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod),
		errors.As(err, &keyErr), errors.As(err, &revoked),
		// x/crypto/ssh reports a refused key as a plain error.
		strings.Contains(err.Error(), "ssh: unable to authenticate"):
		if auth == nil {
			err = fmt.Errorf("no credential matches this repository: %w", err)
		}
		return &sentinelError{is: ErrAuth, cause: err}
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return &sentinelError{is: ErrRepositoryNotFound, cause: err}
	case errors.Is(err, egress.ErrRefused):
		return &sentinelError{is: ErrHostRefused, cause: err}
	}
	return err
}

// sentinelError is cause, also matching the sentinel is, without repeating
// the sentinel's text when cause already starts with it.
type sentinelError struct{ is, cause error }

func (e *sentinelError) Error() string {
	if strings.HasPrefix(e.cause.Error(), e.is.Error()) {
		return e.cause.Error()
	}
	return e.is.Error() + ": " + e.cause.Error()
}

// Unwrap returns both, so errors.Is sees the sentinel and go-git's error.
func (e *sentinelError) Unwrap() []error { return []error{e.is, e.cause} }

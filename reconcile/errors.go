package reconcile

import (
	"errors"

	"github.com/skep-cd/skep/stack"
)

// Errors the controller's requests wrap, so a caller (the API) can choose
// its answer with errors.Is.
var (
	// ErrUnknownApplication: the running app set has no such application.
	ErrUnknownApplication = errors.New("unknown application")
	// ErrNotRecorded: the swarm holds no record of the release or revision
	// a request names.
	ErrNotRecorded = errors.New("not recorded")
	// ErrInvalidRequest: the request cannot be acted on as given (a
	// revision git does not know, a revision number below 1).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrUnavailable: the swarm or the app set cannot answer now.
	ErrUnavailable = errors.New("unavailable")
	// ErrSyncWindow: a sync window refuses the request now (manualSync:
	// false); it may pass once the window closes.
	ErrSyncWindow = errors.New("refused by a sync window")
)

// maskedError is an error whose message hides values decrypted from SOPS
// files (an Engine or converter message may quote a spec value). It
// unwraps to the original so its outcome class still decides the retry;
// only the message is shown anywhere.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// hideDecrypted returns err with rel's decrypted values masked in its
// message; err itself when none occurs.
func hideDecrypted(err error, rel stack.Release) error {
	if err == nil || len(rel.Sensitive) == 0 {
		return err
	}
	msg := err.Error()
	if masked := rel.Mask(msg); masked != msg {
		return &maskedError{msg: masked, err: err}
	}
	return err
}

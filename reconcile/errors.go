package reconcile

import (
	"errors"
	"time"
)

// StalledError is a failure only a change in git can fix: a bad compose
// file, a refused host path, an invalid app set. The same commit is not
// retried until git moves or someone syncs by hand.
type StalledError struct{ Err error }

func (e *StalledError) Error() string { return e.Err.Error() }
func (e *StalledError) Unwrap() error { return e.Err }

// WaitingError means the reconcile could not go on yet (a rollout in
// progress, an image not pushed) and should be retried after Retry.
type WaitingError struct {
	Err   error
	Retry time.Duration
}

func (e *WaitingError) Error() string { return e.Err.Error() }
func (e *WaitingError) Unwrap() error { return e.Err }

// TransientError is a failure of the network, git host or daemon; the
// worker backs off and retries.
type TransientError struct{ Err error }

func (e *TransientError) Error() string { return e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// Class names the outcome class of err: "stalled", "waiting", "transient",
// or "" for nil. An unclassified error counts as transient, the safe
// choice: it is retried with backoff.
func Class(err error) string {
	var stalled *StalledError
	var waiting *WaitingError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &stalled):
		return "stalled"
	case errors.As(err, &waiting):
		return "waiting"
	default:
		return "transient"
	}
}

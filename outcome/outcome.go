// Package outcome classes what a reconcile step ended with by what must
// happen next: nothing (OK), a change in git (Stalled), a set delay
// (Waiting), or a retry with backoff (Transient).
//
// A step returns its failure wrapped in one of the error types below, and
// the reconcile loop reads the class with Of, never by matching messages.
// An error that carries no class is Transient: retrying with backoff is the
// safe default for a failure nobody classified.
//
// It must never import another package of Skep: every step can depend on
// it.
package outcome

import (
	"errors"
	"time"
)

// Class names what happens after a reconcile ended. The zero value is not a
// class; Of never returns it.
type Class string

// The classes, from a clean run to a failure worth retrying.
const (
	// OK: nothing failed.
	OK Class = "ok"
	// Stalled: only a change in git (or a person) can fix it; the same
	// commit is not retried until git moves or someone syncs by hand.
	Stalled Class = "stalled"
	// Waiting: the work could not go on yet (a rollout runs, an image is
	// not pushed); retry after a set delay, without counting a failure.
	Waiting Class = "waiting"
	// Transient: the network, git host or daemon failed; back off and retry.
	Transient Class = "transient"
)

// StalledError is a failure only a change in git can fix: a bad compose
// file, a refused host path, a spec the Engine rejects.
type StalledError struct{ Err error }

func (e *StalledError) Error() string { return e.Err.Error() }
func (e *StalledError) Unwrap() error { return e.Err }

// WaitingError means the work could not go on yet and should be tried
// again after Retry (0: the caller's own interval).
type WaitingError struct {
	Err   error
	Retry time.Duration
}

func (e *WaitingError) Error() string { return e.Err.Error() }
func (e *WaitingError) Unwrap() error { return e.Err }

// TransientError is a failure of the network, a git host or the daemon
// that a later attempt may not meet.
type TransientError struct{ Err error }

func (e *TransientError) Error() string { return e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// Of returns the class of err: OK for nil, Stalled when it wraps a
// *StalledError, Waiting when it wraps a *WaitingError (and no stalled
// one), Transient otherwise.
func Of(err error) Class {
	var stalled *StalledError
	var waiting *WaitingError
	switch {
	case err == nil:
		return OK
	case errors.As(err, &stalled):
		return Stalled
	case errors.As(err, &waiting):
		return Waiting
	default:
		return Transient
	}
}

// RetryAfter returns the delay a WaitingError in err asks for, or 0.
func RetryAfter(err error) time.Duration {
	var waiting *WaitingError
	if errors.As(err, &waiting) {
		return waiting.Retry
	}
	return 0
}

package apply

import (
	"errors"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/skep-cd/skep/stack"
)

// ForeignError says the release's namespace (or a name Apply would write)
// holds objects this owner did not create: a stack someone deployed with
// `docker stack deploy`, or one of another controller or application.
// Retrying does not help until a person removes them or changes the release.
type ForeignError struct {
	Owner   stack.Owner     // who asked to deploy
	Objects []ForeignObject // what is in the way, sorted by kind and name
}

// ForeignObject is one object in the way of an owner.
type ForeignObject struct {
	Kind Kind
	Name string
	// Controller and Application are the object's skep labels; both are
	// empty for an object Skep did not create.
	Controller  string
	Application string
}

func (e *ForeignError) Error() string {
	parts := make([]string, 0, len(e.Objects))
	for _, o := range e.Objects {
		who := "not created by skep"
		if o.Controller != "" || o.Application != "" {
			who = fmt.Sprintf("owned by controller %q, application %q", o.Controller, o.Application)
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", o.Kind, o.Name, who))
	}
	return fmt.Sprintf("release %q holds objects controller %q (application %q) did not create: %s; remove them or deploy under another release name",
		e.Owner.Release, e.Owner.Controller, e.Owner.Application, strings.Join(parts, ", "))
}

// StalledError wraps a failure that retrying the same release cannot fix:
// the Engine rejected a spec as invalid, or the release refers to an object
// that does not exist. The release (git) must change.
type StalledError struct {
	Err error
}

func (e *StalledError) Error() string { return e.Err.Error() }
func (e *StalledError) Unwrap() error { return e.Err }

// TransientError wraps a failure of the daemon or the network that a later
// attempt may not meet: back off and retry.
type TransientError struct {
	Err error
}

func (e *TransientError) Error() string { return e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// IsTransient reports whether err (or an error it wraps) is a
// *TransientError, so the caller should back off and retry.
func IsTransient(err error) bool {
	var t *TransientError
	return errors.As(err, &t)
}

// IsStalled reports whether err (or an error it wraps) is a *StalledError,
// so the same release should not be retried. A *ForeignError is neither
// stalled nor transient: it clears when someone removes the foreign objects.
func IsStalled(err error) bool {
	var s *StalledError
	return errors.As(err, &s)
}

// stalled wraps a formatted error as a *StalledError.
func stalled(format string, args ...any) error {
	return &StalledError{Err: fmt.Errorf(format, args...)}
}

// engineError classifies an Engine API error and wraps it with op.
// The Engine answers 400 (InvalidArgument) for a spec it will never accept;
// everything else (5xx, connection errors, conflicts with concurrent
// writers, objects that vanished meanwhile) may pass on a later attempt.
func engineError(op string, err error) error {
	wrapped := fmt.Errorf("%s: %w", op, err)
	if cerrdefs.IsInvalidArgument(err) || cerrdefs.IsNotImplemented(err) || cerrdefs.IsPermissionDenied(err) {
		return &StalledError{Err: wrapped}
	}
	return &TransientError{Err: wrapped}
}

// isOutOfSequence reports the Engine's answer to an update that carried a
// stale version index. Swarmkit sends it as a plain 500 with this message
// and no typed error, so the message is all there is to match.
func isOutOfSequence(err error) bool {
	return err != nil && strings.Contains(err.Error(), "update out of sequence")
}

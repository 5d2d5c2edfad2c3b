package apply

import (
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
)

// ForeignError says the release's namespace (or a name Apply would write)
// holds objects this owner did not create: a stack someone deployed with
// `docker stack deploy`, or one of another controller or application.
// Retrying does not help until a person removes them or changes the release,
// so Apply returns it wrapped in an *outcome.StalledError.
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

// Error names every object in the way and who owns it, and says what a
// person can do about it.
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

// foreign returns a *ForeignError naming objs, classed stalled: the same
// release cannot pass until a person removes them or renames the release.
func foreign(owner stack.Owner, objs ...ForeignObject) error {
	return &outcome.StalledError{Err: &ForeignError{Owner: owner, Objects: objs}}
}

// stalled wraps a formatted error as an *outcome.StalledError.
func stalled(format string, args ...any) error {
	return &outcome.StalledError{Err: fmt.Errorf(format, args...)}
}

// engineError classifies an Engine API error and wraps it with op.
// The Engine answers 400 (InvalidArgument) for a spec it will never accept,
// 501 for a feature it lacks and 403 for what it refuses to do: those are
// stalled. Everything else (5xx, connection errors, conflicts with
// concurrent writers, objects that vanished meanwhile) is transient, since
// it may pass on a later attempt.
func engineError(op string, err error) error {
	wrapped := fmt.Errorf("%s: %w", op, err)
	if cerrdefs.IsInvalidArgument(err) || cerrdefs.IsNotImplemented(err) || cerrdefs.IsPermissionDenied(err) {
		return &outcome.StalledError{Err: wrapped}
	}
	return &outcome.TransientError{Err: wrapped}
}

// isOutOfSequence reports the Engine's answer to an update that carried a
// stale version index. Swarmkit sends it as a plain 500 with this message
// and no typed error, so the message is all there is to match.
func isOutOfSequence(err error) bool {
	return err != nil && strings.Contains(err.Error(), "update out of sequence")
}

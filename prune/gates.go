package prune

import (
	"errors"
	"fmt"
	"strings"

	"github.com/skep-cd/skep/stack"
)

// Reasons prune is held. Allowed wraps each in a *HeldError; test with
// errors.Is.
var (
	// ErrAppSetUnavailable: the app set did not load, or what is loaded is
	// stale, so "not declared" may only mean "not read".
	ErrAppSetUnavailable = errors.New("the app set is not loaded or is stale")
	// ErrAppSetEmpty: an empty app set is far likelier a mistake (a wrong
	// path, a truncated file) than a wish to delete everything.
	ErrAppSetEmpty = errors.New("the app set is empty")
	// ErrNotReconciled: some application has not completed a reconcile
	// since the controller started, so what it declares is not known yet.
	ErrNotReconciled = errors.New("not every application has reconciled once")
	// ErrDeclaredElsewhere: another application in the app set declares
	// the release, so its objects are that application's to manage.
	ErrDeclaredElsewhere = errors.New("another application declares the release")
	// ErrSnapshotBehind: the live snapshot the prune reads was taken before
	// the latest writes of the release's application ended (or while one
	// runs), so what it does not show may well be running: the watcher
	// lists services before configs, and a snapshot can hold a revision
	// recorded after its services were listed.
	ErrSnapshotBehind = errors.New("the live snapshot has not seen the latest writes")
)

// HeldError says why prune may not run now. Reason is one of the ErrX
// variables above; Names lists the applications concerned, if any.
type HeldError struct {
	Reason error
	Names  []string
	Detail string // e.g. the app set's load error, already redacted
}

// Error reads "prune held: <reason> (<names>): <detail>", leaving out
// what is empty.
func (e *HeldError) Error() string {
	msg := "prune held: " + e.Reason.Error()
	if len(e.Names) > 0 {
		msg += " (" + strings.Join(e.Names, ", ") + ")"
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns Reason, so callers branch with errors.Is on the ErrX
// variables.
func (e *HeldError) Unwrap() error { return e.Reason }

// Gates are the facts the safety gates check. The zero value holds prune
// (an empty app set).
type Gates struct {
	// AppSetLoadFailed says the last load of the app set failed; LoadError
	// is its message for the report.
	AppSetLoadFailed bool
	LoadError        string
	// AppSetStale says the loaded app set is older than its source allows
	// (its source could not be read for too long).
	AppSetStale bool
	// Applications are the names in the current app set.
	Applications []string
	// NotReconciled are the applications in the app set that have not
	// completed a reconcile since the controller started.
	NotReconciled []string
	// DeclaredBy are the other applications in the app set whose render
	// declares the release about to be pruned (never the pruning one).
	DeclaredBy []string
	// WritesUnseen are the applications with a write to the swarm that the
	// live snapshot the prune reads does not show yet: one in flight, or
	// one that ended after the snapshot was taken.
	WritesUnseen []string
}

// Allowed returns nil when prune may run, or every reason it is held, each
// a *HeldError, joined. It is pure.
func Allowed(g Gates) error {
	var held []error
	switch {
	case g.AppSetLoadFailed:
		held = append(held, &HeldError{Reason: ErrAppSetUnavailable, Detail: g.LoadError})
	case g.AppSetStale:
		held = append(held, &HeldError{Reason: ErrAppSetUnavailable, Detail: "stale"})
	}
	if len(g.Applications) == 0 {
		held = append(held, &HeldError{Reason: ErrAppSetEmpty})
	}
	if len(g.NotReconciled) > 0 {
		held = append(held, &HeldError{Reason: ErrNotReconciled, Names: g.NotReconciled})
	}
	if len(g.DeclaredBy) > 0 {
		held = append(held, &HeldError{Reason: ErrDeclaredElsewhere, Names: g.DeclaredBy})
	}
	if len(g.WritesUnseen) > 0 {
		held = append(held, &HeldError{Reason: ErrSnapshotBehind, Names: g.WritesUnseen})
	}
	return errors.Join(held...)
}

// checkProof re-checks, just before a deletion, the part of the proof that
// the object itself carries; Execute refuses an item that fails it.
func checkProof(p Plan, obj Object) error {
	switch {
	case p.Owner.Controller == "" || !p.Owner.Owns(obj.Labels):
		return fmt.Errorf("%s %q: its labels do not name controller %q, application %q, release %q",
			obj.Kind, obj.Name, p.Owner.Controller, p.Owner.Application, p.Owner.Release)
	case obj.Labels[stack.LabelKind] != "":
		return fmt.Errorf("%s %q: skep bookkeeping is never pruned", obj.Kind, obj.Name)
	case obj.ID == "":
		return fmt.Errorf("%s %q: no id", obj.Kind, obj.Name)
	}
	return nil
}

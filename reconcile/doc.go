// Package reconcile keeps each application at what git declares: it
// schedules one worker per application and runs, for each reconcile, the
// steps resolve → fetch → render → convert → plan → apply → record.
//
// It only composes the steps; it never reaches around one (it does not
// parse compose, diff specs or write to the Engine itself). Every outcome is
// classed: stalled errors wait for git to move, waiting ones retry after a
// delay, transient ones back off. One application failing never slows the
// others, and a panic in a reconcile becomes a failed reconcile.
//
// Events are raised through notify with the application's destination and
// the actor carried by the context of whoever asked.
package reconcile

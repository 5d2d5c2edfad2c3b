// Package reconcile keeps each application at what git declares. It runs
// one worker per application and, for each reconcile, composes the steps
// in the order the files read: render (sync.go) → compare → live drift and
// correction (live.go) → gate → apply → wait → prune (prune.go) → record
// (record.go). queue.go holds the workers and their requests, status.go
// the status table, query.go what the API reads and asks.
//
// It only composes the steps; it never reaches around one: it does not
// parse compose, diff specs, or write to the Engine itself (apply and
// prune do). It never imports the HTTP layer: the API adapts this
// package's own types. Every outcome is classed (package outcome):
// stalled waits for git to move, waiting retries after a delay, transient
// backs off. One application failing never slows the others, and a panic
// in a reconcile becomes a failed reconcile.
//
// Events are raised through notify with the application's destination and
// the actor carried by the context of whoever asked.
package reconcile

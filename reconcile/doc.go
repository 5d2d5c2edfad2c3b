// Package reconcile keeps each application at what git declares: the loop
// around the sync passes. It runs one worker per application (worker.go,
// schedule.go), builds each pass's input and records its outcome
// (pass.go, record.go), syncs the releases of a release file in waves
// (releases.go), follows each swarm's reachability and live snapshot
// (destinations.go, liveindex.go: health, the writes a snapshot must show,
// the wakes by live drift), prunes the releases nobody declares
// (prune.go), keeps the status table (status.go) and answers the API
// (query.go).
//
// It never renders, compares, gates or writes a release itself: one sync
// of one release is syncpass.Run. It never imports the HTTP layer: the API
// adapts this package's own types. Every outcome is classed (package
// outcome): stalled waits for git to move, waiting retries after a delay,
// transient backs off. One application failing never slows the others, and
// a panic in a pass becomes a failed reconcile.
//
// Controller grows only by what the API asks of it: new sync behaviour is
// a gate rule, a write step or a phase of syncpass
// (TestControllerGrowsOnlyByAPI).
package reconcile

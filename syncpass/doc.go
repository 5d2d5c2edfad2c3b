// Package syncpass runs one sync of one release: resolve the commit and the
// artifact versions, render them, compare the render with the release's
// recorded revision, observe the live swarm, decide (gate), write, and
// settle (resource prune, previews). Run reads as that sequence; each phase
// is a function of explicit inputs that returns values, and every rule
// between "compared" and "write" is the one pure function gate, tested
// without a swarm (TestGate). The order of the writes is data too
// (writePlan, TestWritePlan), run by one loop.
//
// A pass reads the world once as it starts: Input carries one live
// snapshot, taken before any write, and one calendar reading (Input.Now),
// which windows, TTLs and what a user reads are judged by. Reads made after
// the pass's first write take a fresh snapshot from Env.Live. Durations and
// comparisons with a snapshot's TakenAt use Env.Wall, the same clock the
// swarm watcher stamps its snapshots with.
//
// It must never import reconcile, keep state between passes (what one pass
// leaves for the next is the Memo it returns), or write the status table:
// the pass returns what it found (Outcome) and its caller records it once.
// Events are raised as they happen, through Env.Notifier, in call order:
// sync-started before the first write, self-update-issued before the
// controller's own service is written. Only the funcs of Env.Fleet reach
// back into the loop, each for one named reason.
package syncpass

// Package notify carries what happened to an application to everyone who
// listens: logs, the API's event stream, webhooks, chat and forges.
//
// Registering a notifier adds it and never removes another: the API's event
// stream is itself fed by a notifier (a Recorder, or a bare Broker), so a
// registration that replaced would silently cut the UI off. Notify must
// never block a reconcile; a notifier that does I/O queues, delivers from
// its own goroutine (Runner) and reports its own failures (Counted). This
// package knows nothing of the reconciler that raises the events.
//
// The event stream is three pieces: a Recorder numbers each event, has the
// store keep it and then publishes it to a Broker, whose subscribers Stream
// writes as server-sent events (WriteSSE, in the wire.Event shape of
// WireOf), replaying from the store what a reconnecting or lagging client
// missed. Outbound notifiers (Webhook, Chat, and Forge, which sets commit
// statuses and keeps a preview's pull-request comment) come from a
// notifications file (LoadConfig, Build). Package notifytest holds the
// conformance suite every notifier runs; store's Example shows the wiring.
package notify

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// EventType names what happened. The strings are part of the wire contract.
type EventType string

// The event types. Their strings never change.
const (
	SyncStarted   EventType = "sync-started"
	SyncSucceeded EventType = "sync-succeeded"
	SyncFailed    EventType = "sync-failed"
	// DriftDetected: git moved; a commit changed what the application
	// declares and the swarm has not caught up.
	DriftDetected EventType = "drift-detected"
	// LiveDriftDetected: the swarm moved; running services no longer match
	// what git declares for a release git did not touch. A separate type, so
	// a notifier can route a change nobody recorded apart from a commit.
	LiveDriftDetected EventType = "live-drift-detected"
	// DriftConverged: the controller corrected drift without a new revision.
	// Message names the releases redeployed.
	DriftConverged EventType = "drift-converged"
	// ResourcesPruned: the controller deleted what git stopped declaring.
	// Message names what went.
	ResourcesPruned EventType = "resources-pruned"
	// PruneFailed: a deletion did not complete; the next reconcile retries.
	PruneFailed EventType = "prune-failed"
	// SwarmUnreachable: a destination stopped answering. Application is
	// empty and Swarm names it; its applications are unknown until
	// SwarmReachable.
	SwarmUnreachable EventType = "swarm-unreachable"
	// SwarmReachable: a destination answers again; its applications are
	// reconciled at once.
	SwarmReachable EventType = "swarm-reachable"
	// SelfUpdateIssued: the controller is about to write its own service
	// (the app set's self application), the last write of that sync.
	// Message says from which image to which; the controller that starts
	// from the new spec carries on from the swarm's records.
	SelfUpdateIssued EventType = "self-update-issued"
	// ReleaseRolledBack: a rollout failed after the controller's write
	// and every service of the release was written back to the last
	// revision that ran healthy (syncPolicy.rollback: release). Message
	// names the release, the failed and the restored revisions; Cause
	// says why it failed. Revision is the failed commit, now held.
	ReleaseRolledBack EventType = "release-rolled-back"
	// IncidentOpened: several applications failed for one shared cause
	// (Shared: a registry); only outbound notifiers raise it, in place of
	// each application's failure (Delivery.IncidentWindow).
	// Application is empty and Message names the applications.
	IncidentOpened EventType = "incident-opened"
	// IncidentResolved: every application of an incident recovered.
	IncidentResolved EventType = "incident-resolved"
	// TasksRebalanced: once a drained or lost node was back, the
	// controller rolled services whose tasks sat unevenly on the nodes (a
	// forced update under each one's update_config; rebalance: true).
	// Message names the node and the services, with their tasks per node.
	TasksRebalanced EventType = "tasks-rebalanced"
	// CanaryStep: a canary started, or began one of its steps (a weight
	// in place, a pause, an analysis). Message names the service, the
	// step, the weight and the canary's and stable tasks.
	CanaryStep EventType = "canary-step"
	// CanaryPromoted: a canary passed its steps, or someone promoted it;
	// the stable service runs its spec and the canary is gone.
	CanaryPromoted EventType = "canary-promoted"
	// CanaryAborted: a canary failed (an analysis, its tasks, its health
	// check) or someone aborted it; it is gone, the stable service runs as
	// before, and Revision, its commit, is held. Cause says why.
	CanaryAborted EventType = "canary-aborted"
)

// Types lists every event type, in a stable order.
func Types() []EventType {
	return []EventType{SyncStarted, SyncSucceeded, SyncFailed, DriftDetected,
		LiveDriftDetected, DriftConverged, ResourcesPruned, PruneFailed,
		SwarmUnreachable, SwarmReachable, SelfUpdateIssued, ReleaseRolledBack,
		IncidentOpened, IncidentResolved, TasksRebalanced, CanaryStep, CanaryPromoted, CanaryAborted}
}

// Event is one thing that happened to one application. It is a value with
// no references, so a notifier may keep it without copying.
type Event struct {
	Application string
	Type        EventType
	Revision    string // the resolved commit, where one applies
	// Message is for people: what happened and, for a failure, why. It
	// may be empty or span lines; notifiers must not parse it.
	Message string
	// At is when it happened; Registry.Dispatch stamps it when zero.
	At time.Time
	// Swarm is the destination as the application names it. Empty is the
	// swarm the controller runs in, an answer in itself, never "unknown".
	Swarm string
	// Actor is the authenticated name of whoever asked for the work this
	// event came out of, including the prunes and corrections done during
	// that work. Empty means the controller acted on its own.
	Actor string
	// Cause is, for a failure, its root cause in one line when one is
	// known: the failing task's service, exit code, error, the engine's
	// image-pull or placement message, an OOM kill and its last log line.
	// Masked like every output. Empty when unknown or not a failure.
	Cause string
	// Shared names what several applications depend on whose failure
	// this is ("registry 127.0.0.1:5000"), which outbound notifiers group
	// incidents by; empty for a failure of the application's own.
	Shared string
}

// actorKey is the context key of WithActor; unexported, so no other
// package can set or shadow it.
type actorKey struct{}

// WithActor marks ctx as work that the caller named name asked for. Events
// raised under it carry that name. It carries a display name only: no
// authorisation decision may ever be taken from it.
func WithActor(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, actorKey{}, name)
}

// ActorFrom returns the name ctx was marked with, or "" for work the
// controller started on its own.
func ActorFrom(ctx context.Context) string {
	name, _ := ctx.Value(actorKey{}).(string)
	return name
}

// Notifier receives events. Notify must return quickly and never block the
// caller; it is called concurrently from many reconciles. Delivery failures
// are the notifier's to report.
type Notifier interface {
	Notify(ctx context.Context, e Event)
}

// Named is implemented by notifiers that can say what they are, for the list
// logged at start.
type Named interface {
	Name() string
}

// Registry holds the active notifiers. The zero value is empty and ready;
// it is safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	notifiers []Notifier
}

// Register adds n. It never removes or replaces another notifier.
func (r *Registry) Register(n Notifier) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notifiers = append(r.notifiers, n)
}

// Notifiers returns a copy of the registered notifiers, in order.
func (r *Registry) Notifiers() []Notifier {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.notifiers)
}

// Dispatch delivers e to every registered notifier. It stamps At when the
// raiser left it zero.
func (r *Registry) Dispatch(ctx context.Context, e Event) {
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	// A copy of the list: a notifier that registers another from Notify
	// must not deadlock on the registry's lock.
	for _, n := range r.Notifiers() {
		n.Notify(ctx, e)
	}
}

// Names returns the names of the registered notifiers in registration
// order ("unnamed" for one that does not say), as a new slice.
func (r *Registry) Names() []string {
	names := []string{}
	for _, n := range r.Notifiers() {
		name := "unnamed"
		if nn, ok := n.(Named); ok {
			name = nn.Name()
		}
		names = append(names, name)
	}
	return names
}

// LogActive logs, once at start, which notifiers are registered.
func (r *Registry) LogActive(logger *slog.Logger) {
	names := r.Names()
	logger.Info("notifiers active", "count", len(names), "notifiers", names)
}

package notify

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultIncidentWindow is how long an outbound notifier gathers the
// failures of one shared cause (Event.Shared) before it sends them as one
// incident, when Delivery.IncidentWindow is zero.
const DefaultIncidentWindow = 30 * time.Second

// incidents folds, for one outbound notifier, the failures several
// applications share into one incident per cause and its recovery into
// one event: a registry down for five applications pages once, not five
// times, and once more when all five run again. The store and the event
// stream are no outbound notifiers: they keep every event. It is safe for
// concurrent use.
//
// The first failure of a cause opens an incident that gathers for the
// window; then a failure of one application alone is sent as it was, and
// of several as one IncidentOpened naming them all. Later failures of the
// same cause join the incident unsent. Each application's next
// sync-succeeded recovers it, unsent; the last sends IncidentResolved.
// See TestIncidentsFoldASharedCause.
type incidents struct {
	window time.Duration
	mu     sync.Mutex
	open   map[string]*incident // by Event.Shared
}

// incident is one shared cause's failures.
type incident struct {
	first  Event
	since  time.Time       // when the first failure arrived
	apps   []string        // every application that failed, in order
	failed map[string]bool // those not recovered
	sent   bool            // IncidentOpened went out
}

// newIncidents gathers for window; nil when window is negative (off).
func newIncidents(window time.Duration) *incidents {
	if window < 0 {
		return nil
	}
	if window == 0 {
		window = DefaultIncidentWindow
	}
	return &incidents{window: window, open: map[string]*incident{}}
}

// failure reports whether e is a failure a shared cause can make.
func failure(e Event) bool {
	return e.Shared != "" && (e.Type == SyncFailed || e.Type == ReleaseRolledBack)
}

// take looks at e, which the notifier's routing matches or not, at now,
// and reports whether the notifier sends it as it is: false for a failure
// gathered into an incident, and for a recovery folded into one.
func (in *incidents) take(e Event, matches bool, now time.Time) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if failure(e) && matches {
		inc := in.open[e.Shared]
		if inc == nil {
			inc = &incident{first: e, since: now, failed: map[string]bool{}}
			in.open[e.Shared] = inc
		}
		if !slices.Contains(inc.apps, e.Application) {
			inc.apps = append(inc.apps, e.Application)
		}
		inc.failed[e.Application] = true
		return false
	}
	if e.Type != SyncSucceeded {
		return true
	}
	for _, inc := range in.open {
		if inc.sent && inc.failed[e.Application] {
			delete(inc.failed, e.Application)
			return false
		}
	}
	return true
}

// due returns, at now, what the incidents have to send: each gathered
// cause whose window passed (the one failure as it was, or one
// IncidentOpened), and IncidentResolved for each sent incident every
// application of which recovered.
func (in *incidents) due(now time.Time) []Event {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []Event
	for _, cause := range slices.Sorted(maps.Keys(in.open)) {
		inc := in.open[cause]
		switch {
		case !inc.sent && now.Sub(inc.since) < in.window:
		case !inc.sent && len(inc.apps) == 1:
			out = append(out, inc.first)
			delete(in.open, cause)
		case !inc.sent:
			inc.sent = true
			out = append(out, inc.event(IncidentOpened, now, fmt.Sprintf("%s: %d applications failed: %s", cause, len(inc.apps), strings.Join(inc.apps, ", "))))
		case len(inc.failed) == 0:
			out = append(out, inc.event(IncidentResolved, now, fmt.Sprintf("%s: every application recovered: %s", cause, strings.Join(inc.apps, ", "))))
			delete(in.open, cause)
		}
	}
	return out
}

// event is an incident's event of type t, about no one application.
func (inc *incident) event(t EventType, now time.Time, msg string) Event {
	e := Event{Type: t, Swarm: inc.first.Swarm, Message: msg, At: now, Shared: inc.first.Shared}
	if t == IncidentOpened {
		e.Cause = inc.first.Cause
	}
	return e
}

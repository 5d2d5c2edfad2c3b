// Package health says whether what runs in a swarm works: per service,
// from its tasks and update status, and rolled up per release and per
// application (worst wins).
//
// It is pure: every function takes values (an Input struct read from a
// live snapshot by the caller) and returns values. It does no Docker, disk
// or network I/O, keeps no state and is safe to call concurrently.
//
// It must never report a service it could not read as Missing: ReadFailed
// keeps "could not ask" (Unknown) apart from "nothing there" (Missing), so
// a daemon outage never looks like an empty swarm to anything that acts on
// health. See TestServiceUnknownWhenSwarmUnreadable.
//
// A rollback Swarm performed (update_config.failure_action: rollback) and a
// paused update are Degraded with the daemon's reason; health reports them
// and never asks for anything to be done about them.
package health

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// State is the health of a service, release or application. The zero value
// is invalid: health was not computed.
type State string

const (
	// Healthy: every desired task runs (or a job completed) and no update is
	// under way.
	Healthy State = "healthy"
	// Progressing: tasks are being started or an update is rolling out, and
	// nothing has failed in a way that needs a person yet.
	Progressing State = "progressing"
	// Unknown: the swarm could not be read, so nothing is known.
	Unknown State = "unknown"
	// Missing: declared in git, absent from the swarm.
	Missing State = "missing"
	// Degraded: tasks fail, cannot be scheduled, keep restarting, a job
	// failed, or Swarm paused or rolled back an update.
	Degraded State = "degraded"
)

// severity orders states for roll-ups, best first. Unknown ranks below
// Missing and Degraded on purpose: a service known to be broken must not be
// hidden behind one that could not be read, yet a read failure still
// outranks Healthy and Progressing so it is never rolled up into "fine".
// See TestRollUpRanksKnownProblemsAboveUnknown.
var severity = map[State]int{
	Healthy:     1,
	Progressing: 2,
	Unknown:     3,
	Missing:     4,
	Degraded:    5,
}

// Valid reports whether s is one of the named states.
func (s State) Valid() bool { return severity[s] > 0 }

// Worse reports whether s ranks worse than other in roll-ups. An invalid
// state ranks below every valid one.
func (s State) Worse(other State) bool { return severity[s] > severity[other] }

// Result is the health of one service, release or application. Running and
// Desired count tasks: for a long-running service the tasks that run and
// the tasks wanted, for a job the completed tasks and the completions
// wanted. Roll-ups sum them.
type Result struct {
	State   State  `json:"state"`
	Message string `json:"message"`
	Running int    `json:"running"`
	Desired int    `json:"desired"`
}

// Release rolls the results of a release's services (keyed by service name)
// up into one: the worst state wins, the message names the worst service
// (the first by name among equals), and Running and Desired are summed. A
// release without services is Healthy. results is not modified or kept.
func Release(results map[string]Result) Result {
	return rollUp(results, "service", "no services")
}

// Application rolls the results of an application's releases (keyed by
// release name, each usually made by Release) up the same way.
func Application(releases map[string]Result) Result {
	return rollUp(releases, "release", "no releases")
}

// rollUp implements Release and Application; noun names what results
// holds in the message, empty is the message for no results.
func rollUp(results map[string]Result, noun, empty string) Result {
	if len(results) == 0 {
		return Result{State: Healthy, Message: empty}
	}
	names := slices.Sorted(maps.Keys(results))
	out := Result{State: results[names[0]].State}
	worst := names[0]
	notHealthy := 0
	for _, name := range names {
		r := results[name]
		out.Running += r.Running
		out.Desired += r.Desired
		if r.State != Healthy {
			notHealthy++
		}
		if r.State.Worse(out.State) {
			out.State, worst = r.State, name
		}
	}
	if out.State == Healthy {
		out.Message = fmt.Sprintf("%d/%d running", out.Running, out.Desired)
		return out
	}
	out.Message = worst + ": " + results[worst].Message
	if more := notHealthy - 1; more > 0 {
		out.Message += fmt.Sprintf(" (and %d more %s not healthy)", more, plural(noun, more))
	}
	return out
}

func plural(noun string, n int) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// joinReasons lists distinct non-empty reasons in order, for messages.
func joinReasons(reasons []string) string {
	var out []string
	for _, r := range reasons {
		r = strings.TrimSpace(r)
		if r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return strings.Join(out, "; ")
}

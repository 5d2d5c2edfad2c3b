package canary

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// settleRetry is how soon a canary whose tasks are still starting is
// looked at again; the swarm's events usually wake it sooner.
const settleRetry = 2 * time.Second

// State is what a running canary records in the swarm, as a label of its
// own service (Encode), so that any controller carries on from it: the
// render it runs, the step it is on and since when, what the stable
// service ran before, and the current step's analysis. The zero value is
// no canary.
type State struct {
	// Commit is the commit the canary runs; Key identifies the render (the
	// commit and the artifact versions), so a newer one starts over.
	Commit string `json:"commit"`
	Key    string `json:"key"`
	// Step is the index of the current step; len(Steps) once every step
	// passed. Since is when it began, Started when the canary did.
	Step    int       `json:"step"`
	Since   time.Time `json:"since"`
	Started time.Time `json:"started"`
	// Weight is the weight last put in place (0 before the first).
	Weight int `json:"weight"`
	// Total is the service's replicas as the new spec declares them, and
	// Stable the stable service's replicas before the canary began: what
	// an abort gives it back.
	Total  int `json:"total"`
	Stable int `json:"stable"`
	// Paused says why the canary waits for someone to promote or abort it
	// ("" while it runs on its own).
	Paused string `json:"paused,omitempty"`
	// Runs are the current analysis step's metrics, in its order.
	Runs []Run `json:"runs,omitempty"`
}

// Encode is s as the label keeps it.
func (s State) Encode() string {
	b, err := json.Marshal(s)
	if err != nil { // no field of State fails to encode
		return "{}"
	}
	return string(b)
}

// Decode reads a State that Encode wrote.
func Decode(label string) (State, error) {
	var s State
	if err := json.Unmarshal([]byte(label), &s); err != nil {
		return State{}, fmt.Errorf("read canary state: %w", err)
	}
	if s.Key == "" || s.Step < 0 {
		return State{}, fmt.Errorf("read canary state: no render or a negative step")
	}
	return s, nil
}

// Start is the state of a canary of the render key (at commit) that
// begins at now, for a service of total replicas whose stable service runs
// stable.
func Start(commit, key string, total, stable int, now time.Time) State {
	return State{Commit: commit, Key: key, Since: now.UTC(), Started: now.UTC(), Total: total, Stable: stable}
}

// Replicas is how a weight in percent splits a service of total replicas:
// the canary runs the weight's share, rounded, and the stable service the
// rest, so the total stays and DNS round robin, which spreads requests by
// task, gives the canary about the weight. A weight above 0 runs at least
// one canary task and, below 100, keeps at least one stable task; a
// service of one replica runs one of each (half the traffic) until 100.
func Replicas(weight, total int) (canary, stable int) {
	switch {
	case weight <= 0:
		return 0, total
	case weight >= 100:
		return total, 0
	case total <= 1:
		return 1, total
	}
	c := min(max((weight*total+50)/100, 1), total-1)
	return c, total - c
}

// Observation is one look at the swarm for a running canary, and what
// someone asked of it.
type Observation struct {
	Now time.Time
	// CanaryReplicas and StableReplicas are the two services' replicas as
	// written.
	CanaryReplicas int
	StableReplicas int
	// Settled: the canary runs CanaryReplicas tasks of its spec, healthy.
	Settled bool
	// Failures counts the canary's tasks that failed or exited since the
	// step began; Cause says what the last one said.
	Failures int
	Cause    string
	// Timeout bounds how long a weight may take to settle.
	Timeout time.Duration
	// Promote and Abort: someone asked.
	Promote, Abort bool
}

// Action is what a pass does for a running canary. The zero value waits.
type Action int

const (
	// Wait writes nothing: look again at Decision.Due (zero: on the
	// application's own schedule, as when it waits for a person).
	Wait Action = iota
	// Measure makes the measurements of Decision.Metrics and hands them to
	// Measured, which decides again.
	Measure
	// ScaleCanary writes the canary with Decision.Canary replicas and
	// Decision.State; ScaleStable writes the stable service's replicas.
	ScaleCanary
	ScaleStable
	// Save writes Decision.State only.
	Save
	// Promote gives the stable service the canary's spec, then removes
	// the canary; Abort removes it and gives the stable service its
	// replicas back. Decision.Why says why.
	Promote
	Abort
)

// Decision is what Next decided for one pass.
type Decision struct {
	Action Action
	State  State
	// Canary and Stable are the replicas a scale writes.
	Canary, Stable int
	// Metrics are the indexes, in the step's analysis, of the metrics due.
	Metrics []int
	// Due is when to look again; zero leaves it to the schedule.
	Due time.Time
	Why string
	// Stepped says State.Step moved on: a step began.
	Stepped bool
}

// Next decides what one pass does for a canary of s in state st, as o
// shows it: at most one write, and when to look again. It is pure; the
// rules run in order, and TestNext names each: a request to abort, task
// failures past MaxFailures, a request to promote, every step passed
// (promote), then the current step's own rule.
func Next(s Strategy, st State, o Observation) Decision {
	switch {
	case o.Abort:
		return Decision{Action: Abort, State: st, Why: "aborted by request"}
	case o.Failures > s.MaxFailures:
		why := fmt.Sprintf("%d of the canary's tasks failed during step %d (maxFailures %d)", o.Failures, st.Step+1, s.MaxFailures)
		if o.Cause != "" {
			why += ": " + o.Cause
		}
		return Decision{Action: Abort, State: st, Why: why}
	case o.Promote:
		return Decision{Action: Promote, State: st, Why: "promoted by request"}
	case st.Step >= len(s.Steps):
		return Decision{Action: Promote, State: st, Why: fmt.Sprintf("every step of %d passed", len(s.Steps))}
	}
	step := s.Steps[st.Step]
	switch {
	case step.SetWeight != nil:
		return weigh(st, o, *step.SetWeight)
	case step.Pause != nil:
		return pause(st, o, step.Pause.Duration)
	case step.Analysis != nil:
		return analyse(*step.Analysis, st, o)
	}
	return advance(st, o.Now)
}

// weigh puts a weight in place: a service that grows is written before
// one that shrinks, and the canary must run its tasks healthy, within
// the timeout, before the stable service gives any up.
func weigh(st State, o Observation, weight int) Decision {
	canary, stable := Replicas(weight, st.Total)
	switch {
	case o.StableReplicas < stable:
		return Decision{Action: ScaleStable, State: st, Stable: stable, Due: o.Now}
	case o.CanaryReplicas < canary:
		return Decision{Action: ScaleCanary, State: st, Canary: canary, Due: o.Now.Add(settleRetry)}
	case !o.Settled && o.Timeout > 0 && o.Now.Sub(st.Since) > o.Timeout:
		return Decision{Action: Abort, State: st, Why: fmt.Sprintf("the canary did not run %d healthy tasks within %s", o.CanaryReplicas, o.Timeout)}
	case !o.Settled:
		return Decision{Action: Wait, State: st, Due: o.Now.Add(settleRetry)}
	case o.StableReplicas > stable:
		return Decision{Action: ScaleStable, State: st, Stable: stable, Due: o.Now}
	case o.CanaryReplicas > canary:
		return Decision{Action: ScaleCanary, State: st, Canary: canary, Due: o.Now}
	}
	st.Weight = weight
	return advance(st, o.Now)
}

// pause waits out a duration, or for someone when it has none.
func pause(st State, o Observation, d time.Duration) Decision {
	switch {
	case d > 0 && !o.Now.Before(st.Since.Add(d)):
		return advance(st, o.Now)
	case d > 0:
		return Decision{Action: Wait, State: st, Due: st.Since.Add(d)}
	case st.Paused == "":
		st.Paused = "paused until promoted"
		return Decision{Action: Save, State: st}
	}
	return Decision{Action: Wait, State: st}
}

// analyse runs an analysis step: its metrics are measured when due, and
// their verdict ends the step (success), the canary (failure) or pauses
// it (inconclusive).
func analyse(a Analysis, st State, o Observation) Decision {
	if len(st.Runs) != len(a.Metrics) {
		st.Runs = make([]Run, len(a.Metrics))
		for i, m := range a.Metrics {
			st.Runs[i] = m.start(st.Since)
		}
	}
	switch phase, why := Verdict(st.Runs); phase {
	case PhaseFailed:
		return Decision{Action: Abort, State: st, Why: "analysis failed: " + why}
	case PhaseInconclusive:
		if st.Paused == "" {
			st.Paused = "analysis inconclusive: " + why
			return Decision{Action: Save, State: st}
		}
		return Decision{Action: Wait, State: st}
	case PhaseSuccessful:
		return advance(st, o.Now)
	}
	var due []int
	var next time.Time
	for i, r := range st.Runs {
		switch {
		case r.Phase != PhaseRunning:
		case !o.Now.Before(r.Next):
			due = append(due, i)
		case next.IsZero() || r.Next.Before(next):
			next = r.Next
		}
	}
	if len(due) > 0 {
		return Decision{Action: Measure, State: st, Metrics: due}
	}
	return Decision{Action: Wait, State: st, Due: next}
}

// advance begins the step after st's, now.
func advance(st State, now time.Time) Decision {
	st.Step++
	st.Since, st.Runs, st.Paused = now.UTC(), nil, ""
	return Decision{Action: Save, State: st, Due: now, Stepped: true}
}

// Measured records the measurements got of the metrics d.Metrics named
// (in that order), made at o.Now, and decides again: what Next decides,
// and at least a Save of what was measured.
func Measured(s Strategy, d Decision, got []Sample, o Observation) Decision {
	st := d.State
	st.Runs = slices.Clone(st.Runs)
	a := s.Steps[st.Step].Analysis
	for i, idx := range d.Metrics {
		if i < len(got) {
			st.Runs[idx] = a.Metrics[idx].Record(st.Runs[idx], got[i], o.Now)
		}
	}
	next := Next(s, st, o)
	switch next.Action {
	case Measure:
		next.Action, next.Metrics, next.Due = Save, nil, o.Now
	case Wait:
		next.Action = Save
	}
	return next
}

package canary

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Phase is where a measurement, a metric or an analysis stands. The zero
// value is not a phase.
type Phase string

const (
	PhaseRunning      Phase = "running"
	PhaseSuccessful   Phase = "successful"
	PhaseFailed       Phase = "failed"
	PhaseInconclusive Phase = "inconclusive"
	// PhaseError: a measurement could not be made or judged; a metric
	// whose errors in a row pass its ConsecutiveErrorLimit fails with it.
	PhaseError Phase = "error"
)

// Bounds of what a Run keeps, so a canary's state stays a small label.
const (
	MaxMeasurements = 10
	maxValue        = 120
)

// Run is one metric's measurements during the current analysis step:
// the counts its limits are judged by, when the next one is due, and the
// newest measurements with their values.
type Run struct {
	Metric string `json:"metric"`
	Phase  Phase  `json:"phase"`
	// Count counts the measurements judged (errors are not).
	Count                int `json:"count"`
	Successful           int `json:"successful,omitempty"`
	Failed               int `json:"failed,omitempty"`
	Inconclusive         int `json:"inconclusive,omitempty"`
	Errors               int `json:"errors,omitempty"`
	ConsecutiveErrors    int `json:"consecutiveErrors,omitempty"`
	ConsecutiveSuccesses int `json:"consecutiveSuccesses,omitempty"`
	// Next is when the next measurement is due, while Phase is running.
	Next time.Time `json:"next"`
	// Message says why the metric ended as it did.
	Message      string        `json:"message,omitempty"`
	Measurements []Measurement `json:"measurements,omitempty"`
}

// Measurement is one measurement as the status shows it.
type Measurement struct {
	At    time.Time `json:"at"`
	Phase Phase     `json:"phase"`
	// Value is the result, as JSON cut to a bounded length; Error why
	// there is none (or why it could not be judged).
	Value string `json:"value,omitempty"`
	Error string `json:"error,omitempty"`
}

// Sample is what a provider returned for one measurement.
type Sample struct {
	Result any
	Err    error
}

// start is the run of m as its analysis step begins at since.
func (m Metric) start(since time.Time) Run {
	return Run{Metric: m.Name, Phase: PhaseRunning, Next: since.Add(m.InitialDelay)}
}

// Record adds one measurement, made at now, to r and judges the metric
// again (see assess); a metric still running is due again Interval later.
// It is pure.
func (m Metric) Record(r Run, got Sample, now time.Time) Run {
	meas := Measurement{At: now.UTC()}
	phase, err := PhaseError, got.Err
	if err == nil {
		meas.Value = shorten(got.Result)
		phase, err = m.Judge(got.Result)
	}
	if err != nil {
		meas.Error = cut(err.Error())
	}
	meas.Phase = phase
	switch phase {
	case PhaseError:
		r.Errors++
		r.ConsecutiveErrors++
	case PhaseSuccessful:
		r.Count, r.Successful, r.ConsecutiveSuccesses, r.ConsecutiveErrors = r.Count+1, r.Successful+1, r.ConsecutiveSuccesses+1, 0
	case PhaseFailed:
		r.Count, r.Failed, r.ConsecutiveSuccesses, r.ConsecutiveErrors = r.Count+1, r.Failed+1, 0, 0
	case PhaseInconclusive:
		r.Count, r.Inconclusive, r.ConsecutiveSuccesses, r.ConsecutiveErrors = r.Count+1, r.Inconclusive+1, 0, 0
	}
	r.Measurements = append(r.Measurements, meas)
	if n := len(r.Measurements); n > MaxMeasurements {
		r.Measurements = r.Measurements[n-MaxMeasurements:]
	}
	r.Phase, r.Message = m.assess(r)
	r.Next = time.Time{}
	if r.Phase == PhaseRunning {
		r.Next = now.Add(m.Interval)
	}
	return r
}

// assess is the metric's phase after the measurements r counts, with why
// it ended: failures past FailureLimit fail it, errors in a row past
// ConsecutiveErrorLimit make it an error, inconclusive ones past
// InconclusiveLimit make it inconclusive; ConsecutiveSuccessLimit
// successes in a row, or Count measurements, succeed it (Count reached
// short of a streak that was asked for is inconclusive).
func (m Metric) assess(r Run) (Phase, string) {
	switch {
	case r.Failed > m.FailureLimit:
		return PhaseFailed, fmt.Sprintf("%d of %d measurements failed (failureLimit %d)", r.Failed, r.Count, m.FailureLimit)
	case r.ConsecutiveErrors > m.ConsecutiveErrorLimit:
		return PhaseError, fmt.Sprintf("%d measurements in a row could not be made (consecutiveErrorLimit %d)", r.ConsecutiveErrors, m.ConsecutiveErrorLimit)
	case r.Inconclusive > m.InconclusiveLimit:
		return PhaseInconclusive, fmt.Sprintf("%d of %d measurements inconclusive (inconclusiveLimit %d)", r.Inconclusive, r.Count, m.InconclusiveLimit)
	case m.ConsecutiveSuccessLimit > 0 && r.ConsecutiveSuccesses >= m.ConsecutiveSuccessLimit:
		return PhaseSuccessful, fmt.Sprintf("%d measurements in a row succeeded", r.ConsecutiveSuccesses)
	case r.Count >= m.Count && m.ConsecutiveSuccessLimit > 0:
		return PhaseInconclusive, fmt.Sprintf("%d measurements made without %d successes in a row", r.Count, m.ConsecutiveSuccessLimit)
	case r.Count >= m.Count:
		return PhaseSuccessful, fmt.Sprintf("%d of %d measurements succeeded", r.Successful, r.Count)
	}
	return PhaseRunning, ""
}

// shorten is a result as the status shows it: JSON, cut to maxValue.
func shorten(v any) string {
	switch v := v.(type) {
	case float64:
		return strconv.FormatFloat(v, 'g', 6, 64)
	case int:
		return strconv.Itoa(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return cut(fmt.Sprint(v))
	}
	return cut(string(b))
}

// cut bounds a string the state keeps.
func cut(s string) string {
	if len(s) <= maxValue {
		return s
	}
	return s[:maxValue-3] + "..."
}

// Verdict folds the runs of an analysis step into one phase, the step's:
// a metric failed or in error fails it, one inconclusive (none failing)
// makes it inconclusive, all successful succeed it; else it runs. why
// names the metric that decided.
func Verdict(runs []Run) (phase Phase, why string) {
	done := 0
	for _, r := range runs {
		switch r.Phase {
		case PhaseFailed, PhaseError:
			return PhaseFailed, "metric " + r.Metric + ": " + r.Message + lastValues(r)
		case PhaseInconclusive:
			phase, why = PhaseInconclusive, "metric "+r.Metric+": "+r.Message+lastValues(r)
		case PhaseSuccessful:
			done++
		}
	}
	switch {
	case phase != "":
		return phase, why
	case done == len(runs):
		return PhaseSuccessful, ""
	}
	return PhaseRunning, ""
}

// lastValues names r's newest measurements' values (or errors), for the
// message of a verdict.
func lastValues(r Run) string {
	s := ""
	from := max(0, len(r.Measurements)-3)
	for _, m := range r.Measurements[from:] {
		v := m.Value
		if m.Error != "" {
			v = m.Error
		}
		if s != "" {
			s += ", "
		}
		s += v
	}
	if s == "" {
		return ""
	}
	return " (last: " + s + ")"
}

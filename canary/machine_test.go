package canary

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// at is t0 plus d: the injected clock of the step machine's tests.
func at(d time.Duration) time.Time { return t0.Add(d) }

func weight(w int) Step { return Step{SetWeight: &w} }

// strategy is setWeight 20, pause 30s, analysis errors (every 10s, 3
// times, one failure tolerated, after 5s), setWeight 60, pause until
// promoted.
func strategy(t *testing.T) Strategy {
	t.Helper()
	ok, err := NewCondition("result < 0.05")
	if err != nil {
		t.Fatal(err)
	}
	return Strategy{Steps: []Step{
		weight(20),
		{Pause: &Pause{Duration: 30 * time.Second}},
		{Analysis: &Analysis{Metrics: []Metric{{Name: "errors", Interval: 10 * time.Second, InitialDelay: 5 * time.Second,
			Count: 3, FailureLimit: 1, ConsecutiveErrorLimit: 4, SuccessCondition: ok, Prometheus: &Prometheus{Address: "http://p", Query: "q"}}}}},
		weight(60),
		{Pause: &Pause{}},
	}}
}

// runAt is a run of metric errors with the given counts, due at next.
func runAt(next time.Time, count, failed int) Run {
	return Run{Metric: "errors", Phase: PhaseRunning, Count: count, Successful: count - failed, Failed: failed, Next: next}
}

func TestNext(t *testing.T) {
	s := strategy(t)
	base := State{Commit: "c2", Key: "k2", Total: 5, Stable: 5, Since: t0, Started: t0}
	step := func(i int, since time.Time, mod ...func(*State)) State {
		st := base
		st.Step, st.Since = i, since
		for _, m := range mod {
			m(&st)
		}
		return st
	}
	weightIs := func(w int) func(*State) { return func(st *State) { st.Weight = w } }
	for _, tc := range []struct {
		name string
		st   State
		o    Observation
		want Decision
	}{
		{name: "a request to abort aborts whatever the step",
			st: step(1, t0), o: Observation{Now: at(time.Second), Abort: true, Promote: true},
			want: Decision{Action: Abort, State: step(1, t0), Why: "aborted by request"}},
		{name: "task failures past maxFailures abort, naming the cause",
			st: step(0, t0), o: Observation{Now: at(time.Second), Failures: 1, Cause: "exit code 1"},
			want: Decision{Action: Abort, State: step(0, t0), Why: "1 of the canary's tasks failed during step 1 (maxFailures 0): exit code 1"}},
		{name: "a request to promote promotes a paused canary",
			st: step(4, t0, func(st *State) { st.Paused = "paused until promoted" }), o: Observation{Now: at(time.Second), Promote: true},
			want: Decision{Action: Promote, State: step(4, t0, func(st *State) { st.Paused = "paused until promoted" }), Why: "promoted by request"}},
		{name: "every step passed promotes",
			st: step(5, t0), o: Observation{Now: at(time.Second)},
			want: Decision{Action: Promote, State: step(5, t0), Why: "every step of 5 passed"}},
		{name: "a weight starts with the canary's tasks",
			st: step(0, t0), o: Observation{Now: at(time.Second), StableReplicas: 5},
			want: Decision{Action: ScaleCanary, State: step(0, t0), Canary: 1, Due: at(3 * time.Second)}},
		{name: "a weight waits for the canary to settle",
			st: step(0, t0), o: Observation{Now: at(time.Second), StableReplicas: 5, CanaryReplicas: 1},
			want: Decision{Action: Wait, State: step(0, t0), Due: at(3 * time.Second)}},
		{name: "a canary not settled within the timeout aborts",
			st: step(0, t0), o: Observation{Now: at(2 * time.Minute), StableReplicas: 5, CanaryReplicas: 1, Timeout: time.Minute},
			want: Decision{Action: Abort, State: step(0, t0), Why: "the canary did not run 1 healthy tasks within 1m0s"}},
		{name: "once the canary settled, the stable service gives up its share",
			st: step(0, t0), o: Observation{Now: at(time.Second), StableReplicas: 5, CanaryReplicas: 1, Settled: true},
			want: Decision{Action: ScaleStable, State: step(0, t0), Stable: 4, Due: at(time.Second)}},
		{name: "a weight in place begins the next step",
			st: step(0, t0), o: Observation{Now: at(time.Second), StableReplicas: 4, CanaryReplicas: 1, Settled: true},
			want: Decision{Action: Save, State: step(1, at(time.Second), weightIs(20)), Due: at(time.Second), Stepped: true}},
		{name: "a stable service short of its share grows before the canary does",
			st: step(3, t0, weightIs(20)), o: Observation{Now: at(time.Second), StableReplicas: 1, CanaryReplicas: 1, Settled: true},
			want: Decision{Action: ScaleStable, State: step(3, t0, weightIs(20)), Stable: 2, Due: at(time.Second)}},
		{name: "a pause waits out its duration",
			st: step(1, t0), o: Observation{Now: at(10 * time.Second)},
			want: Decision{Action: Wait, State: step(1, t0), Due: at(30 * time.Second)}},
		{name: "a pause that ran out begins the next step",
			st: step(1, t0), o: Observation{Now: at(30 * time.Second)},
			want: Decision{Action: Save, State: step(2, at(30*time.Second)), Due: at(30 * time.Second), Stepped: true}},
		{name: "a pause without a duration records that it waits for someone",
			st: step(4, t0), o: Observation{Now: at(time.Second)},
			want: Decision{Action: Save, State: step(4, t0, func(st *State) { st.Paused = "paused until promoted" })}},
		{name: "a canary paused until promoted writes nothing more",
			st: step(4, t0, func(st *State) { st.Paused = "paused until promoted" }), o: Observation{Now: at(time.Hour)},
			want: Decision{Action: Wait, State: step(4, t0, func(st *State) { st.Paused = "paused until promoted" })}},
		{name: "an analysis waits its initial delay",
			st: step(2, t0), o: Observation{Now: at(time.Second)},
			want: Decision{Action: Wait, State: step(2, t0, func(st *State) { st.Runs = []Run{runAt(at(5*time.Second), 0, 0)} }), Due: at(5 * time.Second)}},
		{name: "an analysis measures the metrics due",
			st: step(2, t0), o: Observation{Now: at(5 * time.Second)},
			want: Decision{Action: Measure, State: step(2, t0, func(st *State) { st.Runs = []Run{runAt(at(5*time.Second), 0, 0)} }), Metrics: []int{0}}},
		{name: "a failed metric aborts",
			st: step(2, t0, func(st *State) {
				st.Runs = []Run{{Metric: "errors", Phase: PhaseFailed, Message: "2 of 2 measurements failed (failureLimit 1)", Measurements: []Measurement{{Value: "0.5"}}}}
			}),
			o: Observation{Now: at(time.Minute)},
			want: Decision{Action: Abort, State: step(2, t0, func(st *State) {
				st.Runs = []Run{{Metric: "errors", Phase: PhaseFailed, Message: "2 of 2 measurements failed (failureLimit 1)", Measurements: []Measurement{{Value: "0.5"}}}}
			}), Why: "analysis failed: metric errors: 2 of 2 measurements failed (failureLimit 1) (last: 0.5)"}},
		{name: "an inconclusive metric pauses the canary",
			st: step(2, t0, func(st *State) { st.Runs = []Run{{Metric: "errors", Phase: PhaseInconclusive, Message: "m"}} }),
			o:  Observation{Now: at(time.Minute)},
			want: Decision{Action: Save, State: step(2, t0, func(st *State) {
				st.Runs = []Run{{Metric: "errors", Phase: PhaseInconclusive, Message: "m"}}
				st.Paused = "analysis inconclusive: metric errors: m"
			})}},
		{name: "a successful analysis begins the next step",
			st:   step(2, t0, func(st *State) { st.Runs = []Run{{Metric: "errors", Phase: PhaseSuccessful}} }),
			o:    Observation{Now: at(time.Minute)},
			want: Decision{Action: Save, State: step(3, at(time.Minute)), Due: at(time.Minute), Stepped: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Next(s, tc.st, tc.o)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Next() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The analysis of the strategy walks measurement by measurement: each is
// recorded and the step decided again, until the metric's verdict.
func TestMeasuredWalksAnAnalysisToItsVerdict(t *testing.T) {
	s := strategy(t)
	for _, tc := range []struct {
		name   string
		values []float64
		want   Action
		why    string
	}{
		{name: "three good measurements pass the step", values: []float64{0.01, 0.02, 0.0}, want: Save},
		{name: "one bad measurement is within failureLimit 1", values: []float64{0.5, 0.01, 0.02}, want: Save},
		{name: "a second bad measurement aborts at once", values: []float64{0.5, 0.5}, want: Abort,
			why: "analysis failed: metric errors: 2 of 2 measurements failed (failureLimit 1) (last: 0.5, 0.5)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := State{Key: "k", Total: 5, Step: 2, Since: t0}
			now := at(5 * time.Second)
			var d Decision
			for i, v := range tc.values {
				d = Next(s, st, Observation{Now: now})
				if d.Action != Measure {
					t.Fatalf("measurement %d: Next = %v, want Measure", i, d.Action)
				}
				d = Measured(s, d, []Sample{{Result: v}}, Observation{Now: now})
				st, now = d.State, now.Add(10*time.Second)
			}
			if d.Action != tc.want || d.Why != tc.why {
				t.Fatalf("last decision %v %q, want %v %q", d.Action, d.Why, tc.want, tc.why)
			}
			if tc.want == Save && d.State.Step != 3 {
				t.Errorf("step after the analysis = %d, want 3", d.State.Step)
			}
		})
	}
}

func TestReplicas(t *testing.T) {
	for _, tc := range []struct{ weight, total, canary, stable int }{
		{0, 5, 0, 5}, {20, 5, 1, 4}, {40, 5, 2, 3}, {50, 4, 2, 2}, {10, 5, 1, 4}, {90, 5, 4, 1},
		{99, 10, 9, 1}, {1, 10, 1, 9}, {100, 5, 5, 0}, {30, 1, 1, 1}, {100, 1, 1, 0},
	} {
		c, s := Replicas(tc.weight, tc.total)
		if c != tc.canary || s != tc.stable {
			t.Errorf("Replicas(%d, %d) = %d, %d; want %d, %d", tc.weight, tc.total, c, s, tc.canary, tc.stable)
		}
	}
}

func TestStateRoundTripsThroughItsLabel(t *testing.T) {
	st := State{Commit: "c", Key: "k", Step: 2, Since: t0, Started: t0, Weight: 20, Total: 5, Stable: 5,
		Runs: []Run{{Metric: "errors", Phase: PhaseRunning, Count: 1, Next: at(time.Second), Measurements: []Measurement{{At: t0, Phase: PhaseSuccessful, Value: "0.01"}}}}}
	got, err := Decode(st.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, got); diff != "" {
		t.Errorf("Decode(Encode()) mismatch (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "{", `{"step":1}`, `{"key":"k","step":-1}`} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("Decode(%q) = nil error, want one", bad)
		}
	}
}

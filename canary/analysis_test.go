package canary

import (
	"errors"
	"math"
	"testing"
	"time"
)

func condition(t *testing.T, src string) *Condition {
	t.Helper()
	c, err := NewCondition(src)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestJudge(t *testing.T) {
	vector := []any{0.02, 0.3}
	web := map[string]any{"data": map[string]any{"ok": true, "rate": 0.97}}
	for _, tc := range []struct {
		name             string
		success, failure string
		result           any
		want             Phase
		wantErr          bool
	}{
		{name: "no condition: a measured result succeeds", result: 1.0, want: PhaseSuccessful},
		{name: "a success condition that holds succeeds", success: "result < 0.05", result: 0.01, want: PhaseSuccessful},
		{name: "a success condition that fails, alone, fails", success: "result < 0.05", result: 0.2, want: PhaseFailed},
		{name: "a failure condition that holds, alone, fails", failure: "result > 0.1", result: 0.2, want: PhaseFailed},
		{name: "a failure condition that does not hold, alone, succeeds", failure: "result > 0.1", result: 0.01, want: PhaseSuccessful},
		{name: "with both, a result meeting neither is inconclusive", success: "result < 0.05", failure: "result > 0.1", result: 0.07, want: PhaseInconclusive},
		{name: "with both, the failure condition wins", success: "result < 1", failure: "result > 0.1", result: 0.5, want: PhaseFailed},
		{name: "a vector is indexed", success: "result[0] < 0.05", result: vector, want: PhaseSuccessful},
		{name: "all over a vector", success: "all(result, # < 0.05)", result: vector, want: PhaseFailed},
		{name: "an empty vector cannot be judged", success: "result[0] < 0.05", result: []any{}, wantErr: true},
		{name: "a web answer's fields", success: "result.data.ok && result.data.rate >= 0.95", result: web, want: PhaseSuccessful},
		{name: "a job's exit code", success: "result == 0", result: 1, want: PhaseFailed},
		{name: "isNaN tells a query over nothing", failure: "isNaN(result)", result: math.NaN(), want: PhaseFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m Metric
			if tc.success != "" {
				m.SuccessCondition = condition(t, tc.success)
			}
			if tc.failure != "" {
				m.FailureCondition = condition(t, tc.failure)
			}
			got, err := m.Judge(tc.result)
			if tc.wantErr {
				if err == nil || got != PhaseError {
					t.Fatalf("Judge(%v) = %v, %v; want an error", tc.result, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Judge(%v) = %v, %v; want %v", tc.result, got, err, tc.want)
			}
		})
	}
}

func TestConditionsAreRefusedWhenTheyAreNoBooleanExpression(t *testing.T) {
	for _, src := range []string{"result +", "1 + 2", "now() > result", "1 +", ""} {
		if _, err := NewCondition(src); err == nil {
			t.Errorf("NewCondition(%q) = nil error, want one", src)
		}
	}
}

func TestRecordJudgesAMetricByItsLimits(t *testing.T) {
	ok := condition(t, "result < 0.05")
	both := condition(t, "result > 0.1")
	for _, tc := range []struct {
		name    string
		metric  Metric
		samples []Sample
		want    Phase
	}{
		{name: "count good measurements succeed", metric: Metric{Count: 3, SuccessCondition: ok},
			samples: []Sample{{Result: 0.0}, {Result: 0.01}, {Result: 0.02}}, want: PhaseSuccessful},
		{name: "still counting runs", metric: Metric{Count: 3, SuccessCondition: ok},
			samples: []Sample{{Result: 0.0}, {Result: 0.01}}, want: PhaseRunning},
		{name: "failures past failureLimit fail", metric: Metric{Count: 5, FailureLimit: 1, SuccessCondition: ok},
			samples: []Sample{{Result: 0.5}, {Result: 0.01}, {Result: 0.5}}, want: PhaseFailed},
		{name: "errors in a row past consecutiveErrorLimit are an error", metric: Metric{Count: 5, ConsecutiveErrorLimit: 1, SuccessCondition: ok},
			samples: []Sample{{Err: errors.New("down")}, {Err: errors.New("down")}}, want: PhaseError},
		{name: "an error between measurements is forgiven", metric: Metric{Count: 2, ConsecutiveErrorLimit: 1, SuccessCondition: ok},
			samples: []Sample{{Err: errors.New("down")}, {Result: 0.0}, {Err: errors.New("down")}, {Result: 0.0}}, want: PhaseSuccessful},
		{name: "inconclusive past inconclusiveLimit is inconclusive", metric: Metric{Count: 5, SuccessCondition: ok, FailureCondition: both},
			samples: []Sample{{Result: 0.07}}, want: PhaseInconclusive},
		{name: "a streak of consecutiveSuccessLimit succeeds before count", metric: Metric{Count: 10, ConsecutiveSuccessLimit: 2, FailureLimit: 3, SuccessCondition: ok},
			samples: []Sample{{Result: 0.5}, {Result: 0.0}, {Result: 0.0}}, want: PhaseSuccessful},
		{name: "count reached without the streak asked for is inconclusive", metric: Metric{Count: 3, ConsecutiveSuccessLimit: 3, FailureLimit: 3, SuccessCondition: ok},
			samples: []Sample{{Result: 0.0}, {Result: 0.5}, {Result: 0.0}}, want: PhaseInconclusive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.metric.start(t0)
			for i, s := range tc.samples {
				r = tc.metric.Record(r, s, at(time.Duration(i)*time.Second))
			}
			if r.Phase != tc.want {
				t.Errorf("after %d samples: phase %v (%s), want %v", len(tc.samples), r.Phase, r.Message, tc.want)
			}
			if len(r.Measurements) != len(tc.samples) {
				t.Errorf("%d measurements kept, want %d", len(r.Measurements), len(tc.samples))
			}
		})
	}
}

func TestRecordKeepsTheNewestMeasurementsOnly(t *testing.T) {
	m := Metric{Count: 100, Interval: time.Second}
	r := m.start(t0)
	for i := range 25 {
		r = m.Record(r, Sample{Result: float64(i)}, at(time.Duration(i)*time.Second))
	}
	if len(r.Measurements) != MaxMeasurements || r.Measurements[MaxMeasurements-1].Value != "24" || r.Count != 25 {
		t.Errorf("kept %d measurements, last %+v, count %d; want %d ending at 24, count 25", len(r.Measurements), r.Measurements[len(r.Measurements)-1], r.Count, MaxMeasurements)
	}
	if !r.Next.Equal(at(25 * time.Second)) {
		t.Errorf("next measurement at %v, want an interval after the last", r.Next)
	}
}

package bench

import (
	"strings"
	"testing"
	"time"
)

func TestPercentileIsTheNearestRank(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, n := range v {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // descending: Percentile must sort
	}
	for _, tc := range []struct {
		name string
		ds   []time.Duration
		p    float64
		want time.Duration
	}{
		{"none is zero", nil, 50, 0},
		{"one sample is every percentile", ms(7), 99, 7 * time.Millisecond},
		{"median of an odd count is the middle", ms(30, 10, 20), 50, 20 * time.Millisecond},
		{"median of an even count is the lower middle", ms(40, 10, 30, 20), 50, 20 * time.Millisecond},
		{"p90 of 1..100 is 90", ms(hundred...), 90, 90 * time.Millisecond},
		{"p99 of 1..100 is 99", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 is the max", ms(hundred...), 100, 100 * time.Millisecond},
		{"p99 of ten samples is the max", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.ds, tc.p); got != tc.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tc.ds, tc.p, got, tc.want)
			}
		})
	}
}

// samples returns one RSS sample every 30 s for n samples, rss(i) MiB.
func samples(n int, rss func(i int) float64) []MemorySample {
	out := make([]MemorySample, n)
	for i := range out {
		out[i] = MemorySample{At: time.Duration(i) * 30 * time.Second, RSS: int64(rss(i) * mib)}
	}
	return out
}

func TestTrendIsFlatOnlyWhenNeitherMediansNorLineRiseMoreThanTenPercent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rss    []MemorySample
		warmup time.Duration
		flat   bool
		why    string // a part of Why when not flat
	}{
		{
			name: "steady with garbage-collector noise is flat",
			rss:  samples(20, func(i int) float64 { return 40 + float64(i%3) }),
			flat: true,
		},
		{
			name: "a leak of 20 % over the run is not flat",
			rss:  samples(20, func(i int) float64 { return 40 + 8*float64(i)/19 }),
			why:  "median",
		},
		{
			name: "a climb of 5 % over the run is flat",
			rss:  samples(20, func(i int) float64 { return 40 + 2*float64(i)/19 }),
			flat: true,
		},
		{
			name:   "growth during the warm-up is left out",
			rss:    samples(20, func(i int) float64 { return 20 + 20*min(float64(i), 4)/4 }),
			warmup: 2 * time.Minute,
			flat:   true,
		},
		{
			name: "without the warm-up the same growth is not flat",
			rss:  samples(20, func(i int) float64 { return 20 + 20*min(float64(i), 4)/4 }),
			why:  "median",
		},
		{
			name: "one spike in the middle third is flat",
			rss:  samples(21, func(i int) float64 { return map[bool]float64{true: 90, false: 40}[i == 10] }),
			flat: true,
		},
		{
			name: "a line that climbs while the thirds' medians do not is not flat",
			// The first and last thirds sit at 40 but the middle climbs to 80,
			// then the last samples jump: the medians stay put, the line rises.
			rss: samples(9, func(i int) float64 { return []float64{30, 40, 40, 60, 70, 80, 40, 44, 99}[i] }),
			why: "line",
		},
		{
			name: "five samples after the warm-up are too few",
			rss:  samples(10, func(int) float64 { return 40 }),
			// Samples 5 to 9 are at 2.5 min and after.
			warmup: 150 * time.Second,
			why:    "at least 6",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Trend(tc.rss, tc.warmup)
			if got.Flat != tc.flat {
				t.Fatalf("Trend flat = %v (%s; first %.1f MiB, last %.1f, rise %.1f), want %v",
					got.Flat, got.Why, mibOf(got.First), mibOf(got.Last), mibOf(got.Rise), tc.flat)
			}
			if !tc.flat && !strings.Contains(got.Why, tc.why) {
				t.Errorf("Why = %q, want it to mention %q", got.Why, tc.why)
			}
		})
	}
}

func TestSlopeIsBytesPerHour(t *testing.T) {
	// 1 MiB more every 30 s is 120 MiB an hour.
	got := slope(samples(10, func(i int) float64 { return 40 + float64(i) }))
	if want := 120.0 * mib; got < want*0.999 || got > want*1.001 {
		t.Errorf("slope = %.1f MiB/h, want 120", got/mib)
	}
}

// cleanSoak is a report of a run without errors and with flat memory.
func cleanSoak() *SoakReport {
	return &SoakReport{
		Apps: 100, Subscribers: 2, Readers: 1, Duration: 10 * time.Minute, CommitEvery: 3 * time.Second,
		DriftEvery: 20 * time.Second, Warmup: 2 * time.Minute,
		Commits: 2, Applied: 2, Apply: []time.Duration{time.Second, 2 * time.Second}, ApplyQuiet: []time.Duration{time.Second}, DuringRollout: 1,
		Drifts: 2, CorrectScale: []time.Duration{300 * time.Millisecond}, CorrectEnv: []time.Duration{5 * time.Second},
		Events: 4, ByType: Counts{"sync-succeeded": 2, "sync-started": 2},
		Streams:  []StreamResult{{Received: 4}, {Received: 4}},
		Delivery: []time.Duration{time.Millisecond},
		Reads:    10, List: []time.Duration{time.Millisecond}, Read: []time.Duration{time.Millisecond},
		RSS: samples(21, func(int) float64 { return 40 }),
	}
}

func TestSoakErrorsCountEveryKindAndFailItsRow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(r *SoakReport)
		row    string // the start of the row that must read FAIL
	}{
		{"a commit not applied", func(r *SoakReport) { r.Commits++ }, "Commits pushed"},
		{"an out-of-band change not put back", func(r *SoakReport) { r.Drifts++ }, "Out-of-band changes"},
		{"a service not converged at the end", func(r *SoakReport) { r.Unconverged = 1 }, "Services not at their last commit"},
		{"a sync-failed event", func(r *SoakReport) { r.ByType["sync-failed"] = 1 }, "sync-failed events"},
		{"an ERROR log line", func(r *SoakReport) { r.ErrorLines = []string{"reconcile failed: soak001: boom"} }, "Controller ERROR"},
		{"a refused webhook", func(r *SoakReport) { r.WebhookErrors = 1 }, "Webhooks refused"},
		{"an API answer not 2xx", func(r *SoakReport) { r.ReadErrors = 1 }, "API reads"},
		{"a stream that dropped", func(r *SoakReport) { r.Streams[1].Ended = "stream ended: EOF" }, "SSE subscribers"},
		{"a stream that missed an event", func(r *SoakReport) { r.Streams[0].Missed = 1 }, "SSE subscribers"},
		{"a stream that got an event twice", func(r *SoakReport) { r.Streams[0].Repeats = 1 }, "SSE subscribers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cleanSoak()
			if n := r.Errors(); n != 0 {
				t.Fatalf("clean report: Errors() = %d, want 0", n)
			}
			tc.break_(r)
			if n := r.Errors(); n != 1 {
				t.Errorf("Errors() = %d, want 1", n)
			}
			failed := map[string]bool{}
			for _, row := range r.Rows() {
				if row.Pass != nil && !*row.Pass {
					failed[row.Measurement] = true
				}
			}
			found := false
			for m := range failed {
				found = found || strings.HasPrefix(m, tc.row)
			}
			if !found || !failed["Errors"] || len(failed) != 2 {
				t.Errorf("failed rows = %v, want %q… and Errors", failed, tc.row)
			}
		})
	}
}

func TestSoakRowsFailMemoryThatGrows(t *testing.T) {
	r := cleanSoak()
	r.RSS = samples(21, func(i int) float64 { return 40 + float64(i) })
	var failed []string
	for _, row := range r.Rows() {
		if row.Pass != nil && !*row.Pass {
			failed = append(failed, row.Measurement)
		}
	}
	if len(failed) != 2 || !strings.HasPrefix(failed[0], "Controller RSS after") || !strings.HasPrefix(failed[1], "Controller RSS least-squares") {
		t.Errorf("failed rows = %q, want the two memory rows", failed)
	}
	var b strings.Builder
	if err := r.Print(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Memory not flat: ") {
		t.Errorf("Print does not say memory is not flat:\n%s", b.String())
	}
}

func TestSoakPrintShowsTheRunAndItsProblems(t *testing.T) {
	r := cleanSoak()
	r.LoadStart, r.LoadEnd, r.CPUs = "1.50", "2.25", 2
	r.Problems = []string{"commit 3 of soak007 not in the swarm within 3m0s"}
	var b strings.Builder
	if err := r.Print(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| measurement ", "| Commits pushed (one per 3s, webhook each): applied ", "| 2 of 2, 0.2/min ",
		"| 1.00 s / 2.00 s / 2.00 s / 2.00 s ", "| Errors ", "100 applications, 2 SSE subscribers, 1 API readers for 10m0s",
		"load average 1.50 at the start, 2.25 at the end", "- commit 3 of soak007 not in the swarm within 3m0s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Print output lacks %q:\n%s", want, out)
		}
	}
}

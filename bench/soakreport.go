package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SoakReport holds what one Soak saw. Its counts are errors where the
// row says so; Errors sums them, Memory judges the RSS samples.
type SoakReport struct {
	Apps, Subscribers, Readers int
	// Duration is the load's length; CommitEvery and DriftEvery its
	// pace. Warmup is the start left out of the memory verdict.
	Duration, CommitEvery, DriftEvery, Warmup time.Duration
	// CPUs is the machine's CPU count; LoadStart and LoadEnd the 1-minute
	// load average when the load started and when the checks ended.
	CPUs               int
	LoadStart, LoadEnd string

	// Commits were pushed, Applied reached the swarm within soakSettle;
	// Apply times each from the push to the Engine's spec update,
	// ApplyQuiet those pushed while their service ran no rollout.
	// DuringRollout counts the others: the controller waits for the
	// rollout before it writes.
	Commits, Applied, DuringRollout int
	Apply, ApplyQuiet               []time.Duration
	// Drifts are the out-of-band changes made, scales and environment
	// changes in turn; CorrectScale and CorrectEnv time each one put back,
	// from the change to the correction (the Engine's clock). An
	// environment change starts a rollout, which the correction waits for.
	Drifts                   int
	CorrectScale, CorrectEnv []time.Duration
	// Skipped counts commits and changes not made because every
	// application was still busy with an earlier one.
	Skipped int
	// Unconverged counts the services that, once the load was over, did
	// not carry their last commit or still carried an out-of-band change.
	Unconverged   int
	WebhookErrors int

	// Events is how many events the controller published during the run;
	// ByType counts the kept ones by type.
	Events int
	ByType Counts
	// Streams holds one result per subscriber; Delivery every event's
	// delay from its time to its arrival, over all subscribers.
	Streams  []StreamResult
	Delivery []time.Duration

	// Reads counts API answers, ReadErrors those not 2xx or not given;
	// List and Read time the list of applications and one application.
	Reads, ReadErrors int
	List, Read        []time.Duration

	// RSS holds the controller's RSS through the load.
	RSS []MemorySample
	// CPU is the controller's CPU time during the load, Requests its
	// Engine requests.
	CPU      time.Duration
	Requests Counts
	// ErrorLines are the controller's ERROR log lines; Problems describes
	// every error the soak itself found, in the order found.
	ErrorLines, Problems []string
}

// StreamResult is what one event-stream subscriber saw.
type StreamResult struct {
	Received int
	// Missed counts the run's events it never received, Repeats those it
	// received twice or out of order.
	Missed, Repeats int
	// Ended says why the stream ended before the soak closed it; "" when
	// it did not.
	Ended string
}

// Broken reports whether the stream missed, repeated or dropped anything.
func (r StreamResult) Broken() bool { return r.Missed > 0 || r.Repeats > 0 || r.Ended != "" }

// MemorySample is the controller's RSS (bytes) at a time since the load
// started.
type MemorySample struct {
	At  time.Duration
	RSS int64
}

// MemoryTrend is the memory verdict of a run.
type MemoryTrend struct {
	// Samples counts the samples after the warm-up, which alone are judged.
	Samples int
	// First and Last are the medians of their first and last thirds.
	First, Last int64
	// Slope is the least-squares line's slope through them, bytes per hour;
	// Rise what that line climbs over their time span.
	Slope float64
	Rise  int64
	// Flat is the verdict; Why says why not when it is false.
	Flat bool
	Why  string
}

// maxGrowth is how much memory may grow across the judged samples, as a
// fraction of the first third's median: by the medians, and by the line.
const maxGrowth = 0.10

// Trend judges samples after warmup: memory is flat when neither the last
// third's median nor the least-squares line rises more than maxGrowth above
// the first third's median. Fewer than six samples are too few to say.
func Trend(samples []MemorySample, warmup time.Duration) MemoryTrend {
	var judged []MemorySample
	for _, s := range samples {
		if s.At >= warmup {
			judged = append(judged, s)
		}
	}
	t := MemoryTrend{Samples: len(judged)}
	if len(judged) < 6 {
		t.Why = fmt.Sprintf("%d samples after the warm-up; at least 6 are needed", len(judged))
		return t
	}
	third := len(judged) / 3
	t.First, t.Last = medianRSS(judged[:third]), medianRSS(judged[len(judged)-third:])
	t.Slope = slope(judged)
	span := judged[len(judged)-1].At - judged[0].At
	t.Rise = int64(t.Slope * span.Hours())
	limit := int64(float64(t.First) * maxGrowth)
	switch {
	case t.Last-t.First > limit:
		t.Why = fmt.Sprintf("the last third's median is %.1f MiB above the first's (at most %.1f)", mibOf(t.Last-t.First), mibOf(limit))
	case t.Rise > limit:
		t.Why = fmt.Sprintf("the fitted line rises %.1f MiB (at most %.1f)", mibOf(t.Rise), mibOf(limit))
	default:
		t.Flat = true
	}
	return t
}

func medianRSS(samples []MemorySample) int64 {
	v := make([]int64, len(samples))
	for i, s := range samples {
		v[i] = s.RSS
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// slope is the least-squares slope of RSS over time, bytes per hour.
func slope(samples []MemorySample) float64 {
	n := float64(len(samples))
	var sx, sy, sxx, sxy float64
	for _, s := range samples {
		x, y := s.At.Hours(), float64(s.RSS)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of ds, 0
// for none. ds is not modified.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// Memory returns the verdict on the run's RSS samples.
func (r *SoakReport) Memory() MemoryTrend { return Trend(r.RSS, r.Warmup) }

// corrected counts the out-of-band changes put back.
func (r *SoakReport) corrected() int { return len(r.CorrectScale) + len(r.CorrectEnv) }

// brokenStreams counts the subscribers that missed, repeated or dropped.
func (r *SoakReport) brokenStreams() (broken, dropped, missed int) {
	for _, s := range r.Streams {
		if s.Broken() {
			broken++
		}
		if s.Ended != "" {
			dropped++
		}
		missed += s.Missed + s.Repeats
	}
	return broken, dropped, missed
}

// Errors is the number of errors of the run: sync-failed events, ERROR
// log lines, API reads not answered 2xx, refused webhooks, broken
// streams, commits not applied within soakSettle, out-of-band changes not
// put back, and services not converged at the end.
func (r *SoakReport) Errors() int {
	broken, _, _ := r.brokenStreams()
	return r.ByType["sync-failed"] + len(r.ErrorLines) + r.ReadErrors + r.WebhookErrors + broken +
		(r.Commits - r.Applied) + (r.Drifts - r.corrected()) + r.Unconverged
}

// SoakRow is one line of the soak's table. Pass is nil where no target
// applies.
type SoakRow struct {
	Measurement, Value, Target string
	Pass                       *bool
}

// Rows returns the table: throughput, errors, latencies, memory.
func (r *SoakReport) Rows() []SoakRow {
	var rows []SoakRow
	add := func(m, v, target string, pass *bool) { rows = append(rows, SoakRow{m, v, target, pass}) }
	minutes := r.Duration.Minutes()
	perMin := func(n int) string { return fmt.Sprintf("%.1f/min", float64(n)/max(minutes, 1e-9)) }
	add("Commits pushed (one per "+r.CommitEvery.String()+", webhook each): applied",
		fmt.Sprintf("%d of %d, %s", r.Applied, r.Commits, perMin(r.Applied)), "all", ok(r.Applied == r.Commits))
	add("Commit pushed → service spec at that commit: p50 / p90 / p99 / max", quantiles(r.Apply), "—", nil)
	add(fmt.Sprintf("… of the %d pushed while no rollout of theirs ran", len(r.ApplyQuiet)), quantiles(r.ApplyQuiet), "—", nil)
	add("Syncs succeeded (sync-succeeded events)", fmt.Sprintf("%d, %s", r.ByType["sync-succeeded"], perMin(r.ByType["sync-succeeded"])), "—", nil)
	add("Out-of-band changes (one per "+r.DriftEvery.String()+"): put back",
		fmt.Sprintf("%d of %d (%d drift-converged events)", r.corrected(), r.Drifts, r.ByType["drift-converged"]), "all",
		ok(r.corrected() == r.Drifts))
	add(fmt.Sprintf("Out-of-band scale to 2 replicas → put back (%d): p50 / p90 / p99 / max", len(r.CorrectScale)),
		quantiles(r.CorrectScale), "—", nil)
	add(fmt.Sprintf("Out-of-band env change (a rollout) → put back (%d): p50 / p90 / p99 / max", len(r.CorrectEnv)),
		quantiles(r.CorrectEnv), "—", nil)
	add("Services not at their last commit, or still changed, at the end", strconv.Itoa(r.Unconverged), "0", ok(r.Unconverged == 0))
	add("sync-failed events", strconv.Itoa(r.ByType["sync-failed"]), "0", ok(r.ByType["sync-failed"] == 0))
	add("Controller ERROR log lines", strconv.Itoa(len(r.ErrorLines)), "0", ok(len(r.ErrorLines) == 0))
	add("Webhooks refused", strconv.Itoa(r.WebhookErrors), "0", ok(r.WebhookErrors == 0))
	add(fmt.Sprintf("API reads by %d readers (not 2xx)", r.Readers), fmt.Sprintf("%d (%d)", r.Reads, r.ReadErrors), "0 not 2xx",
		ok(r.ReadErrors == 0))
	add("API read latency, list of applications: p50 / p99", millis(Percentile(r.List, 50))+" / "+millis(Percentile(r.List, 99)), "—", nil)
	add("API read latency, one application: p50 / p99", millis(Percentile(r.Read, 50))+" / "+millis(Percentile(r.Read, 99)), "—", nil)
	broken, dropped, missed := r.brokenStreams()
	add(fmt.Sprintf("SSE subscribers: dropped, or missing or repeating any of the run's %d events", r.Events),
		fmt.Sprintf("%d of %d (%d dropped, %d events missed or repeated)", broken, len(r.Streams), dropped, missed), "0", ok(broken == 0))
	add("SSE delivery, event time → received: p50 / p90 / p99 / max", quantiles(r.Delivery), "—", nil)
	add("Engine requests by the controller (writes)",
		fmt.Sprintf("%s (%s)", perMin(r.Requests.Total()), perMin(r.Requests.Writes())), "—", nil)
	add("Controller CPU", fmt.Sprintf("%s (%.0f %% of one core)", seconds(r.CPU), 100*r.CPU.Seconds()/max(r.Duration.Seconds(), 1e-9)), "—", nil)
	m := r.Memory()
	lo, hi := rssRange(r.RSS)
	add(fmt.Sprintf("Controller RSS after %s warm-up: first third → last third median (min–max)", r.Warmup),
		fmt.Sprintf("%.1f → %.1f MiB (%.1f–%.1f)", mibOf(m.First), mibOf(m.Last), mibOf(lo), mibOf(hi)),
		fmt.Sprintf("≤ +%.0f %%", 100*maxGrowth), ok(m.Samples >= 6 && m.Last-m.First <= int64(float64(m.First)*maxGrowth)))
	add(fmt.Sprintf("Controller RSS least-squares slope, %d samples", m.Samples),
		fmt.Sprintf("%+.1f MiB/hour (%+.1f MiB over the run)", m.Slope/mib, mibOf(m.Rise)), fmt.Sprintf("line rises ≤ %.0f %%", 100*maxGrowth),
		ok(m.Flat))
	add("Errors", strconv.Itoa(r.Errors()), "0", ok(r.Errors() == 0))
	return rows
}

// Print writes the table as Markdown, columns aligned, then the run's
// shape and load, and the first problems found.
func (r *SoakReport) Print(w io.Writer) error {
	rows := [][]string{{"measurement", "value", "target", "pass"}}
	for _, row := range r.Rows() {
		rows = append(rows, []string{row.Measurement, row.Value, row.Target, verdict(row.Pass)})
	}
	var b strings.Builder
	b.WriteString(markdownTable(rows))
	fmt.Fprintf(&b, "\n%d applications, %d SSE subscribers, %d API readers for %s; %d commits and changes skipped (all busy).\n",
		r.Apps, r.Subscribers, r.Readers, r.Duration.Round(time.Second), r.Skipped)
	fmt.Fprintf(&b, "%d CPUs; load average %s at the start, %s at the end.\n", r.CPUs, r.LoadStart, r.LoadEnd)
	fmt.Fprintf(&b, "Engine requests: %s.\n", r.Requests)
	if m := r.Memory(); !m.Flat {
		fmt.Fprintf(&b, "Memory not flat: %s.\n", m.Why)
	}
	for i, p := range slices.Concat(r.ErrorLines, r.Problems) {
		if i == 20 {
			fmt.Fprintf(&b, "… and %d more.\n", len(r.ErrorLines)+len(r.Problems)-i)
			break
		}
		fmt.Fprintf(&b, "- %s\n", p)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// quantiles formats p50 / p90 / p99 / max of ds.
func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	parts := make([]string, 4)
	for i, p := range []float64{50, 90, 99, 100} {
		parts[i] = latency(Percentile(ds, p))
	}
	return strings.Join(parts, " / ")
}

// latency formats d in milliseconds, or in seconds from one second.
func latency(d time.Duration) string {
	if d >= time.Second {
		return seconds(d)
	}
	return millis(d)
}

func rssRange(samples []MemorySample) (lo, hi int64) {
	for i, s := range samples {
		if i == 0 || s.RSS < lo {
			lo = s.RSS
		}
		hi = max(hi, s.RSS)
	}
	return lo, hi
}

func mibOf(b int64) float64 { return float64(b) / mib }

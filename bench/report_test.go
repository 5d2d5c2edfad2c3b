package bench

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPathClassNamesTheRouteWithoutIdsOrVersion(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/v1.41/services", "/services"},
		{"/v1.41/services/create", "/services/create"},
		{"/v1.41/services/k3j2h4/update", "/services/{id}/update"},
		{"/v1.41/services/web_app", "/services/{id}"},
		{"/_ping", "/_ping"},
		{"/v1.41/events", "/events"},
		{"/v1.41/distribution/registry.example.org/team/web:v1/json", "/distribution/{image}/json"},
		{"/v1.41/images/skep-testapp:v1/json", "/images/{image}/json"},
		{"/v1.41/containers/json", "/containers/json"},
		{"/v1.41/swarm/init", "/swarm/init"},
		{"/", "/"},
	} {
		if got := PathClass(tc.path); got != tc.want {
			t.Errorf("PathClass(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

func TestCountsSinceKeepsOnlyWhatWasAddedAndWritesAreNotReads(t *testing.T) {
	before := Counts{"GET /services": 3, "POST /services/create": 1}
	after := Counts{"GET /services": 5, "POST /services/create": 1, "POST /services/{id}/update": 2, "HEAD /_ping": 1}
	got := after.Since(before)
	if diff := cmp.Diff(Counts{"GET /services": 2, "POST /services/{id}/update": 2, "HEAD /_ping": 1}, got); diff != "" {
		t.Errorf("Since (-want +got):\n%s", diff)
	}
	if got.Total() != 5 || got.Writes() != 2 {
		t.Errorf("Total, Writes = %d, %d; want 5, 2", got.Total(), got.Writes())
	}
	if s := got.String(); s != "2 GET /services, 2 POST /services/{id}/update, 1 HEAD /_ping" {
		t.Errorf("String() = %q", s)
	}
}

func TestReadGoResultsTakesTheMedianPerBenchmarkAndUnit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.txt")
	out := `goos: linux
BenchmarkEventFanOut-2   	     511	   2246540 ns/op	         0.9590 p50-ms	         6.314 p99-ms	  707395 B/op	    6813 allocs/op
BenchmarkEventFanOut-2   	     500	   2000000 ns/op	         0.9000 p50-ms	         9.000 p99-ms	  707395 B/op	    6813 allocs/op
BenchmarkEventFanOut-2   	     500	   3000000 ns/op	         0.9000 p50-ms	         7.000 p99-ms	  707395 B/op	    6813 allocs/op
BenchmarkRenderConvertPlan/services=1000-2   	       2	 501583694 ns/op	274625816 B/op	 4824196 allocs/op
PASS
`
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	got := readGoResults(t, path)
	if v := got["BenchmarkEventFanOut"]["p99-ms"]; v != 7 {
		t.Errorf("p99-ms = %v, want the median 7", v)
	}
	if v := got["BenchmarkRenderConvertPlan/services=1000"]["ns/op"]; v != 501583694 {
		t.Errorf("ns/op = %v, want 501583694", v)
	}
}

func TestRowsJudgeEachTargetFromItsMeasurement(t *testing.T) {
	r := &Report{
		SmallIdle: Idle{Apps: 20, Window: time.Minute, Requests: Counts{"GET /services": 10, "POST /services/{id}/update": 1},
			CPU: 100 * time.Millisecond, RSS: 30 << 20},
		Webhook:       []time.Duration{100 * time.Millisecond, 120 * time.Millisecond, 300 * time.Millisecond},
		DockerWebhook: []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond},
		Correction:    []time.Duration{50 * time.Millisecond},
		Deploy:        Deploy{Exist: 2 * time.Second, Running: 5 * time.Second},
	}
	verdicts := map[string]string{}
	for _, row := range r.Rows() {
		v := "none"
		if row.Pass != nil {
			v = map[bool]string{true: "pass", false: "fail"}[*row.Pass]
		}
		verdicts[row.Measurement[:strings.IndexAny(row.Measurement+",", ",")]] = v
	}
	// A point below the scale a target names gets no verdict, however
	// well it does: 200 applications say nothing of 500.
	r.LargeIdle = Idle{Apps: 200, Window: time.Minute, CPU: time.Millisecond, RSS: 1 << 20}
	for _, row := range r.Rows() {
		if strings.Contains(row.Measurement, "200 apps") && strings.HasPrefix(row.Measurement, "Idle CPU") || strings.HasPrefix(row.Measurement, "Controller RSS, 200") {
			if row.Pass != nil {
				t.Errorf("%s: judged %v below the scale of its target %q", row.Measurement, *row.Pass, row.Target)
			}
		}
	}
	for measurement, want := range map[string]string{
		"Idle Engine requests per 30 s":                    "fail", // a write while idle
		"Idle CPU per 5 min":                               "fail", // 0.5 s
		"Webhook push → updated spec":                      "fail", // median 120 ms is 1.2× 100 ms
		"Out-of-band `docker service scale X=3` corrected": "pass",
		"Controller RSS":                                   "pass",
		"First deploy":                                     "pass", // 2 s
		"Other apps reconciled per out-of-band change":     "pass",
	} {
		if got := verdicts[measurement]; got != want {
			t.Errorf("%s: %s, want %s (all: %v)", measurement, got, want, verdicts)
		}
	}
}

func TestGitClassTellsRefAdvertisementsFromFetches(t *testing.T) {
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/app01.git/info/refs", GitRefs},
		{"POST", "/app01.git/git-upload-pack", GitFetch},
		{"POST", "/app01.git/git-receive-pack", GitPush},
		{"GET", "/app01.git/HEAD", "GET /app01.git/HEAD"},
	} {
		r := httptest.NewRequest(tc.method, tc.path+"?service=git-upload-pack", nil)
		if got := gitClass(r); got != tc.want {
			t.Errorf("gitClass(%s %s) = %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestPollSampleFindsTheTickThatSawTheCommitAndTheTicksThatMissedIt(t *testing.T) {
	pushed := time.Unix(100, 0)
	at := func(ms int) time.Time { return pushed.Add(time.Duration(ms) * time.Millisecond) }
	updated := at(9000)
	for _, tc := range []struct {
		name     string
		requests []Request
		want     Poll
	}{
		{
			name:     "the next tick's ls-remote sees it and fetches",
			requests: []Request{{At: at(4000), Class: GitRefs}, {At: at(4020), Class: GitFetch}},
			want:     Poll{Latency: 9 * time.Second, AfterTick: 5 * time.Second},
		},
		{
			name:     "a tick that asked first and missed it is counted",
			requests: []Request{{At: at(1000), Class: GitRefs}, {At: at(8000), Class: GitRefs}, {At: at(8020), Class: GitFetch}},
			want:     Poll{Latency: 9 * time.Second, AfterTick: time.Second, Missed: 1},
		},
		{
			name:     "without a fetch the one ls-remote is the tick",
			requests: []Request{{At: at(8500), Class: GitRefs}},
			want:     Poll{Latency: 9 * time.Second, AfterTick: 500 * time.Millisecond},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pollSample(tc.requests, pushed, updated); got != tc.want {
				t.Errorf("pollSample = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A run of the scale point alone has no first deploy to judge: no row
// says it took no time.
func TestRowsOfTheScalePointAloneShowNoFirstDeploy(t *testing.T) {
	r := &Report{LargeIdle: Idle{Apps: 500, Window: time.Minute, CPU: time.Second, RSS: 80 << 20}}
	var idle bool
	for _, row := range r.Rows() {
		if strings.HasPrefix(row.Measurement, "First deploy") {
			t.Errorf("row %q (%s) in a run without the 20 applications", row.Measurement, row.Skep)
		}
		idle = idle || strings.HasPrefix(row.Measurement, "Idle CPU per 5 min, 500 apps")
	}
	if !idle {
		t.Error("no idle CPU row for the 500 applications")
	}
}

// The memory bound is for 1,000 applications of 10 services each: a point
// with as many applications but one service each gets no verdict.
func TestRSSVerdictOnlyAtTheBoundsScale(t *testing.T) {
	for name, tc := range map[string]struct {
		idle Idle
		want *bool
	}{
		"1000 × 1":        {Idle{Apps: 1000, Services: 1, Window: time.Minute, RSS: 80 << 20}, nil},
		"1000 × 10, pass": {Idle{Apps: 1000, Services: 10, Window: time.Minute, RSS: 90 << 20}, ok(true)},
		"1000 × 10, fail": {Idle{Apps: 1000, Services: 10, Window: time.Minute, RSS: 120 << 20}, ok(false)},
		"1000 × 20, pass": {Idle{Apps: 1000, Services: 20, Window: time.Minute, RSS: 90 << 20}, ok(true)},
		"1000 × 20, over": {Idle{Apps: 1000, Services: 20, Window: time.Minute, RSS: 120 << 20}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			r := &Report{LargeIdle: tc.idle}
			var found bool
			for _, row := range r.Rows() {
				if !strings.HasPrefix(row.Measurement, "Controller RSS, 1000 apps") {
					continue
				}
				found = true
				if (row.Pass == nil) != (tc.want == nil) || (row.Pass != nil && *row.Pass != *tc.want) {
					t.Errorf("row %q: verdict %v, want %v", row.Measurement, deref(row.Pass), deref(tc.want))
				}
				if tc.idle.Services > 1 && !strings.Contains(row.Measurement, fmt.Sprintf("× %d services", tc.idle.Services)) {
					t.Errorf("row %q does not name the services per application", row.Measurement)
				}
			}
			if !found {
				t.Error("no RSS row")
			}
		})
	}
}

func deref(b *bool) string {
	if b == nil {
		return "none"
	}
	return strconv.FormatBool(*b)
}

// The CPU bound is for 500 applications: a larger point under it shows the
// bound holds, over it says nothing of 500.
func TestIdleCPUVerdictAtOrAbove500(t *testing.T) {
	for name, tc := range map[string]struct {
		apps int
		cpu  time.Duration
		want *bool
	}{
		"500, under":  {500, 900 * time.Millisecond, ok(true)},
		"500, over":   {500, 1100 * time.Millisecond, ok(false)},
		"1000, under": {1000, 900 * time.Millisecond, ok(true)},
		"1000, over":  {1000, 3 * time.Second, nil},
		"200, under":  {200, 500 * time.Millisecond, nil},
	} {
		t.Run(name, func(t *testing.T) {
			// A 5-minute window: the CPU is the CPU per 5 minutes.
			r := &Report{LargeIdle: Idle{Apps: tc.apps, Window: 5 * time.Minute, CPU: tc.cpu, RSS: 80 << 20}}
			for _, row := range r.Rows() {
				if !strings.HasPrefix(row.Measurement, "Idle CPU per 5 min") {
					continue
				}
				if (row.Pass == nil) != (tc.want == nil) || (row.Pass != nil && *row.Pass != *tc.want) {
					t.Errorf("row %q: verdict %v, want %v", row.Measurement, deref(row.Pass), deref(tc.want))
				}
				return
			}
			t.Error("no idle CPU row")
		})
	}
}

// The peak RSS row shows what was read, and only when it was.
func TestPeakRSSRowOnlyWhenRead(t *testing.T) {
	rowOf := func(idle Idle) (Row, bool) {
		for _, row := range (&Report{LargeIdle: idle}).Rows() {
			if strings.HasPrefix(row.Measurement, "Controller peak RSS") {
				return row, true
			}
		}
		return Row{}, false
	}
	if row, found := rowOf(Idle{Apps: 1000, Services: 10, Window: time.Minute, RSS: 90 << 20}); found {
		t.Errorf("a peak row without a peak read: %+v", row)
	}
	row, found := rowOf(Idle{Apps: 1000, Services: 10, Window: time.Minute, RSS: 90 << 20, PeakRSS: 300 << 20})
	if !found || row.Skep != "300.0 MiB" || row.Pass != nil || !strings.Contains(row.Measurement, "1000 apps × 10 services") {
		t.Errorf("peak row %+v (found %v), want 300.0 MiB for 1000 apps × 10 services, no verdict", row, found)
	}
}

func TestNoOpTickRowsJudgeTheTickAndShowTheServerApart(t *testing.T) {
	for _, tc := range []struct {
		tick, server float64 // ns per tick
		pass         bool
	}{{300e3, 2e6, true}, {650e3, 10e3, false}} {
		r := &Report{Go: map[string]map[string]float64{"BenchmarkQuietTick": {"cpu-ns/op": tc.tick, "git-server-cpu-ns/op": tc.server}}}
		var tick, server *Row
		for _, row := range r.Rows() {
			switch {
			case strings.HasPrefix(row.Measurement, "CPU of one no-op tick"):
				tick = &row
			case strings.HasPrefix(row.Measurement, "No-op tick: the git server's CPU"):
				server = &row
			}
		}
		if tick == nil || tick.Pass == nil || *tick.Pass != tc.pass {
			t.Errorf("tick %.0f ns: row %+v, want judged pass=%t", tc.tick, tick, tc.pass)
		}
		if server == nil || server.Pass != nil || server.Skep != millis(time.Duration(tc.server)) {
			t.Errorf("server %.0f ns: row %+v, want %s and no verdict", tc.server, server, millis(time.Duration(tc.server)))
		}
	}
}

// TestFailoverRowsJudgeEachKindByItsWorst: a kill or a freeze must be
// followed within 12 s, a stop within 3 s, every sample of them; one late
// write or one commit applied twice fails its row.
func TestFailoverRowsJudgeEachKindByItsWorst(t *testing.T) {
	took := func(ds ...time.Duration) []Failover {
		var out []Failover
		for _, d := range ds {
			out = append(out, Failover{Took: d})
		}
		return out
	}
	r := &Report{Failovers: &Failovers{Late: 1, Each: map[string][]Failover{
		FailKill:   took(8*time.Second, 8*time.Second, 11*time.Second),
		FailFreeze: took(8*time.Second, 13*time.Second, 8*time.Second),
		FailStop:   took(time.Second, 2*time.Second, time.Second),
	}}}
	verdicts := map[string]bool{}
	for _, row := range r.Rows() {
		if row.Pass != nil {
			verdicts[strings.SplitN(row.Measurement, " (", 2)[0]] = *row.Pass
		}
	}
	for measurement, want := range map[string]bool{
		"Failover after SIGKILL":                                true,
		"Failover after SIGSTOP":                                false, // one of 13 s
		"Failover after SIGTERM":                                true,
		"Writes sent by a replica while another held the lease": false,
		"Commits applied more than once across the failovers":   true,
	} {
		if got, found := verdicts[measurement]; !found || got != want {
			t.Errorf("%s: pass %v (found %v), want %v; all %v", measurement, got, found, want, verdicts)
		}
	}
}

package bench_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/bench"
	"github.com/skep-cd/skep/harness"
)

// skepBinary is the binary the HA tests run: SKEP_BENCH_BINARY, or one
// built for the test.
func skepBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("SKEP_BENCH_BINARY"); b != "" {
		return b
	}
	out := filepath.Join(t.TempDir(), "skep")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", out, "../cmd/skep")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build skep: %v\n%s", err, msg)
	}
	return out
}

// TestReplicatedControllerFailsOverWithOneWriter runs three replicas of a
// controller on the local swarm while commits land every two seconds, and
// kills, freezes and stops the leader in turn. After each, another
// replica takes over; no replica writes to the Engine while another holds
// the lease, the frozen one included once thawed; no commit is applied
// twice; every replica ends with the same event history; and a client
// that reconnects its event stream to another replica every few seconds
// misses nothing and sees nothing twice.
func TestReplicatedControllerFailsOverWithOneWriter(t *testing.T) {
	docker := harness.RequireSwarm(t)
	if testing.Short() {
		t.Skip("runs three controllers for about a minute")
	}
	run := bench.StartDeployment(t, docker, bench.HAOptions{Binary: skepBinary(t)}, 2*time.Second)
	h, flow := run.HA, run.Flow
	leader, first := h.WaitLeader(t, flow, 0, time.Minute)
	if !flow.Until(t, time.Minute, func() bool { return h.Revisions()[flow.Commits[0]] == 1 }) {
		t.Fatalf("the first commit was not applied within a minute; terms %v\n%s", h.Terms(), leader.Controller().LogTail())
	}
	roamCtx, stopRoaming := context.WithCancel(t.Context())
	roamed := h.Roam(roamCtx, 3*time.Second)
	// Each service write takes half a second: a kill or a freeze comes in
	// the middle of an apply.
	h.SlowWrites(500 * time.Millisecond)

	for _, kind := range []string{bench.FailKill, bench.FailFreeze, bench.FailStop} {
		f := h.Fail(t, flow, kind, time.Minute)
		t.Logf("%s: %v → %v in %s", kind, f.From, f.To, f.Took.Round(time.Millisecond))
		if f.To.Holder == f.From.Holder {
			t.Errorf("%s: the %s leader took the lease again", kind, kind)
		}
	}

	// The last commit lands and is applied; the flow stops there.
	h.SlowWrites(0)
	flow.Every = 0
	last := flow.Land(t)
	if !flow.Until(t, time.Minute, func() bool { return h.Revisions()[last] == 1 }) {
		t.Errorf("the last commit %.12s was not applied within a minute", last)
	}
	if !h.CaughtUp(t.Context(), 30*time.Second) {
		t.Error("the replicas' histories did not reach the same last event within 30s")
	}
	stopRoaming()
	ids := <-roamed

	// A standby forwards what it does not hold to the leader, which
	// authenticates the caller's own credential.
	leader, _ = h.WaitLeader(t, nil, 0, time.Minute)
	standby := h.Replicas[0]
	if standby == leader {
		standby = h.Replicas[1]
	}
	for _, c := range []struct {
		method, path string
		admin        bool
		want         int
	}{
		{"GET", "/api/v1/applications/web", true, 200},
		{"GET", "/api/v1/applications/web", false, 401},
		{"POST", "/api/v1/applications/web/refresh", true, 202},
		{"POST", "/api/v1/applications/web/refresh", false, 401},
	} {
		if got, err := standby.Call(t.Context(), c.method, c.path, c.admin); err != nil || got != c.want {
			t.Errorf("%s %s on a standby (admin %v) = %d, %v; want %d from the leader", c.method, c.path, c.admin, got, err, c.want)
		}
	}

	if terms := h.Terms(); len(terms) < 4 || terms[0].Number != first.Number {
		t.Errorf("terms %v, want four from %d", terms, first.Number)
	}
	for _, l := range h.LateWrites() {
		t.Errorf("late write: %s", l)
	}
	for commit, n := range h.Revisions() {
		if n > 1 {
			t.Errorf("commit %.12s applied %d times", commit, n)
		}
	}
	checkRoamed(t, checkHistories(t, h), ids)
}

// checkHistories holds the replicas' histories to one history: nothing
// kept twice, nothing one replica lacks that the others keep (but what a
// leader kept in the instant before it was killed or frozen, which the
// test logs), nothing kept differently. It returns them.
func checkHistories(t *testing.T, h *bench.HA) bench.Histories {
	t.Helper()
	hist, err := h.Histories(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("events kept %v; orphans %v", hist.Kept, hist.Orphans)
	for _, what := range [][]string{hist.Doubled, hist.Missing, hist.Differs} {
		for _, s := range what {
			t.Errorf("history: %s", s)
		}
	}
	return hist
}

// checkRoamed holds a roaming client's ids to the history: in order, from
// its first id to its last, nothing missed and nothing twice.
func checkRoamed(t *testing.T, hist bench.Histories, roamed []int64) {
	t.Helper()
	if len(roamed) == 0 {
		t.Fatal("the roaming client received no event")
	}
	var want []int64
	for _, id := range hist.Union {
		if id >= roamed[0] && id <= roamed[len(roamed)-1] && !orphan(hist, id) {
			want = append(want, id)
		}
	}
	got := slices.DeleteFunc(slices.Clone(roamed), func(id int64) bool { return orphan(hist, id) })
	if !slices.Equal(got, want) {
		t.Errorf("the roaming client received %d events %v,\nwant the %d of the history %v", len(got), got, len(want), want)
	}
}

// orphan reports whether id is one of hist's orphans.
func orphan(hist bench.Histories, id int64) bool {
	prefix := fmt.Sprintf("%d ", id)
	return slices.ContainsFunc(hist.Orphans, func(o string) bool { return strings.HasPrefix(o, prefix) })
}

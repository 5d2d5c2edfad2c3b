package syncpass

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/swarm"
)

// TestRollbackDecision names every rule of a release rollback: when it
// happens, when it never does (and says why), and the order it writes the
// services back in.
func TestRollbackDecision(t *testing.T) {
	timedOut := &rolloutError{cause: Cause{Service: "web_api", Kind: CauseExit, ExitCode: 1}, err: &outcome.TransientError{Err: errors.New("release web not healthy within 10s")}}
	swarmRolled := &rolloutError{cause: Cause{Service: "web_api", Kind: CauseRolledBack}, err: &outcome.StalledError{Err: errors.New("swarm rolled back service web_api")}}
	preempted := &rolloutError{err: &outcome.WaitingError{Err: errors.New("a newer commit preempts")}, preempted: true}
	refused := &outcome.StalledError{Err: errors.New("apply web: update service web_api: invalid mount")}
	healthy := &apply.Revision{Number: 3, Commit: "c1"}
	before := map[string]dswarm.Service{
		"web_db":  {Spec: dswarm.ServiceSpec{Annotations: dswarm.Annotations{Name: "web_db", Labels: map[string]string{"v": "1"}}}},
		"web_api": {Spec: dswarm.ServiceSpec{Annotations: dswarm.Annotations{Name: "web_api", Labels: map[string]string{"v": "1"}}}},
		"web_ui":  {Spec: dswarm.ServiceSpec{Annotations: dswarm.Annotations{Name: "web_ui", Labels: map[string]string{"v": "1"}}}},
	}
	// The write: db and api in wave 0, then ui (updated) and a new job
	// runner (created) in wave 1.
	wrote := []written{{name: "web_api", wave: 0}, {name: "web_db", wave: 0}, {name: "web_runner", wave: 1, created: true}, {name: "web_ui", wave: 1}}
	base := rollbackFacts{policy: appset.RollbackRelease, err: timedOut, lastHealthy: healthy, before: before, written: wrote}
	with := func(change func(*rollbackFacts)) rollbackFacts {
		f := base
		change(&f)
		return f
	}
	for _, tc := range []struct {
		name string
		f    rollbackFacts
		// want lists the steps as "service" (written back) or
		// "-service" (removed); whyHas what a refusal says.
		want   []string
		to     int
		whyHas string
	}{
		{name: "every written service goes back in reverse write order: the last wave first, then reverse names; what the write created is removed",
			f: base, want: []string{"web_ui", "-web_runner", "web_db", "web_api"}, to: 3},
		{name: "a rollback by Swarm of one service rolls the whole release back",
			f: with(func(f *rollbackFacts) { f.err = swarmRolled }), want: []string{"web_ui", "-web_runner", "web_db", "web_api"}, to: 3},
		{name: "a failure in an earlier wave rolls back only what was written, the later waves never were",
			f:    with(func(f *rollbackFacts) { f.written = wrote[:2] }),
			want: []string{"web_db", "web_api"}, to: 3},
		{name: "rollback: service (the default) leaves the release to Swarm",
			f: with(func(f *rollbackFacts) { f.policy = appset.RollbackService })},
		{name: "the zero policy is rollback: service",
			f: with(func(f *rollbackFacts) { f.policy = "" })},
		{name: "rollback: none rolls nothing back",
			f: with(func(f *rollbackFacts) { f.policy = appset.RollbackNone })},
		{name: "a write the Engine refused is no rollout failure: nothing ran to roll back",
			f: with(func(f *rollbackFacts) { f.err = refused })},
		{name: "a failing rollout a newer commit preempts is not rolled back: the fix replaces it",
			f: with(func(f *rollbackFacts) { f.err = preempted })},
		{name: "a rollback is never rolled back",
			f: with(func(f *rollbackFacts) { f.ask = Ask{Sync: true, Revision: "c0", Rollback: true} }), whyHas: "itself a rollback"},
		{name: "only a release this sync wrote is rolled back",
			f: with(func(f *rollbackFacts) { f.written = nil }), whyHas: "wrote no service"},
		{name: "without the last healthy revision nothing is written and the failure says why",
			f: with(func(f *rollbackFacts) { f.lastHealthy = nil }), whyHas: "last healthy revision is unknown"},
		{name: "an updated service whose earlier spec the pass never saw stops the rollback",
			f: with(func(f *rollbackFacts) {
				f.before = map[string]dswarm.Service{"web_api": before["web_api"], "web_ui": before["web_ui"]}
			}), whyHas: "web_db ran before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := rollbackDecision(tc.f)
			var got []string
			for _, s := range p.steps {
				switch {
				case s.Spec == nil:
					got = append(got, "-"+s.Service)
				case s.Spec.Name != s.Service || s.Spec.Labels["v"] != "1":
					t.Errorf("step %s writes back %+v, not the spec the pass first saw", s.Service, s.Spec.Annotations)
					fallthrough
				default:
					got = append(got, s.Service)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("steps = %q, want %q", got, tc.want)
			}
			switch {
			case tc.to == 0 && p.to != nil:
				t.Errorf("rolls back to revision %d, want no rollback", p.to.Number)
			case tc.to != 0 && (p.to == nil || p.to.Number != tc.to):
				t.Errorf("rolls back to %+v, want revision %d", p.to, tc.to)
			}
			if tc.whyHas == "" && p.why != "" || !strings.Contains(p.why, tc.whyHas) {
				t.Errorf("why = %q, want one saying %q", p.why, tc.whyHas)
			}
		})
	}
}

// TestLastHealthy: a release goes back only to the revision its services
// were seen running healthy, converged and settled as the pass started.
func TestLastHealthy(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	rel := webRelease("registry/web:v1")
	rev := &apply.Revision{Number: 2, Commit: "c1", Release: rel}
	live := liveService(rel, "registry/web:v1", "")
	snapOf := func(s dswarm.Service, failed bool, tasks ...dswarm.Task) swarm.Snapshot {
		node := dswarm.Node{Status: dswarm.NodeStatus{State: dswarm.NodeStateReady}, Spec: dswarm.NodeSpec{Availability: dswarm.NodeAvailabilityActive}}
		c := swarm.Contents{Services: []dswarm.Service{s}, Tasks: tasks, Nodes: []dswarm.Node{node}, TakenAt: at}
		if failed {
			c.Err = errors.New("list failed")
		}
		return swarm.NewSnapshot(c)
	}
	ok := snapOf(live, false, runningTask(live, at, nil))
	for _, tc := range []struct {
		name     string
		recorded *apply.Revision
		healthy  int
		snap     swarm.Snapshot
		seen     bool
		want     bool
	}{
		{name: "a recorded revision running healthy is the last healthy one", recorded: rev, snap: ok, seen: true, want: true},
		{name: "a recorded revision the passes saw healthy is the last healthy one, whatever the snapshot", recorded: rev, healthy: 2, snap: snapOf(live, false), want: true},
		{name: "another revision seen healthy says nothing of the recorded one", recorded: rev, healthy: 1, snap: snapOf(live, false), seen: true},
		{name: "no revision recorded: unknown", snap: ok, seen: true},
		{name: "a snapshot that does not show the application's writes: unknown", recorded: rev, snap: ok},
		{name: "a snapshot whose read failed: unknown", recorded: rev, snap: snapOf(live, true, runningTask(live, at, nil)), seen: true},
		{name: "a release not running all its tasks: unknown", recorded: rev, snap: snapOf(live, false), seen: true},
		{name: "a release Swarm is still updating: unknown", recorded: rev,
			snap: snapOf(liveService(rel, "registry/web:v1", dswarm.UpdateStateUpdating), false, runningTask(live, at, nil)), seen: true},
		{name: "a release still running a task of an earlier spec: unknown", recorded: rev,
			snap: snapOf(live, false, runningTask(live, at, &dswarm.ContainerSpec{Image: "registry/web:v0"})), seen: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lastHealthy(tc.recorded, tc.healthy, tc.snap, tc.seen); (got != nil) != tc.want {
				t.Errorf("lastHealthy = %+v, want found %t", got, tc.want)
			}
		})
	}
}

// TestFindFailure: the root cause of a failed rollout, from the tasks the
// swarm keeps: the newest failure since the write, classed by what the
// daemon says.
func TestFindFailure(t *testing.T) {
	write := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	rel := webRelease("registry/web:v2")
	live := liveService(rel, "registry/web:v2", "")
	task := func(id string, state dswarm.TaskState, at time.Time, errText string, exit int) dswarm.Task {
		t := dswarm.Task{ID: id, ServiceID: live.ID, DesiredState: dswarm.TaskStateShutdown, Meta: dswarm.Meta{CreatedAt: at.Add(-time.Second)},
			Spec:   dswarm.TaskSpec{ContainerSpec: &dswarm.ContainerSpec{Image: "127.0.0.1:5000/web:v2"}},
			Status: dswarm.TaskStatus{State: state, Timestamp: at, Err: errText}}
		if exit != 0 {
			t.Status.ContainerStatus = &dswarm.ContainerStatus{ContainerID: "ctr-" + id, ExitCode: exit}
		}
		return t
	}
	pending := task("p1", dswarm.TaskStatePending, write.Add(time.Second), "no suitable node (scheduling constraints not satisfied on 1 node)", 0)
	pending.DesiredState = dswarm.TaskStateRunning
	rolled := liveService(rel, "registry/web:v1", dswarm.UpdateStateRollbackCompleted)
	done := write.Add(5 * time.Second)
	rolled.UpdateStatus.CompletedAt = &done
	for _, tc := range []struct {
		name  string
		svc   dswarm.Service
		tasks []dswarm.Task
		want  Cause // Service, Task, Kind, ExitCode compared; zero: none
		line  string
	}{
		{name: "a task that exited non-zero names its exit code",
			svc: live, tasks: []dswarm.Task{task("t1", dswarm.TaskStateFailed, write.Add(2*time.Second), "task: non-zero exit (1)", 1)},
			want: Cause{Service: "web_api", Task: "t1", Kind: CauseExit, ExitCode: 1}, line: "web_api: exit code 1 (task: non-zero exit (1))"},
		{name: "the newest failure since the write is the cause",
			svc: live, tasks: []dswarm.Task{task("t1", dswarm.TaskStateFailed, write.Add(2*time.Second), "task: non-zero exit (1)", 1),
				task("t2", dswarm.TaskStateFailed, write.Add(4*time.Second), "task: non-zero exit (3)", 3)},
			want: Cause{Service: "web_api", Task: "t2", Kind: CauseExit, ExitCode: 3}},
		{name: "a failure before the write is not this rollout's",
			svc: live, tasks: []dswarm.Task{task("t0", dswarm.TaskStateFailed, write.Add(-time.Minute), "task: non-zero exit (1)", 1)}},
		{name: "a failing health check is named as such",
			svc: live, tasks: []dswarm.Task{task("t1", dswarm.TaskStateFailed, write.Add(time.Second), "task: non-zero exit (137): dockerexec: unhealthy container", 137)},
			want: Cause{Service: "web_api", Task: "t1", Kind: CauseUnhealthy, ExitCode: 137}},
		{name: "an image the node cannot pull is named as such",
			svc: live, tasks: []dswarm.Task{task("t1", dswarm.TaskStateRejected, write.Add(time.Second), "No such image: 127.0.0.1:5000/web:v2", 0)},
			want: Cause{Service: "web_api", Task: "t1", Kind: CauseImagePull}, line: "web_api: image not pulled (No such image: 127.0.0.1:5000/web:v2)"},
		{name: "a task no node can take is a placement failure",
			svc: live, tasks: []dswarm.Task{pending},
			want: Cause{Service: "web_api", Task: "p1", Kind: CausePlacement}, line: "web_api: cannot be placed (no suitable node"},
		{name: "a task the node refused otherwise is a rejection",
			svc: live, tasks: []dswarm.Task{task("t1", dswarm.TaskStateRejected, write.Add(time.Second), "invalid mount config", 0)},
			want: Cause{Service: "web_api", Task: "t1", Kind: CauseRejected}},
		{name: "a service that exits 0 is a failure of a long-running service",
			svc: live, tasks: []dswarm.Task{task("t1", dswarm.TaskStateComplete, write.Add(time.Second), "", 0)},
			want: Cause{Service: "web_api", Task: "t1", Kind: CauseExit}},
		{name: "a service Swarm rolled back carries the task failure that made it",
			svc: rolled, tasks: []dswarm.Task{task("t1", dswarm.TaskStateFailed, write.Add(2*time.Second), "task: non-zero exit (2)", 2)},
			want: Cause{Service: "web_api", Task: "t1", Kind: CauseRolledBack, ExitCode: 2}, line: "web_api: rolled back by Swarm (task: non-zero exit (2))"},
		{name: "a running release has no failure",
			svc: live, tasks: []dswarm.Task{runningTask(live, write.Add(time.Minute), nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := dswarm.Node{Status: dswarm.NodeStatus{State: dswarm.NodeStateReady}, Spec: dswarm.NodeSpec{Availability: dswarm.NodeAvailabilityActive}}
			snap := swarm.NewSnapshot(swarm.Contents{Services: []dswarm.Service{tc.svc}, Tasks: tc.tasks, Nodes: []dswarm.Node{node}, TakenAt: write.Add(time.Minute)})
			got, found := findFailure(rel, snap, write)
			if found != tc.want.Known() || got.Service != tc.want.Service || got.Task != tc.want.Task || got.Kind != tc.want.Kind || got.ExitCode != tc.want.ExitCode {
				t.Errorf("findFailure = %+v (found %t), want %+v", got, found, tc.want)
			}
			if !strings.HasPrefix(got.String(), tc.line) {
				t.Errorf("cause line = %q, want it to start %q", got.String(), tc.line)
			}
		})
	}
}

// TestCauseIsMaskedAndNamesItsLastLogLine: a cause carries the task's last
// log line, with no decrypted value nor secret of the release in it.
func TestCauseIsMaskedAndNamesItsLastLogLine(t *testing.T) {
	rel := webRelease("registry/web:v2")
	rel.Sensitive = []string{"hunter2"}
	rel.Secrets = map[string]dswarm.SecretSpec{"web_token-1a2b": {Data: []byte("s3cr3t-token\n")}}
	c := maskCause(Cause{Service: "web_api", Kind: CauseExit, ExitCode: 1, Err: "task: non-zero exit (1)",
		Logs: "connecting with hunter2\nauth s3cr3t-token refused"}, rel)
	line := c.String()
	for _, secret := range []string{"hunter2", "s3cr3t-token"} {
		if strings.Contains(line, secret) || strings.Contains(c.Logs, secret) {
			t.Errorf("cause shows %q: %q / %q", secret, line, c.Logs)
		}
	}
	if !strings.Contains(line, "last log line: auth ") || !strings.HasSuffix(line, " refused") {
		t.Errorf("cause line = %q, want the last log line, masked", line)
	}
}

// TestRunsAfter: what still runs once a step of a write failed.
func TestRunsAfter(t *testing.T) {
	for _, tc := range []struct {
		name       string
		kind, at   stepKind
		rolledBack bool
		want       bool
	}{
		{"a failed wave's wait is rolled back", stepRollback, stepWaitWave, false, true},
		{"a failed wait is rolled back", stepRollback, stepWait, false, true},
		{"a refused write is not rolled back", stepRollback, stepRelease, false, false},
		{"a failed pre-sync hook is not rolled back", stepRollback, stepPreSync, false, false},
		{"later waves are never written after a failure", stepWave, stepWaitWave, false, false},
		{"the release is never written after a failed wave", stepRelease, stepWaitWave, false, false},
		{"the controller's own service follows a failed wait", stepSelf, stepWait, false, true},
		{"the controller's own service does not follow a rollback", stepSelf, stepWait, true, false},
		{"the controller's own service does not follow a refused write", stepSelf, stepRelease, false, false},
		{"post-sync hooks never run after a failure", stepPostSync, stepWait, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runsAfter(tc.kind, tc.at, tc.rolledBack); got != tc.want {
				t.Errorf("runsAfter(%v after %v failed, rolled back %t) = %t, want %t",
					writeStep{kind: tc.kind}, writeStep{kind: tc.at}, tc.rolledBack, got, tc.want)
			}
		})
	}
}

// TestCrashLoop: a wait fails before its timeout only once a service's
// tasks failed three times since the write.
func TestCrashLoop(t *testing.T) {
	write := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	rel := webRelease("registry/web:v2")
	live := liveService(rel, "registry/web:v2", "")
	failedAt := func(state dswarm.TaskState, after time.Duration) dswarm.Task {
		return dswarm.Task{ServiceID: live.ID, DesiredState: dswarm.TaskStateShutdown,
			Status: dswarm.TaskStatus{State: state, Timestamp: write.Add(after), Err: "task: non-zero exit (1)"}}
	}
	pending := failedAt(dswarm.TaskStatePending, time.Second)
	pending.DesiredState = dswarm.TaskStateRunning
	for _, tc := range []struct {
		name  string
		since time.Time
		tasks []dswarm.Task
		want  bool
	}{
		{"three failures since the write are a loop", write,
			[]dswarm.Task{failedAt(dswarm.TaskStateFailed, time.Second), failedAt(dswarm.TaskStateRejected, 2*time.Second), failedAt(dswarm.TaskStateFailed, 3*time.Second)}, true},
		{"two failures may still settle", write,
			[]dswarm.Task{failedAt(dswarm.TaskStateFailed, time.Second), failedAt(dswarm.TaskStateFailed, 2*time.Second)}, false},
		{"failures before the write are not this rollout's", write,
			[]dswarm.Task{failedAt(dswarm.TaskStateFailed, -3*time.Minute), failedAt(dswarm.TaskStateFailed, -2*time.Minute), failedAt(dswarm.TaskStateFailed, time.Second)}, false},
		{"a task waiting for a node is no loop", write,
			[]dswarm.Task{pending, pending, pending}, false},
		{"nothing written, nothing to fail early", time.Time{},
			[]dswarm.Task{failedAt(dswarm.TaskStateFailed, time.Second), failedAt(dswarm.TaskStateFailed, 2*time.Second), failedAt(dswarm.TaskStateFailed, 3*time.Second)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := swarm.NewSnapshot(swarm.Contents{Services: []dswarm.Service{live}, Tasks: tc.tasks, TakenAt: write.Add(time.Minute)})
			if got := crashLoop(rel, snap, tc.since); (got != "") != tc.want {
				t.Errorf("crashLoop = %q, want a loop %t", got, tc.want)
			}
		})
	}
}

// TestARolloutLeftFailingIsNeverAQuietPass: a pass whose release's rollout
// failed and was left so is not remembered as quiet, so the next passes
// look at the swarm until they find it healthy (recovery).
func TestARolloutLeftFailingIsNeverAQuietPass(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failed string
		quiet  bool
	}{
		{"a pass after a rollout left failing is not quiet", "c1", false},
		{"a pass with nothing failing is quiet", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out Outcome
			out.Memo.failedRollout = tc.failed
			out.rememberQuiet("key", desired{})
			if got := out.Memo.quiet.key == "key"; got != tc.quiet {
				t.Errorf("remembered as quiet = %t, want %t", got, tc.quiet)
			}
		})
	}
}

package health

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/swarm"
)

// RecentFailureWindow is how far back from ServiceInput.Now a failed task
// counts as a restart of a long-running service.
const RecentFailureWindow = 5 * time.Minute

// restartThreshold is how many recent task failures make a service
// Degraded ("restarting") rather than merely replacing a task. One failure
// is a task being replaced; two within the window is a loop.
const restartThreshold = 2

// ServiceInput is everything Service needs about one declared service. The
// caller reads it from one live snapshot; Service keeps none of it.
type ServiceInput struct {
	// Declared is the spec git declares. It only gives the desired count of
	// a Missing service and may be nil.
	Declared *swarm.ServiceSpec
	// Live is the service as the swarm reports it (with ServiceStatus when
	// listed with status), or nil when the swarm has no such service.
	Live *swarm.Service
	// Tasks are the tasks the swarm keeps for the service, in any state and
	// with history; tasks of other services are ignored.
	Tasks []swarm.Task
	// EligibleNodes is the number of nodes a global service can run on. It
	// is used when Live carries no ServiceStatus, whose DesiredTasks already
	// accounts for placement constraints.
	EligibleNodes int
	// Now is when Tasks were read. Failures within RecentFailureWindow
	// before Now count as restarts; with the zero Now none does.
	Now time.Time
	// ReadFailed says the swarm could not be read: the result is Unknown,
	// whatever else the input holds. A nil Live with ReadFailed false means
	// the service really is absent.
	ReadFailed bool
	// Nodes are the swarm's nodes, to say where: a task failure reads "on
	// skep-w1: ...", and a service short of tasks names the nodes that are
	// down, drained or paused and held its tasks. Nil names no node.
	// NodeByID, when set, is the same nodes by id, shared read-only by the
	// caller (a snapshot's), and used instead of Nodes.
	Nodes    []swarm.Node
	NodeByID map[string]swarm.Node
}

// Service computes the health of one service. See the package doc for
// what each State means; the tests in testdata/ pin one fixture per state.
func Service(in ServiceInput) Result {
	if in.ReadFailed {
		return Result{State: Unknown, Message: "the swarm could not be read", Desired: declaredCount(in.Declared, in.EligibleNodes)}
	}
	if in.Live == nil {
		return Result{State: Missing, Message: "declared but not in the swarm", Desired: declaredCount(in.Declared, in.EligibleNodes)}
	}
	svc := in.Live
	tasks := ownTasks(svc.ID, in.Tasks)
	m := svc.Spec.Mode
	if m.ReplicatedJob != nil || m.GlobalJob != nil {
		return job(svc, tasks, in.EligibleNodes)
	}
	nodes := in.NodeByID
	if nodes == nil {
		nodes = nodesByID(in.Nodes)
	}
	return withLostNodes(longRunning(svc, tasks, in, nodes), tasks, nodes, in.Now)
}

// ownTasks keeps the tasks of serviceID. ServiceInput.Tasks may hold a
// whole snapshot's tasks; a fixture without ids matches a service without
// one.
func ownTasks(serviceID string, tasks []swarm.Task) []swarm.Task {
	var out []swarm.Task
	for _, t := range tasks {
		if t.ServiceID == serviceID || t.ServiceID == "" && serviceID == "" {
			out = append(out, t)
		}
	}
	return out
}

// declaredCount is the number of tasks a spec asks for, as far as the spec
// alone tells: replicas (1 when unset), eligible nodes for global modes,
// the completions of a replicated job.
func declaredCount(spec *swarm.ServiceSpec, eligible int) int {
	if spec == nil {
		return 0
	}
	m := spec.Mode
	switch {
	case m.Global != nil, m.GlobalJob != nil:
		return eligible
	case m.ReplicatedJob != nil:
		return jobCompletions(m.ReplicatedJob)
	case m.Replicated != nil && m.Replicated.Replicas != nil:
		return int(*m.Replicated.Replicas)
	}
	return 1
}

// jobCompletions is how many completions a replicated job wants: Swarm
// defaults TotalCompletions to MaxConcurrent, and both to 1.
func jobCompletions(j *swarm.ReplicatedJob) int {
	switch {
	case j.TotalCompletions != nil:
		return int(*j.TotalCompletions)
	case j.MaxConcurrent != nil:
		return int(*j.MaxConcurrent)
	}
	return 1
}

// longRunning is the health of a replicated or global service.
func longRunning(svc *swarm.Service, tasks []swarm.Task, in ServiceInput, nodes map[string]swarm.Node) Result {
	desired := declaredCount(&svc.Spec, in.EligibleNodes)
	if svc.Spec.Mode.Global != nil && svc.ServiceStatus != nil {
		desired = int(svc.ServiceStatus.DesiredTasks)
	}
	var running, starting int
	var unschedulable []string
	var failed, everFailed []swarm.Task
	for _, t := range tasks {
		if t.Status.State == swarm.TaskStateFailed || t.Status.State == swarm.TaskStateRejected {
			everFailed = append(everFailed, t)
		}
		current := t.DesiredState == swarm.TaskStateRunning || t.DesiredState == swarm.TaskStateReady
		switch {
		case current && t.Status.State == swarm.TaskStateRunning && !onLostNode(t, nodes):
			running++
		case current && isStarting(t.Status.State):
			starting++
			// Swarm leaves a task it cannot place in pending with the reason
			// ("no suitable node (...)") in Err; it will not place itself.
			if t.Status.State == swarm.TaskStatePending && t.Status.Err != "" {
				unschedulable = append(unschedulable, t.Status.Err)
			}
		case exitedRecently(t, in.Now) && ofCurrentSpec(t, svc):
			failed = append(failed, t)
		}
	}
	failures := newestReasons(failed, nodes)
	r := Result{Running: running, Desired: desired}
	if u := svc.UpdateStatus; u != nil {
		// Swarm's own message after a rollback is only "rollback completed";
		// the task failure that caused it may be older than the window.
		failures := newestReasons(everFailed, nodes)
		switch u.State {
		case swarm.UpdateStateRollbackStarted:
			return degraded(r, "rolling back", u.Message, failures)
		case swarm.UpdateStateRollbackPaused:
			return degraded(r, "rollback paused", u.Message, failures)
		case swarm.UpdateStateRollbackCompleted:
			return degraded(r, "rolled back", u.Message, failures)
		case swarm.UpdateStatePaused:
			return degraded(r, "update paused", u.Message, failures)
		}
	}
	switch {
	case len(failures) >= restartThreshold:
		r.State = Degraded
		r.Message = fmt.Sprintf("restarting: %d/%d running, %d task failures in the last %s: %s",
			running, desired, len(failures), RecentFailureWindow, failures[0])
	case len(unschedulable) > 0 && running < desired:
		r.State = Degraded
		r.Message = fmt.Sprintf("%d/%d running; cannot be scheduled: %s", running, desired, joinReasons(unschedulable))
	case svc.UpdateStatus != nil && svc.UpdateStatus.State == swarm.UpdateStateUpdating:
		r.State = Progressing
		r.Message = fmt.Sprintf("updating: %d/%d running", running, desired)
		if why := Stranded(svc, tasks, nodes); why != "" {
			r.Message += "; " + why
		}
	case desired == 0:
		r.State, r.Message = Healthy, "scaled to zero"
	case running < desired:
		r.State = Progressing
		r.Message = fmt.Sprintf("%d/%d running", running, desired)
		if starting > 0 {
			r.Message += fmt.Sprintf(", %d starting", starting)
		}
	default:
		r.State = Healthy
		r.Message = fmt.Sprintf("%d/%d running", running, desired)
	}
	return r
}

// degraded reports an update Swarm stopped or undid, with the daemon's
// reason and, since after a rollback that reason is only "rollback
// completed", the latest task failure that caused it.
func degraded(r Result, what, reason string, failures []string) Result {
	r.State = Degraded
	r.Message = what
	if reason != "" {
		r.Message += ": " + reason
	}
	if len(failures) > 0 {
		r.Message += "; last task failure: " + failures[0]
	}
	return r
}

// job is the health of a replicated or global job: Running counts the
// completed tasks of the current run, Desired the completions wanted.
func job(svc *swarm.Service, tasks []swarm.Task, eligible int) Result {
	var iteration *uint64
	if svc.JobStatus != nil {
		iteration = &svc.JobStatus.JobIteration.Index
	}
	var completed, active int
	var failed []swarm.Task
	nodes := map[string]bool{}
	for _, t := range tasks {
		// Tasks of an earlier run of the job (before its spec last changed)
		// say nothing about this one.
		if iteration != nil && t.JobIteration != nil && t.JobIteration.Index != *iteration {
			continue
		}
		nodes[t.NodeID] = true
		switch {
		case t.Status.State == swarm.TaskStateComplete:
			completed++
		case isStarting(t.Status.State) || t.Status.State == swarm.TaskStateRunning:
			active++
		case t.Status.State == swarm.TaskStateFailed || t.Status.State == swarm.TaskStateRejected:
			failed = append(failed, t)
		}
	}
	failures := newestReasons(failed, nil)
	desired := declaredCount(&svc.Spec, eligible)
	if svc.Spec.Mode.GlobalJob != nil {
		switch {
		case svc.ServiceStatus != nil && svc.ServiceStatus.DesiredTasks > 0:
			desired = int(svc.ServiceStatus.DesiredTasks)
		case desired == 0:
			desired = len(nodes)
		}
	}
	r := Result{Running: completed, Desired: desired}
	switch {
	case completed >= desired:
		r.State, r.Message = Healthy, fmt.Sprintf("job completed: %d/%d", completed, desired)
	case len(failures) >= restartThreshold || len(failures) > 0 && active == 0:
		r.State = Degraded
		r.Message = fmt.Sprintf("job failed: %d/%d completed, %d failed attempts: %s", completed, desired, len(failures), failures[0])
	case active > 0:
		r.State, r.Message = Progressing, fmt.Sprintf("job running: %d/%d completed", completed, desired)
	default:
		r.State, r.Message = Progressing, fmt.Sprintf("job waiting to start: %d/%d completed", completed, desired)
	}
	return r
}

// isStarting reports whether a task is on its way to running: created,
// scheduled, pulling, or waiting for its first health check to pass.
func isStarting(s swarm.TaskState) bool {
	switch s {
	case swarm.TaskStateNew, swarm.TaskStateAllocated, swarm.TaskStatePending, swarm.TaskStateAssigned,
		swarm.TaskStateAccepted, swarm.TaskStatePreparing, swarm.TaskStateReady, swarm.TaskStateStarting:
		return true
	}
	return false
}

// exitedRecently reports whether a long-running task ended on its own
// (failed, rejected, or exited) within RecentFailureWindow before now. A
// task shut down by an update or a scale-down is not a failure.
func exitedRecently(t swarm.Task, now time.Time) bool {
	switch t.Status.State {
	case swarm.TaskStateFailed, swarm.TaskStateRejected, swarm.TaskStateComplete:
	default:
		return false
	}
	if now.IsZero() || t.Status.Timestamp.IsZero() {
		return false
	}
	age := now.Sub(t.Status.Timestamp)
	return age >= -time.Minute && age <= RecentFailureWindow // a little clock skew is tolerated
}

// ofCurrentSpec reports whether task t ran svc's current container spec
// (or either is unknown): the failures of an earlier spec are a rollout
// that was undone or fixed, not a service restarting now.
func ofCurrentSpec(t swarm.Task, svc *swarm.Service) bool {
	want := svc.Spec.TaskTemplate.ContainerSpec
	if t.Spec.ContainerSpec == nil || want == nil {
		return true
	}
	return reflect.DeepEqual(*t.Spec.ContainerSpec, *want)
}

// newestReasons returns the reasons tasks ended, newest first, each with
// the node it ran on when nodes names it.
func newestReasons(tasks []swarm.Task, nodes map[string]swarm.Node) []string {
	slices.SortStableFunc(tasks, func(a, b swarm.Task) int { return b.Status.Timestamp.Compare(a.Status.Timestamp) })
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = taskReason(t)
		if n, ok := nodes[t.NodeID]; ok {
			out[i] = "on " + hostname(n) + ": " + out[i]
		}
	}
	return out
}

// nodesByID indexes nodes by id; nil for none.
func nodesByID(nodes []swarm.Node) map[string]swarm.Node {
	if len(nodes) == 0 {
		return nil
	}
	out := make(map[string]swarm.Node, len(nodes))
	for _, n := range nodes {
		out[n.ID] = n
	}
	return out
}

// hostname names a node, by id when it announces no hostname.
func hostname(n swarm.Node) string {
	if n.Description.Hostname != "" {
		return n.Description.Hostname
	}
	return n.ID
}

// withLostNodes adds to a result that is not healthy the nodes that held
// tasks of the service and can take none now (down, drained, paused):
// Swarm moves the tasks elsewhere but says nothing of why. A task counts
// when it is meant to run, still shows running (a node that went down
// never reports its tasks stopped), or ended within RecentFailureWindow.
func withLostNodes(r Result, tasks []swarm.Task, nodes map[string]swarm.Node, now time.Time) Result {
	if r.State == Healthy || len(nodes) == 0 {
		return r
	}
	seen := map[string]bool{}
	var lost []string
	for _, t := range tasks {
		n, ok := nodes[t.NodeID]
		if !ok || seen[n.ID] {
			continue
		}
		recent := t.DesiredState == swarm.TaskStateRunning || t.Status.State == swarm.TaskStateRunning ||
			!now.IsZero() && now.Sub(t.Status.Timestamp) <= RecentFailureWindow
		if why := unavailable(n); why != "" && recent {
			seen[n.ID] = true
			lost = append(lost, hostname(n)+" "+why)
		}
	}
	if len(lost) > 0 {
		slices.Sort(lost)
		r.Message += "; tasks lost with node " + strings.Join(lost, ", node ")
	}
	return r
}

// unavailable says why node n takes no task, "" when it is ready and active.
func unavailable(n swarm.Node) string {
	switch {
	case n.Status.State != swarm.NodeStateReady:
		if n.Status.Message != "" {
			return fmt.Sprintf("%s (%s)", n.Status.State, n.Status.Message)
		}
		return string(n.Status.State)
	case n.Spec.Availability == swarm.NodeAvailabilityDrain:
		return "drained"
	case n.Spec.Availability == swarm.NodeAvailabilityPause:
		return "paused"
	}
	return ""
}

// taskReason describes why a task ended, in the daemon's words, naming a
// failing health check plainly.
func taskReason(t swarm.Task) string {
	reason := t.Status.Err
	if reason == "" {
		reason = t.Status.Message
	}
	if strings.Contains(reason, "unhealthy container") {
		return "health check failing (" + reason + ")"
	}
	if reason == "" {
		return "task " + string(t.Status.State)
	}
	return reason
}

// onLostNode says t sits on a node the managers have lost (down or
// disconnected, not unknown: a new leader calls every node unknown until
// it hears from it). Such a node never reports its tasks stopped, so they
// still show running while Swarm replaces them elsewhere.
func onLostNode(t swarm.Task, nodes map[string]swarm.Node) bool {
	n, ok := nodes[t.NodeID]
	return ok && (n.Status.State == swarm.NodeStateDown || n.Status.State == swarm.NodeStateDisconnected)
}

// Stranded describes the task an update of svc waits on for ever: a task
// of the update (of the current spec, created since the update started)
// that never started and sits on a node that is down. Swarm's
// updater waits for that task to run and does not look again when the
// node goes down, so the update stays "updating" until the node is back,
// however many replicas run elsewhere; a new write of the service starts
// it over. "" when the update waits on no such task. It is pure.
func Stranded(svc *swarm.Service, tasks []swarm.Task, nodes map[string]swarm.Node) string {
	u := svc.UpdateStatus
	if u == nil || u.State != swarm.UpdateStateUpdating || u.StartedAt == nil {
		return ""
	}
	for _, t := range tasks {
		if t.ServiceID != svc.ID || !isStarting(t.Status.State) || t.CreatedAt.Before(*u.StartedAt) || !ofCurrentSpec(t, svc) {
			continue
		}
		n, ok := nodes[t.NodeID]
		if !ok || n.Status.State != swarm.NodeStateDown {
			continue // down, not unknown, as in onLostNode
		}
		return fmt.Sprintf("Swarm's update waits on task %s, which node %s took before it went %s: the update goes on once the node is back, or with the next write",
			ShortID(t.ID), hostname(n), unavailable(n))
	}
	return ""
}

// ShortID is the first 12 characters of a Swarm object's id, as docker
// prints them.
func ShortID(id string) string { return id[:min(len(id), 12)] }

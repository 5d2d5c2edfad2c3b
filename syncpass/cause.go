package syncpass

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/container"
	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/hook"
	"github.com/skep-cd/skep/sops"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// CauseReader reads what explains a failed task beyond the snapshot: the
// tail of its log and, for a container the answering manager runs, whether
// the kernel killed it for memory. *swarm.Client implements it.
type CauseReader interface {
	TaskLogs(ctx context.Context, taskID string, options container.LogsOptions) (io.ReadCloser, error)
	ContainerInspect(ctx context.Context, containerID string) (container.InspectResponse, error)
}

// Bounds of the log tail a Cause carries: the last lines, then the last
// bytes of those; a log that does not answer within causeLogTimeout is
// left out (the cause stands without it).
const (
	causeLogLines   = 10
	causeLogBytes   = 1024
	causeLogTimeout = 5 * time.Second
)

// CauseKind says how a task failed. The zero value is an unknown kind.
type CauseKind string

// The kinds of cause, each from what the swarm says of the failing task.
const (
	// CauseExit: the container's process exited (its code in ExitCode).
	CauseExit CauseKind = "exit"
	// CauseUnhealthy: the health check failed and the task was killed.
	CauseUnhealthy CauseKind = "unhealthy"
	// CauseOOM: the kernel killed the container for memory.
	CauseOOM CauseKind = "oom-killed"
	// CauseImagePull: the node could not get the image.
	CauseImagePull CauseKind = "image-pull"
	// CausePlacement: no node meets the task's constraints or resources.
	CausePlacement CauseKind = "placement"
	// CauseRejected: the node refused the task for another reason.
	CauseRejected CauseKind = "rejected"
	// CauseRolledBack: Swarm rolled the service back; the task failure
	// that made it do so is in the other fields when the swarm keeps it.
	CauseRolledBack CauseKind = "rolled-back"
)

// Cause is the root cause of a failed rollout as the swarm tells it: the
// failing task of one service and why. It is a value; its Logs are masked
// (no decrypted value or secret of the release appears). The zero value
// is no known cause.
type Cause struct {
	// Service is the service's full name; Task the failing task's id.
	Service string
	Task    string
	Kind    CauseKind
	// State is the task's state; Err and Message the daemon's words
	// (Status.Err, Status.Message); ExitCode the container's exit code.
	State    string
	Err      string
	Message  string
	ExitCode int
	// Logs are the last lines of the task's output, masked.
	Logs string
	// Shared names a dependency other applications share whose failure
	// this is ("registry 127.0.0.1:5000"), as notify.Event.Shared.
	Shared string
	// container and image are the failing task's, for the OOM and the
	// registry look-ups.
	container, image string
}

// Known reports whether c names a failing task or service.
func (c Cause) Known() bool { return c.Service != "" }

// String is the cause in one line, as events and the status carry it:
// "web_api: exit code 1 (task: non-zero exit (1)); last log line: boom".
func (c Cause) String() string {
	if !c.Known() {
		return ""
	}
	var what string
	switch c.Kind {
	case CauseExit:
		what = "exit code " + strconv.Itoa(c.ExitCode)
	case CauseOOM:
		what = "killed for memory (OOM, exit code " + strconv.Itoa(c.ExitCode) + ")"
	case CauseUnhealthy:
		what = "health check failing"
	case CauseImagePull:
		what = "image not pulled"
	case CausePlacement:
		what = "cannot be placed"
	case CauseRolledBack:
		what = "rolled back by Swarm"
	default:
		what = "task " + c.State
	}
	line := c.Service + ": " + what
	if why := cmp.Or(c.Err, c.Message); why != "" {
		line += " (" + why + ")"
	}
	if c.Shared != "" {
		line += "; " + c.Shared + " failing"
	}
	if last := lastLine(c.Logs); last != "" {
		line += "; last log line: " + last
	}
	return line
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}

// findFailure finds, in snap, the newest failure of a service of rel
// since the instant since (zero: any): a task that failed, was rejected,
// exited or cannot be placed, or a service Swarm rolled back. It is pure.
// See TestFindFailure.
func findFailure(rel stack.Release, snap swarm.Snapshot, since time.Time) (Cause, bool) {
	var best Cause
	var bestAt time.Time
	for _, name := range slices.Sorted(maps.Keys(rel.Services)) {
		live, ok := snap.Service(name)
		if !ok {
			continue
		}
		tasks := snap.TasksOf(live.ID)
		if u := live.UpdateStatus; u != nil && swarmRolledBack(u.State) && (since.IsZero() || updateAt(u).After(since)) {
			c := Cause{Service: name, Kind: CauseRolledBack, Message: u.Message}
			// The failure that made Swarm roll back is older than the
			// rollback, and may be older than the window of since.
			if t, ok := newestFailed(tasks, live.Spec.Mode, time.Time{}); ok {
				c = taskCause(name, t)
				c.Kind, c.Message = CauseRolledBack, u.Message
			}
			return c, true
		}
		if t, ok := newestFailed(tasks, live.Spec.Mode, since); ok && !t.Status.Timestamp.Before(bestAt) {
			best, bestAt = taskCause(name, t), t.Status.Timestamp
		}
	}
	return best, best.Known()
}

// swarmRolledBack reports whether an update state is Swarm undoing an
// update.
func swarmRolledBack(s dswarm.UpdateState) bool {
	switch s {
	case dswarm.UpdateStateRollbackStarted, dswarm.UpdateStateRollbackPaused, dswarm.UpdateStateRollbackCompleted:
		return true
	}
	return false
}

// updateAt is when an update last moved: its completion, else its start.
func updateAt(u *dswarm.UpdateStatus) time.Time {
	switch {
	case u.CompletedAt != nil:
		return *u.CompletedAt
	case u.StartedAt != nil:
		return *u.StartedAt
	}
	return time.Time{}
}

// crashLoopFailures is how many times the tasks of one service may fail
// after a write before its wait fails without waiting out the timeout: a
// task replaced once or twice may still settle (a dependency starting
// late), three failures are a loop.
const crashLoopFailures = 3

// crashLoop names a service of rel whose tasks failed, were rejected or
// exited crashLoopFailures times since since; "" when none did, or since
// is zero (nothing was written). A task the scheduler cannot place is no
// loop: a node may still come. It is pure.
func crashLoop(rel stack.Release, snap swarm.Snapshot, since time.Time) string {
	if since.IsZero() {
		return ""
	}
	for _, name := range slices.Sorted(maps.Keys(rel.Services)) {
		live, ok := snap.Service(name)
		if !ok {
			continue
		}
		n := 0
		for _, t := range snap.TasksOf(live.ID) {
			if t.Status.State != dswarm.TaskStatePending {
				if _, failed := newestFailed([]dswarm.Task{t}, live.Spec.Mode, since); failed {
					n++
				}
			}
		}
		if n >= crashLoopFailures {
			return fmt.Sprintf("service %s: %d tasks failed since the write", name, n)
		}
	}
	return ""
}

// newestFailed returns the newest task that failed since since: failed
// or rejected, exited when the service is not a job, or pending with the
// scheduler's refusal.
func newestFailed(tasks []dswarm.Task, mode dswarm.ServiceMode, since time.Time) (dswarm.Task, bool) {
	job := mode.ReplicatedJob != nil || mode.GlobalJob != nil
	var out dswarm.Task
	found := false
	for _, t := range tasks {
		switch {
		case t.Status.State == dswarm.TaskStateFailed, t.Status.State == dswarm.TaskStateRejected:
		case t.Status.State == dswarm.TaskStateComplete && !job:
		case t.Status.State == dswarm.TaskStatePending && t.Status.Err != "" && t.DesiredState == dswarm.TaskStateRunning:
		default:
			continue
		}
		at := t.Status.Timestamp
		if !since.IsZero() && !at.After(since) && !t.CreatedAt.After(since) {
			continue
		}
		if !found || at.After(out.Status.Timestamp) {
			out, found = t, true
		}
	}
	return out, found
}

// taskCause classes why task t of service failed, from the daemon's
// words: the Engine gives no code for an image it could not pull or a
// node it could not find, only these messages.
func taskCause(service string, t dswarm.Task) Cause {
	c := Cause{Service: service, Task: t.ID, State: string(t.Status.State), Err: t.Status.Err, Message: t.Status.Message}
	if cs := t.Status.ContainerStatus; cs != nil {
		c.ExitCode, c.container = cs.ExitCode, cs.ContainerID
	}
	if t.Spec.ContainerSpec != nil {
		c.image = t.Spec.ContainerSpec.Image
	}
	lower := strings.ToLower(t.Status.Err)
	switch {
	case t.Status.State == dswarm.TaskStatePending:
		c.Kind = CausePlacement
	case strings.Contains(lower, "unhealthy container"):
		c.Kind = CauseUnhealthy
	case t.Status.State == dswarm.TaskStateRejected && (strings.Contains(lower, "image") || strings.Contains(lower, "manifest") || strings.Contains(lower, "pull")):
		c.Kind = CauseImagePull
	case t.Status.State == dswarm.TaskStateRejected:
		c.Kind = CauseRejected
	default:
		c.Kind = CauseExit
	}
	return c
}

// explain completes c with what the Engine and the registry tell beyond
// the snapshot: the task's log tail (masked with rel's sensitive values
// and secrets), an OOM kill, and, for an image not pulled, whether its
// registry itself fails (a cause other applications share). Each look-up
// that fails leaves its part out.
func explain(ctx context.Context, env Env, rel stack.Release, c Cause) Cause {
	if !c.Known() || c.Task == "" {
		return c
	}
	// Exit code 137 is SIGKILL: the kernel's OOM killer, or a stop that
	// timed out. Only the container's record tells them apart, and only
	// the node running it keeps one (here: the manager answering).
	if c.Kind == CauseExit && c.ExitCode == 137 && c.container != "" {
		if info, err := env.Engine.ContainerInspect(ctx, c.container); err == nil && info.State != nil && info.State.OOMKilled {
			c.Kind = CauseOOM
		}
	}
	if c.Kind != CauseImagePull && c.Kind != CausePlacement {
		c.Logs = taskLogTail(ctx, env.Engine, c.Task)
	}
	if c.Kind == CauseImagePull && env.Images != nil {
		c.Shared = failingRegistry(ctx, env.Images, c.image)
	}
	return maskCause(c, rel)
}

// failingRegistry names image's registry when asking it for image fails
// (unreachable, 5xx), "" when the registry answers: a tag it does not
// have is the application's own fault, not one it shares.
func failingRegistry(ctx context.Context, images artifact.Images, image string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return ""
	}
	tag := "latest"
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	}
	if images.Check(ctx, reference.TrimNamed(named).String(), tag).Condition != artifact.Failed {
		return ""
	}
	return "registry " + reference.Domain(named)
}

// taskLogTail reads the last causeLogLines lines of a task's output,
// stdout and stderr together, at most causeLogBytes of them.
func taskLogTail(ctx context.Context, reader CauseReader, task string) string {
	ctx, cancel := context.WithTimeout(ctx, causeLogTimeout)
	defer cancel()
	rc, err := reader.TaskLogs(ctx, task, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(causeLogLines)})
	if err != nil {
		return ""
	}
	defer rc.Close()
	return hook.LogTail(rc, causeLogBytes)
}

// maskCause masks, in every text of c, the values decrypted from SOPS
// files and the data of the release's secrets: a task that prints its
// secret must not put it in an event.
func maskCause(c Cause, rel stack.Release) Cause {
	values := slices.Clone(rel.Sensitive)
	for _, s := range rel.Secrets {
		if v := string(s.Data); strings.TrimSpace(v) != "" {
			values = append(values, v, strings.TrimSpace(v))
		}
	}
	if len(values) == 0 {
		return c
	}
	m := sops.NewMasker(values)
	c.Err, c.Message, c.Logs = m.Mask(c.Err), m.Mask(c.Message), m.Mask(c.Logs)
	return c
}

// rolloutError is a rollout that failed after the write, with its cause:
// what a release rollback starts from (see stepRollback).
type rolloutError struct {
	cause Cause
	err   error // classed
	// preempted: a newer commit ended the wait; nothing is rolled back.
	preempted bool
}

func (e *rolloutError) Error() string {
	if !e.cause.Known() {
		return e.err.Error()
	}
	msg := e.err.Error() + "; cause: " + e.cause.String()
	if strings.Contains(strings.TrimSpace(e.cause.Logs), "\n") {
		msg += "\nlog tail:\n" + e.cause.Logs
	}
	return msg
}

func (e *rolloutError) Unwrap() error { return e.err }

// causeOf returns the cause err carries, the zero Cause when none.
func causeOf(err error) Cause {
	var r *rolloutError
	if errors.As(err, &r) {
		return r.cause
	}
	return Cause{}
}

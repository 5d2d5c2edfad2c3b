// Package hook runs a release's hooks: services marked in compose as
// pre-sync or post-sync (stack.Hook), each run once per sync as a Swarm
// job whose exit code is the verdict.
//
// A run is a new service named "<release>_<service>-<7 hex of the
// commit>-<n>", carrying the owner's labels with stack.LabelKind
// stack.KindHook, so drift and release prune leave it alone and only this
// package removes it: after each run, the finished jobs of that hook beyond
// the newest Options.Keep, and every finished job when the release itself
// is pruned (RemoveFinished), each proved the owner's first.
//
// It never writes to a service of the release, and never removes a job it
// cannot prove the owner's. Run blocks until the job ends, its timeout
// passes or ctx ends; a job that outlives its timeout is removed, so it
// stops. Run makes no concurrent calls on the Engine; the caller runs one
// hook of a release at a time.
package hook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/skep-cd/skep/stack"
)

const (
	// DefaultTimeout bounds a run whose hook gives no timeout.
	DefaultTimeout = 5 * time.Minute
	// DefaultKeep is how many finished jobs of each hook are kept when
	// Options.Keep is zero.
	DefaultKeep = 3
	// TailLines and TailBytes bound the log tail a Result and a
	// FailedError carry: the last lines, then the last bytes of those.
	TailLines = 20
	TailBytes = 2048
)

// pollEvery is how often a running job's task is looked at.
const pollEvery = 500 * time.Millisecond

// maxServiceName is Swarm's limit on a service name.
const maxServiceName = 63

// Engine is the part of the Docker Engine API a run uses. *swarm.Client
// satisfies it.
type Engine interface {
	ServiceCreate(ctx context.Context, service swarm.ServiceSpec, options swarm.ServiceCreateOptions) (swarm.ServiceCreateResponse, error)
	ServiceList(ctx context.Context, options swarm.ServiceListOptions) ([]swarm.Service, error)
	ServiceRemove(ctx context.Context, serviceID string) error
	TaskList(ctx context.Context, options swarm.TaskListOptions) ([]swarm.Task, error)
	ServiceLogs(ctx context.Context, serviceID string, options container.LogsOptions) (io.ReadCloser, error)
	SecretList(ctx context.Context, options swarm.SecretListOptions) ([]swarm.Secret, error)
	ConfigList(ctx context.Context, options swarm.ConfigListOptions) ([]swarm.Config, error)
}

// Options are the inputs of one Run besides the hook. Owner is required
// (an owner without a controller id runs nothing); the zero value of every
// other field means its default.
type Options struct {
	Owner stack.Owner
	// Commit is the commit being synced; its first 7 digits name the job.
	Commit string
	// Keep is how many finished jobs of the hook stay; 0 means DefaultKeep.
	Keep   int
	Logger *slog.Logger
}

// Result is one finished run.
type Result struct {
	// Job is the name of the job's service.
	Job      string
	ExitCode int
	// Logs is the tail of the job's output (TailLines, TailBytes).
	Logs string
}

// FailedError is a hook whose job did not complete: it exited non-zero,
// was refused by Swarm or outlived its timeout.
type FailedError struct {
	Phase   stack.HookPhase
	Service string // the hook's compose name
	Job     string
	// Reason says how it failed ("exit code 1", "timed out after 5m0s").
	Reason string
	Logs   string
}

func (e *FailedError) Error() string {
	msg := fmt.Sprintf("%s hook %s (job %s): %s", e.Phase, e.Service, e.Job, e.Reason)
	if e.Logs != "" {
		msg += "; log tail:\n" + e.Logs
	}
	return msg
}

// Run runs h once as a new job and waits for it. It returns the result of a
// job that completed, a *FailedError for one that did not, or another
// error when the Engine could not be asked (the job may not have run).
// Either way it then removes the hook's finished jobs beyond opts.Keep.
func Run(ctx context.Context, eng Engine, h stack.Hook, opts Options) (Result, error) {
	if opts.Owner.Controller == "" {
		return Result{}, errors.New("run hook: no controller id in the owner")
	}
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	jobs, err := jobsOf(ctx, eng, opts.Owner, h.Service)
	if err != nil {
		return Result{}, err
	}
	spec := h.Spec
	spec.Name = jobName(h.Spec.Name, opts.Commit, jobs)
	spec.Labels = opts.Owner.Labels()
	for k, v := range h.Spec.Labels {
		spec.Labels[k] = v
	}
	spec.Labels[stack.LabelKind], spec.Labels[stack.LabelHook] = stack.KindHook, h.Service
	if opts.Commit != "" {
		spec.Labels[stack.LabelCommit] = opts.Commit
	}
	if err := resolveReferences(ctx, eng, &spec); err != nil {
		return Result{}, fmt.Errorf("job of hook %s: %w", h.Service, err)
	}
	created, err := eng.ServiceCreate(ctx, spec, swarm.ServiceCreateOptions{})
	if err != nil {
		return Result{}, fmt.Errorf("create job %s of hook %s: %w", spec.Name, h.Service, err)
	}
	opts.Logger.Info("hook started", "service", h.Service, "job", spec.Name, "phase", h.Phase)
	res, err := wait(ctx, eng, h, created.ID, spec.Name, timeout)
	// Whatever became of the run, its older jobs go; the cleanup must
	// outlive a cancelled sync.
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var failed *FailedError
	if errors.As(err, &failed) && strings.HasPrefix(failed.Reason, "timed out") {
		// A job past its timeout still runs: removing it stops it.
		if rmErr := eng.ServiceRemove(cleanup, created.ID); rmErr != nil {
			opts.Logger.Warn("hook job not removed", "job", spec.Name, "err", rmErr)
		}
	}
	prune(cleanup, eng, opts, h.Service, created.ID)
	return res, err
}

// resolveReferences sets the ids of the secrets and configs spec names:
// the release carries names only, and the Engine wants ids. The release's
// own objects exist by now (apply writes them before any hook runs).
func resolveReferences(ctx context.Context, eng Engine, spec *swarm.ServiceSpec) error {
	cs := spec.TaskTemplate.ContainerSpec
	if cs == nil {
		return nil
	}
	// The spec is the release's: copy what is about to change.
	cs = ptr(*cs)
	spec.TaskTemplate.ContainerSpec = cs
	cs.Secrets = slices.Clone(cs.Secrets)
	for i, r := range cs.Secrets {
		if r == nil || r.SecretID != "" {
			continue
		}
		list, err := eng.SecretList(ctx, swarm.SecretListOptions{Filters: filters.NewArgs(filters.Arg("name", r.SecretName))})
		if err != nil {
			return fmt.Errorf("list secret %q: %w", r.SecretName, err)
		}
		at := slices.IndexFunc(list, func(s swarm.Secret) bool { return s.Spec.Name == r.SecretName })
		if at < 0 {
			return fmt.Errorf("secret %q is not in the swarm", r.SecretName)
		}
		ref := *r
		ref.SecretID = list[at].ID
		cs.Secrets[i] = &ref
	}
	cs.Configs = slices.Clone(cs.Configs)
	for i, r := range cs.Configs {
		if r == nil || r.ConfigID != "" {
			continue
		}
		list, err := eng.ConfigList(ctx, swarm.ConfigListOptions{Filters: filters.NewArgs(filters.Arg("name", r.ConfigName))})
		if err != nil {
			return fmt.Errorf("list config %q: %w", r.ConfigName, err)
		}
		at := slices.IndexFunc(list, func(c swarm.Config) bool { return c.Spec.Name == r.ConfigName })
		if at < 0 {
			return fmt.Errorf("config %q is not in the swarm", r.ConfigName)
		}
		ref := *r
		ref.ConfigID = list[at].ID
		cs.Configs[i] = &ref
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// wait polls the job's task until it ends or timeout passes, then reads the
// tail of its logs.
func wait(ctx context.Context, eng Engine, h stack.Hook, id, job string, timeout time.Duration) (Result, error) {
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	res := Result{Job: job}
	fail := func(reason string) error {
		return &FailedError{Phase: h.Phase, Service: h.Service, Job: job, Reason: reason, Logs: res.Logs}
	}
	for {
		task, err := lastTask(runCtx, eng, id)
		if err != nil && runCtx.Err() == nil {
			return res, fmt.Errorf("read the task of job %s: %w", job, err)
		}
		if task != nil && ended(task.Status.State) {
			res.Logs = tail(ctx, eng, id)
			if cs := task.Status.ContainerStatus; cs != nil {
				res.ExitCode = cs.ExitCode
			}
			if task.Status.State == swarm.TaskStateComplete {
				return res, nil
			}
			reason := "exit code " + strconv.Itoa(res.ExitCode)
			if res.ExitCode == 0 {
				reason = fmt.Sprintf("task %s: %s", task.Status.State, task.Status.Err)
			}
			return res, fail(reason)
		}
		select {
		case <-runCtx.Done():
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			res.Logs = tail(ctx, eng, id)
			return res, fail("timed out after " + timeout.String())
		case <-tick.C:
		}
	}
}

// ended reports whether a task in state s will not run again: the job has
// one task and its restart policy is none.
func ended(s swarm.TaskState) bool {
	switch s {
	case swarm.TaskStateComplete, swarm.TaskStateFailed, swarm.TaskStateRejected,
		swarm.TaskStateShutdown, swarm.TaskStateOrphaned, swarm.TaskStateRemove:
		return true
	}
	return false
}

// lastTask returns the newest task of the job; nil before Swarm made one.
func lastTask(ctx context.Context, eng Engine, id string) (*swarm.Task, error) {
	tasks, err := eng.TaskList(ctx, swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", id))})
	if err != nil || len(tasks) == 0 {
		return nil, err
	}
	newest := slices.MaxFunc(tasks, func(a, b swarm.Task) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return &newest, nil
}

// tail reads the last TailLines lines of the job's output, stdout and
// stderr together, and keeps at most their last TailBytes. A job whose logs
// cannot be read has an empty tail: the verdict is its exit code.
func tail(ctx context.Context, eng Engine, id string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rc, err := eng.ServiceLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(TailLines)})
	if err != nil {
		return ""
	}
	defer rc.Close()
	return LogTail(rc, TailBytes)
}

// LogTail reads a log stream as the Engine sends it (stdout and stderr
// multiplexed, or one plain stream from a TTY) and returns its text, at
// most its last maxBytes; it reads a bounded amount, since a tail of a
// few lines may still be long lines. The caller closes r.
func LogTail(r io.Reader, maxBytes int) string {
	raw, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, bytes.NewReader(raw)); err != nil {
		out.Reset()
		out.Write(raw) // a job with a TTY writes one plain stream
	}
	text := strings.TrimRight(strings.ToValidUTF8(out.String(), "?"), "\n")
	if len(text) > maxBytes {
		text = "…" + strings.ToValidUTF8(text[len(text)-maxBytes:], "")
	}
	return text
}

// jobsOf lists the jobs of the hook service that carry owner's labels.
func jobsOf(ctx context.Context, eng Engine, owner stack.Owner, service string) ([]swarm.Service, error) {
	list, err := eng.ServiceList(ctx, swarm.ServiceListOptions{Filters: filters.NewArgs(
		filters.Arg("label", stack.LabelKind+"="+stack.KindHook),
		filters.Arg("label", stack.LabelRelease+"="+owner.Release),
		filters.Arg("label", stack.LabelHook+"="+service),
	)})
	if err != nil {
		return nil, fmt.Errorf("list jobs of hook %s: %w", service, err)
	}
	var out []swarm.Service
	for _, s := range list {
		if owner.Owns(s.Spec.Labels) && s.Spec.Labels[stack.LabelHook] == service {
			out = append(out, s)
		}
	}
	return out, nil
}

// jobName names a new run of the hook whose spec is named base: base, the
// short commit and the next number after those of jobs with that prefix.
func jobName(base, commit string, jobs []swarm.Service) string {
	prefix := jobPrefix(base, commit)
	n := 1
	for _, j := range jobs {
		if rest, ok := strings.CutPrefix(j.Spec.Name, prefix); ok {
			if k, err := strconv.Atoi(rest); err == nil && k >= n {
				n = k + 1
			}
		}
	}
	return prefix + strconv.Itoa(n)
}

// jobPrefix is "<base>-<7 hex of commit>-", base cut so that a number of
// up to 3 digits still fits Swarm's limit on names.
func jobPrefix(base, commit string) string {
	short := commit[:min(len(commit), 7)]
	if short == "" {
		short = "none"
	}
	suffix := "-" + short + "-"
	if room := maxServiceName - len(suffix) - 3; len(base) > room {
		base = strings.TrimRight(base[:room], "-_.")
	}
	return base + suffix
}

// prune removes the hook's jobs beyond the newest opts.Keep, never the one
// just run (keep), each proved the owner's. Failures are logged: a job left
// behind is removed after a later run.
func prune(ctx context.Context, eng Engine, opts Options, service, keep string) {
	jobs, err := jobsOf(ctx, eng, opts.Owner, service)
	if err != nil {
		opts.Logger.Warn("hook jobs not listed", "service", service, "err", err)
		return
	}
	slices.SortFunc(jobs, func(a, b swarm.Service) int { return b.CreatedAt.Compare(a.CreatedAt) })
	for i, j := range jobs {
		if i < opts.Keep || j.ID == keep || !opts.Owner.Owns(j.Spec.Labels) {
			continue
		}
		if err := eng.ServiceRemove(ctx, j.ID); err != nil {
			opts.Logger.Warn("hook job not removed", "job", j.Spec.Name, "err", err)
			continue
		}
		opts.Logger.Info("hook job removed", "job", j.Spec.Name)
	}
}

// RemoveFinished removes every finished job of every hook of owner's
// release, each proved the owner's, and returns how many jobs are left
// running (kept: a job is never cut short by the prune of its release).
// The caller calls it when the release itself is pruned, so that no job
// outlives its application.
func RemoveFinished(ctx context.Context, eng Engine, owner stack.Owner, logger *slog.Logger) (running int, err error) {
	list, err := eng.ServiceList(ctx, swarm.ServiceListOptions{Status: true, Filters: filters.NewArgs(
		filters.Arg("label", stack.LabelKind+"="+stack.KindHook),
		filters.Arg("label", stack.LabelRelease+"="+owner.Release),
	)})
	if err != nil {
		return 0, fmt.Errorf("list hook jobs of release %s: %w", owner.Release, err)
	}
	var errs []error
	for _, j := range list {
		if !owner.Owns(j.Spec.Labels) || j.Spec.Labels[stack.LabelKind] != stack.KindHook {
			continue
		}
		if j.ServiceStatus != nil && j.ServiceStatus.RunningTasks > 0 {
			running++
			continue
		}
		if err := eng.ServiceRemove(ctx, j.ID); err != nil {
			errs = append(errs, fmt.Errorf("remove hook job %s: %w", j.Spec.Name, err))
			continue
		}
		logger.Info("hook job removed", "job", j.Spec.Name, "why", "its release was pruned")
	}
	return running, errors.Join(errs...)
}

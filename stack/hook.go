package stack

import (
	"time"

	"github.com/docker/docker/api/types/swarm"
)

// HookPhase says when a hook runs. The zero value is not a phase.
type HookPhase string

const (
	// PreSync hooks run before the apply; one that fails stops the sync
	// before anything is written.
	PreSync HookPhase = "pre-sync"
	// PostSync hooks run after the apply (and the wait for health, when
	// the policy waits); one that fails fails the sync.
	PostSync HookPhase = "post-sync"
	// Analysis hooks run only as a canary's job metric asks: each run is
	// one measurement, its exit code the result.
	Analysis HookPhase = "analysis"
)

// Hook is a service of the release that runs as a Swarm job at a phase of
// each sync instead of as a service.
type Hook struct {
	// Service is the compose name of the service.
	Service string
	Phase   HookPhase
	// Timeout bounds one run; 0 means the hook runner's default.
	Timeout time.Duration
	// Spec is the job as converted, named "<release>_<service>": a
	// replicated job of one completion whose task is never restarted, so
	// its one exit code is the hook's verdict. The runner names each run.
	Spec swarm.ServiceSpec
}

// jobSpec turns a converted service into the job of a hook: one task, run
// once, not restarted, with no published ports or update policy (a job has
// none to roll).
func jobSpec(spec swarm.ServiceSpec, service string) swarm.ServiceSpec {
	one := uint64(1)
	spec.Mode = swarm.ServiceMode{ReplicatedJob: &swarm.ReplicatedJob{MaxConcurrent: &one, TotalCompletions: &one}}
	spec.UpdateConfig, spec.RollbackConfig = nil, nil
	restart := swarm.RestartPolicy{}
	if spec.TaskTemplate.RestartPolicy != nil {
		restart = *spec.TaskTemplate.RestartPolicy
	}
	restart.Condition = swarm.RestartPolicyConditionNone
	spec.TaskTemplate.RestartPolicy = &restart
	// Swarm refuses published ports on a job; a hook serves nothing.
	if spec.EndpointSpec != nil {
		spec.EndpointSpec.Ports = nil
	}
	spec.Labels[LabelKind] = KindHook
	spec.Labels[LabelHook] = service
	return spec
}

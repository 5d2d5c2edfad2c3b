package stack

import "github.com/docker/docker/api/types/swarm"

// EngineDefaults fills in what the Engine (20.10 and later) stores for the
// fields a service spec leaves empty, and clears what it never keeps, so a
// desired spec compares equal to its live copy. spec must be the caller's
// private copy: its pointers are written through.
func EngineDefaults(spec *swarm.ServiceSpec) {
	tt := &spec.TaskTemplate
	tt.ForceUpdate = 0
	if tt.ContainerSpec != nil {
		if tt.ContainerSpec.Isolation == "" {
			tt.ContainerSpec.Isolation = "default"
		}
		if tt.Runtime == "" {
			tt.Runtime = swarm.RuntimeContainer
		}
	}
	// An unset MaxAttempts or Window of a restart policy is stored as 0,
	// which means the same: no limit, no window; an unset condition is
	// stored as "any" (a restart_policy giving only a delay).
	if rp := tt.RestartPolicy; rp != nil {
		if rp.Condition == "" {
			rp.Condition = swarm.RestartPolicyConditionAny
		}
		if rp.MaxAttempts != nil && *rp.MaxAttempts == 0 {
			rp.MaxAttempts = nil
		}
		if rp.Window != nil && *rp.Window == 0 {
			rp.Window = nil
		}
	}
	m := &spec.Mode
	if m.Replicated == nil && m.Global == nil && m.ReplicatedJob == nil && m.GlobalJob == nil {
		m.Replicated = &swarm.ReplicatedService{}
	}
	if m.Replicated != nil && m.Replicated.Replicas == nil {
		one := uint64(1)
		m.Replicated.Replicas = &one
	}
	for _, u := range []*swarm.UpdateConfig{spec.UpdateConfig, spec.RollbackConfig} {
		if u == nil {
			continue
		}
		if u.FailureAction == "" {
			u.FailureAction = swarm.UpdateFailureActionPause
		}
		if u.Order == "" {
			u.Order = swarm.UpdateOrderStopFirst
		}
	}
	if e := spec.EndpointSpec; e != nil {
		if e.Mode == "" {
			e.Mode = swarm.ResolutionModeVIP
		}
		for i := range e.Ports {
			if e.Ports[i].Protocol == "" {
				e.Ports[i].Protocol = swarm.PortConfigProtocolTCP
			}
			if e.Ports[i].PublishMode == "" {
				e.Ports[i].PublishMode = swarm.PortConfigPublishModeIngress
			}
		}
	}
}

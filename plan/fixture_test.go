package plan

import (
	"time"

	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/stack"
)

const (
	settingsV1 = "web_settings-3f2a9c01be"
	settingsV2 = "web_settings-9b1c44d0e7"
	dbPassword = "web_db_password-7c1e55aa02"
	secretText = "hunter2-plaintext"
)

var owner = stack.Owner{Controller: "default", Application: "web", Release: "web"}

// webRelease returns a fresh release "web" with one object of each kind; no
// two calls share a map, slice or pointer.
func webRelease() stack.Release {
	replicas := uint64(2)
	grace := 10 * time.Second
	return stack.Release{
		Name: "web",
		Networks: map[string]network.CreateOptions{
			"web_default": {Driver: "overlay", Scope: "swarm", Labels: owner.Labels()},
		},
		Configs: map[string]swarm.ConfigSpec{
			settingsV1: {
				Annotations: swarm.Annotations{Name: settingsV1, Labels: owner.Labels()},
				Data:        []byte("debug = false\n"),
			},
		},
		Secrets: map[string]swarm.SecretSpec{
			dbPassword: {
				Annotations: swarm.Annotations{Name: dbPassword, Labels: owner.Labels()},
				Data:        []byte(secretText),
			},
		},
		Services: map[string]swarm.ServiceSpec{
			"web_app": {
				Annotations: swarm.Annotations{Name: "web_app", Labels: owner.Labels()},
				TaskTemplate: swarm.TaskSpec{
					ContainerSpec: &swarm.ContainerSpec{
						Image:           "app:v1",
						Labels:          map[string]string{stack.LabelNamespace: "web"},
						Env:             []string{"FOO=1", "BAR=2", "MODE=prod"},
						StopGracePeriod: &grace,
						Mounts: []mount.Mount{
							{Type: mount.TypeVolume, Source: "web_data", Target: "/data"},
						},
						Secrets: []*swarm.SecretReference{{
							File:       &swarm.SecretReferenceFileTarget{Name: "db_password", UID: "0", GID: "0", Mode: 0o444},
							SecretName: dbPassword,
						}},
						Configs: []*swarm.ConfigReference{{
							File:       &swarm.ConfigReferenceFileTarget{Name: "/etc/app/settings.toml", UID: "0", GID: "0", Mode: 0o444},
							ConfigName: settingsV1,
						}},
					},
					Placement: &swarm.Placement{Constraints: []string{"node.role==worker", "node.labels.zone==a"}},
					Networks:  []swarm.NetworkAttachmentConfig{{Target: "web_default", Aliases: []string{"app"}}},
				},
				Mode: swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &replicas}},
				EndpointSpec: &swarm.EndpointSpec{
					Mode: swarm.ResolutionModeDNSRR,
					Ports: []swarm.PortConfig{
						{Protocol: swarm.PortConfigProtocolTCP, TargetPort: 80, PublishedPort: 8080, PublishMode: swarm.PortConfigPublishModeHost},
						{Protocol: swarm.PortConfigProtocolTCP, TargetPort: 443, PublishedPort: 8443, PublishMode: swarm.PortConfigPublishModeHost},
					},
				},
			},
		},
	}
}

// edit returns a fresh webRelease changed by each fn.
func edit(fns ...func(*stack.Release)) stack.Release {
	r := webRelease()
	for _, fn := range fns {
		fn(&r)
	}
	return r
}

// recorded is edit, for the recorded side.
func recorded(fns ...func(*stack.Release)) *stack.Release {
	r := edit(fns...)
	return &r
}

// app edits the service web_app.
func app(fn func(*swarm.ServiceSpec)) func(*stack.Release) {
	return func(r *stack.Release) {
		s := r.Services["web_app"]
		fn(&s)
		r.Services["web_app"] = s
	}
}

// rotateSettings moves the config to new content under a new name.
func rotateSettings(r *stack.Release) {
	spec := r.Configs[settingsV1]
	delete(r.Configs, settingsV1)
	spec.Name = settingsV2
	spec.Data = []byte("debug = true\n")
	r.Configs[settingsV2] = spec
	app(func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Configs[0].ConfigName = settingsV2 })(r)
}

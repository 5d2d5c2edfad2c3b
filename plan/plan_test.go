package plan

import (
	"testing"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/stack"
)

const imagePath = "TaskTemplate.ContainerSpec.Image"

func TestCompare(t *testing.T) {
	tests := []struct {
		name     string
		desired  stack.Release
		recorded *stack.Release
		want     Release
	}{
		{
			name:     "install creates every object when nothing is recorded",
			desired:  webRelease(),
			recorded: nil,
			want: Release{Name: "web", Action: Install, Reason: "never deployed", Changes: []Change{
				{Kind: KindNetwork, Name: "web_default", Op: Create, Reason: "new in git"},
				{Kind: KindConfig, Name: settingsV1, Op: Create, Reason: "new in git"},
				{Kind: KindSecret, Name: dbPassword, Op: Create, Reason: "new in git"},
				{Kind: KindService, Name: "web_app", Op: Create, Reason: "new in git"},
			}},
		},
		{
			name:     "unchanged when the recorded revision is equal",
			desired:  webRelease(),
			recorded: recorded(),
			want:     Release{Name: "web", Action: Unchanged, Reason: "matches the recorded revision", Changes: []Change{}},
		},
		{
			name:     "upgrade when the image changes",
			desired:  edit(app(func(s *swarm.ServiceSpec) { s.TaskTemplate.ContainerSpec.Image = "app:v2" })),
			recorded: recorded(),
			want: Release{Name: "web", Action: Upgrade, Reason: "image changed", Changes: []Change{
				{Kind: KindService, Name: "web_app", Op: Update, Reason: "image changed", Fields: []FieldDiff{
					{Path: imagePath, Old: `"app:v1"`, New: `"app:v2"`},
				}},
			}},
		},
		{
			name: "upgrade when replicas change",
			desired: edit(app(func(s *swarm.ServiceSpec) {
				n := uint64(5)
				s.Mode.Replicated.Replicas = &n
			})),
			recorded: recorded(),
			want: Release{Name: "web", Action: Upgrade, Reason: "replicas changed", Changes: []Change{
				{Kind: KindService, Name: "web_app", Op: Update, Reason: "replicas changed", Fields: []FieldDiff{
					{Path: "Mode.Replicated.Replicas", Old: "2", New: "5"},
				}},
			}},
		},
		{
			name: "scaling to zero replicas is a change, not an absent field",
			desired: edit(app(func(s *swarm.ServiceSpec) {
				n := uint64(0)
				s.Mode.Replicated.Replicas = &n
			})),
			recorded: recorded(),
			want: Release{Name: "web", Action: Upgrade, Reason: "replicas changed", Changes: []Change{
				{Kind: KindService, Name: "web_app", Op: Update, Reason: "replicas changed", Fields: []FieldDiff{
					{Path: "Mode.Replicated.Replicas", Old: "2", New: "0"},
				}},
			}},
		},
		{
			name: "env is compared by key: added, removed and modified",
			desired: edit(app(func(s *swarm.ServiceSpec) {
				s.TaskTemplate.ContainerSpec.Env = []string{"NEW=x", "MODE=dev", "FOO=1"}
			})),
			recorded: recorded(),
			want: Release{Name: "web", Action: Upgrade, Reason: "env changed", Changes: []Change{
				{Kind: KindService, Name: "web_app", Op: Update, Reason: "env changed", Fields: []FieldDiff{
					{Path: `TaskTemplate.ContainerSpec.Env["BAR"]`, Old: `"2"`, Removed: true},
					{Path: `TaskTemplate.ContainerSpec.Env["MODE"]`, Old: `"prod"`, New: `"dev"`},
					{Path: `TaskTemplate.ContainerSpec.Env["NEW"]`, New: `"x"`, Added: true},
				}},
			}},
		},
		{
			name: "label change is reported by key",
			desired: edit(app(func(s *swarm.ServiceSpec) {
				s.Labels["team"] = "payments"
				s.Labels[stack.LabelApplication] = "web2"
			})),
			recorded: recorded(),
			want: Release{Name: "web", Action: Upgrade, Reason: "labels changed", Changes: []Change{
				{Kind: KindService, Name: "web_app", Op: Update, Reason: "labels changed", Fields: []FieldDiff{
					{Path: `Labels["io.skep.application"]`, Old: `"web"`, New: `"web2"`},
					{Path: `Labels["team"]`, New: `"payments"`, Added: true},
				}},
			}},
		},
		{
			name: "a removed port is one field keyed by target and protocol",
			desired: edit(app(func(s *swarm.ServiceSpec) {
				s.EndpointSpec.Ports = s.EndpointSpec.Ports[1:]
			})),
			recorded: recorded(),
			want: Release{Name: "web", Action: Upgrade, Reason: "ports changed", Changes: []Change{
				{Kind: KindService, Name: "web_app", Op: Update, Reason: "ports changed", Fields: []FieldDiff{
					{
						Path:    `EndpointSpec.Ports["80/tcp"]`,
						Old:     `{Protocol: "tcp", TargetPort: 80, PublishedPort: 8080, PublishMode: "host"}`,
						Removed: true,
					},
				}},
			}},
		},
		{
			name:     "a rotated config is a create and a delete, and the service follows",
			desired:  edit(rotateSettings),
			recorded: recorded(),
			want: Release{Name: "web", Action: Upgrade, Reason: "configs changed", Changes: []Change{
				{Kind: KindConfig, Name: settingsV1, Op: Delete, Reason: "no longer declared"},
				{Kind: KindConfig, Name: settingsV2, Op: Create, Reason: "new in git"},
				{Kind: KindService, Name: "web_app", Op: Update, Reason: "configs changed", Fields: []FieldDiff{
					{
						Path: `TaskTemplate.ContainerSpec.Configs["/etc/app/settings.toml"].ConfigName`,
						Old:  `"` + settingsV1 + `"`, New: `"` + settingsV2 + `"`,
					},
				}},
			}},
		},
		{
			name:     "a service no longer declared is reported as delete",
			desired:  edit(func(r *stack.Release) { delete(r.Services, "web_app") }),
			recorded: recorded(),
			want: Release{Name: "web", Action: Upgrade, Reason: "1 object no longer declared", Changes: []Change{
				{Kind: KindService, Name: "web_app", Op: Delete, Reason: "no longer declared"},
			}},
		},
		{
			name: "a new network and service on an installed release is an upgrade with creates",
			desired: edit(func(r *stack.Release) {
				r.Networks["web_back"] = network.CreateOptions{Driver: "overlay"}
				r.Services["web_worker"] = swarm.ServiceSpec{Annotations: swarm.Annotations{Name: "web_worker"}}
			}),
			recorded: recorded(),
			want: Release{Name: "web", Action: Upgrade, Reason: "2 objects created", Changes: []Change{
				{Kind: KindNetwork, Name: "web_back", Op: Create, Reason: "new in git"},
				{Kind: KindService, Name: "web_worker", Op: Create, Reason: "new in git"},
			}},
		},
		{
			name: "replicated to global mode shows both sides",
			desired: edit(app(func(s *swarm.ServiceSpec) {
				s.Mode = swarm.ServiceMode{Global: &swarm.GlobalService{}}
			})),
			recorded: recorded(),
			want: Release{Name: "web", Action: Upgrade, Reason: "mode changed", Changes: []Change{
				{Kind: KindService, Name: "web_app", Op: Update, Reason: "mode changed", Fields: []FieldDiff{
					{Path: "Mode.Replicated", Old: "{Replicas: 2}", Removed: true},
					{Path: "Mode.Global", New: "{}", Added: true},
				}},
			}},
		},
		{
			name: "changed secret data under the same name shows digests only",
			desired: edit(func(r *stack.Release) {
				s := r.Secrets[dbPassword]
				s.Data = []byte("another-plaintext")
				r.Secrets[dbPassword] = s
			}),
			recorded: recorded(),
			want: Release{Name: "web", Action: Upgrade, Reason: "secret data changed", Changes: []Change{
				{Kind: KindSecret, Name: dbPassword, Op: Update, Reason: "data changed", Fields: []FieldDiff{
					{Path: "Data", Old: digest([]byte(secretText)), New: digest([]byte("another-plaintext"))},
				}},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compare(tt.desired, tt.recorded, Options{})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Compare() mismatch (-want +got):\n%s", diff)
			}
			if got.Changed() != (got.Action != Unchanged) {
				t.Errorf("Changed() = %v with action %s", got.Changed(), got.Action)
			}
		})
	}
}

// TestCompareIgnoresNormalisedDifferences pins the representations that must
// not count as changes.
func TestCompareIgnoresNormalisedDifferences(t *testing.T) {
	tests := []struct {
		name     string
		recorded *stack.Release
	}{
		{
			name: "nil and empty maps and slices are equal",
			recorded: recorded(
				func(r *stack.Release) {
					n := r.Networks["web_default"]
					n.Options = map[string]string{}
					r.Networks["web_default"] = n
				},
				app(func(s *swarm.ServiceSpec) {
					c := s.TaskTemplate.ContainerSpec
					c.Command, c.Args, c.Hosts = []string{}, []string{}, []string{}
					c.Sysctls = map[string]string{}
					c.Healthcheck = nil
					s.TaskTemplate.Resources = &swarm.ResourceRequirements{}
					s.UpdateConfig = &swarm.UpdateConfig{}
				})),
		},
		{
			name: "env order is irrelevant",
			recorded: recorded(app(func(s *swarm.ServiceSpec) {
				s.TaskTemplate.ContainerSpec.Env = []string{"MODE=prod", "FOO=1", "BAR=2"}
			})),
		},
		{
			name: "constraint and alias order is irrelevant",
			recorded: recorded(app(func(s *swarm.ServiceSpec) {
				s.TaskTemplate.Placement.Constraints = []string{"node.labels.zone==a", "node.role==worker"}
				s.TaskTemplate.Networks[0].Aliases = []string{"app"}
			})),
		},
		{
			name: "port order is irrelevant",
			recorded: recorded(app(func(s *swarm.ServiceSpec) {
				p := s.EndpointSpec.Ports
				s.EndpointSpec.Ports = []swarm.PortConfig{p[1], p[0]}
			})),
		},
		{
			name: "secret and config ids resolved at apply time are ignored",
			recorded: recorded(app(func(s *swarm.ServiceSpec) {
				s.TaskTemplate.ContainerSpec.Secrets[0].SecretID = "k2b3x9"
				s.TaskTemplate.ContainerSpec.Configs[0].ConfigID = "p8q7r6"
			})),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compare(webRelease(), tt.recorded, Options{})
			if got.Action != Unchanged || got.Changed() {
				t.Errorf("Compare() = %s with changes %+v, want unchanged", got.Action, got.Changes)
			}
		})
	}
}

func TestCompareOrderIsDeterministic(t *testing.T) {
	desired := edit(rotateSettings, func(r *stack.Release) {
		for _, n := range []string{"web_z", "web_a", "web_m"} {
			r.Services[n] = swarm.ServiceSpec{Annotations: swarm.Annotations{Name: n}}
			r.Networks[n] = network.CreateOptions{Driver: "overlay"}
			r.Secrets[n] = swarm.SecretSpec{Annotations: swarm.Annotations{Name: n}}
		}
	})
	first := Compare(desired, recorded(), Options{})
	var order []string
	for _, c := range first.Changes {
		order = append(order, string(c.Kind)+" "+c.Name)
	}
	want := []string{
		"network web_a", "network web_m", "network web_z",
		"config " + settingsV1, "config " + settingsV2,
		"secret web_a", "secret web_m", "secret web_z",
		"service web_a", "service web_app", "service web_m", "service web_z",
	}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Fatalf("change order (-want +got):\n%s", diff)
	}
	for range 50 {
		if diff := cmp.Diff(first, Compare(desired, recorded(), Options{})); diff != "" {
			t.Fatalf("Compare() differs between runs (-first +again):\n%s", diff)
		}
	}
}

func TestSummarySaysWhatWouldChange(t *testing.T) {
	tests := []struct {
		name    string
		desired stack.Release
		record  *stack.Release
		want    string
	}{
		{
			name:    "install counts created objects by kind",
			desired: webRelease(),
			want:    "install web: 1 network to create, 1 config to create, 1 secret to create, 1 service to create",
		},
		{
			name:    "unchanged says only that",
			desired: webRelease(),
			record:  recorded(),
			want:    "unchanged web",
		},
		{
			name: "upgrade lists updates with their areas first",
			desired: edit(rotateSettings, app(func(s *swarm.ServiceSpec) {
				s.TaskTemplate.ContainerSpec.Image = "app:v2"
			})),
			record: recorded(),
			want:   "upgrade web: 1 service to update (image and configs), 1 config to create, 1 config to delete",
		},
		{
			name: "plural kinds",
			desired: edit(func(r *stack.Release) {
				r.Services["web_a"] = swarm.ServiceSpec{}
				r.Services["web_b"] = swarm.ServiceSpec{}
			}),
			record: recorded(),
			want:   "upgrade web: 2 services to create",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Compare(tt.desired, tt.record, Options{}).Summary(); got != tt.want {
				t.Errorf("Summary() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestActionValid(t *testing.T) {
	for _, a := range []Action{Install, Upgrade, Unchanged} {
		if !a.Valid() {
			t.Errorf("%q.Valid() = false, want true", a)
		}
	}
	var zero Action
	if zero.Valid() {
		t.Error("zero Action is valid, want invalid")
	}
}

func TestReasonNamesChangedAreas(t *testing.T) {
	tests := []struct {
		name  string
		kind  Kind
		paths []string
		want  string
	}{
		{"one area", KindService, []string{imagePath}, "image changed"},
		{"env keys fold into one area", KindService, []string{`TaskTemplate.ContainerSpec.Env["A"]`, `TaskTemplate.ContainerSpec.Env["B"]`}, "env changed"},
		{"two areas", KindService, []string{imagePath, "Mode.Replicated.Replicas"}, "image and replicas changed"},
		{"unlisted container field in words", KindService, []string{"TaskTemplate.ContainerSpec.StopGracePeriod"}, "stop grace period changed"},
		{"unlisted task field in words", KindService, []string{"TaskTemplate.RestartPolicy.Condition"}, "restart policy changed"},
		{"top-level labels are not container labels", KindService, []string{`Labels["a"]`, `TaskTemplate.ContainerSpec.Labels["a"]`}, "labels and container labels changed"},
		{"prefix needs a path boundary", KindService, []string{"TaskTemplate.ContainerSpec.Imagery"}, "imagery changed"},
		{"more than three areas are counted", KindService, []string{imagePath, `TaskTemplate.ContainerSpec.Env["A"]`, "EndpointSpec.Ports[\"80/tcp\"]", "UpdateConfig.Parallelism", "TaskTemplate.ContainerSpec.TTY"}, "image, env, ports and 2 more changed"},
		{"network fields", KindNetwork, []string{"IPAM.Driver", "EnableIPv6", "Attachable"}, "ipam, ipv6 and attachable changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fields []FieldDiff
			for _, p := range tt.paths {
				fields = append(fields, FieldDiff{Path: p})
			}
			if got := changedReason(areas(tt.kind, fields)); got != tt.want {
				t.Errorf("reason for %q = %q, want %q", tt.paths, got, tt.want)
			}
		})
	}
}

package plan

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/stack"
)

func TestFieldsOfServices(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		edit func(*swarm.ServiceSpec)
		want []FieldDiff
	}{
		{
			name: "mount changed in place is keyed by target",
			edit: func(s *swarm.ServiceSpec) {
				s.TaskTemplate.ContainerSpec.Mounts[0].ReadOnly = true
			},
			want: []FieldDiff{{Path: `TaskTemplate.ContainerSpec.Mounts["/data"].ReadOnly`, New: "true", Added: true}},
		},
		{
			name: "mount added before another does not shift it",
			edit: func(s *swarm.ServiceSpec) {
				c := s.TaskTemplate.ContainerSpec
				c.Mounts = append([]mount.Mount{{Type: mount.TypeBind, Source: "/srv/cache", Target: "/cache"}}, c.Mounts...)
			},
			want: []FieldDiff{{
				Path: `TaskTemplate.ContainerSpec.Mounts["/cache"]`, Added: true,
				New: `{Type: "bind", Source: "/srv/cache", Target: "/cache"}`,
			}},
		},
		{
			name: "secret reference keyed by target file name",
			edit: func(s *swarm.ServiceSpec) {
				s.TaskTemplate.ContainerSpec.Secrets[0].File.Mode = 0o400
			},
			want: []FieldDiff{{Path: `TaskTemplate.ContainerSpec.Secrets["db_password"].File.Mode`, Old: "0444", New: "0400"}},
		},
		{
			name: "network attachment keyed by target",
			edit: func(s *swarm.ServiceSpec) {
				s.TaskTemplate.Networks = append(s.TaskTemplate.Networks, swarm.NetworkAttachmentConfig{Target: "proxy"})
			},
			want: []FieldDiff{{Path: `TaskTemplate.Networks["proxy"]`, New: `{Target: "proxy"}`, Added: true}},
		},
		{
			name: "published port change is one leaf under its target",
			edit: func(s *swarm.ServiceSpec) {
				s.EndpointSpec.Ports[1].PublishedPort = 9443
			},
			want: []FieldDiff{{Path: `EndpointSpec.Ports["443/tcp"].PublishedPort`, Old: "8443", New: "9443"}},
		},
		{
			name: "same target published twice keeps both ports",
			edit: func(s *swarm.ServiceSpec) {
				p := s.EndpointSpec.Ports
				s.EndpointSpec.Ports = append(p, swarm.PortConfig{Protocol: "tcp", TargetPort: 80, PublishedPort: 8081, PublishMode: "host"})
			},
			want: []FieldDiff{{
				Path: `EndpointSpec.Ports["80/tcp#2"]`, Added: true,
				New: `{Protocol: "tcp", TargetPort: 80, PublishedPort: 8081, PublishMode: "host"}`,
			}},
		},
		{
			name: "command order matters and the list is one leaf",
			edit: func(s *swarm.ServiceSpec) {
				s.TaskTemplate.ContainerSpec.Command = []string{"serve", "--port", "80"}
			},
			want: []FieldDiff{{Path: "TaskTemplate.ContainerSpec.Command", New: `["serve", "--port", "80"]`, Added: true}},
		},
		{
			name: "added constraint shows the whole set",
			edit: func(s *swarm.ServiceSpec) {
				p := s.TaskTemplate.Placement
				p.Constraints = append(p.Constraints, "node.labels.ssd==true")
			},
			want: []FieldDiff{{
				Path: "TaskTemplate.Placement.Constraints",
				Old:  `["node.labels.zone==a", "node.role==worker"]`,
				New:  `["node.labels.ssd==true", "node.labels.zone==a", "node.role==worker"]`,
			}},
		},
		{
			name: "durations read as durations",
			edit: func(s *swarm.ServiceSpec) {
				g := 90 * time.Second
				s.TaskTemplate.ContainerSpec.StopGracePeriod = &g
			},
			want: []FieldDiff{{Path: "TaskTemplate.ContainerSpec.StopGracePeriod", Old: "10s", New: "1m30s"}},
		},
		{
			name: "a healthcheck added is one leaf rendered whole",
			edit: func(s *swarm.ServiceSpec) {
				s.TaskTemplate.ContainerSpec.Healthcheck = &container.HealthConfig{
					Test: []string{"CMD", "/app", "health"}, Interval: 5 * time.Second, Retries: 3,
				}
			},
			want: []FieldDiff{{
				Path: "TaskTemplate.ContainerSpec.Healthcheck", Added: true,
				New: `{Test: ["CMD", "/app", "health"], Interval: 5s, Retries: 3}`,
			}},
		},
		{
			name: "an explicit false differs from unset",
			edit: func(s *swarm.ServiceSpec) {
				f := false
				s.TaskTemplate.ContainerSpec.Init = &f
			},
			want: []FieldDiff{{Path: "TaskTemplate.ContainerSpec.Init", New: "false", Added: true}},
		},
		{
			name: "ulimits keyed by name",
			edit: func(s *swarm.ServiceSpec) {
				s.TaskTemplate.ContainerSpec.Ulimits = []*container.Ulimit{{Name: "nofile", Soft: 1024, Hard: 4096}}
			},
			want: []FieldDiff{{Path: `TaskTemplate.ContainerSpec.Ulimits["nofile"]`, New: `{Name: "nofile", Hard: 4096, Soft: 1024}`, Added: true}},
		},
		{
			name: "an empty label value is present",
			edit: func(s *swarm.ServiceSpec) {
				s.Labels["flag"] = ""
			},
			want: []FieldDiff{{Path: `Labels["flag"]`, New: `""`, Added: true}},
		},
		{
			name: "env values masked on request, keys kept",
			opts: Options{MaskEnv: true},
			edit: func(s *swarm.ServiceSpec) {
				s.TaskTemplate.ContainerSpec.Env = []string{"FOO=changed", "BAR=2", "TOKEN=s3cr3t"}
			},
			want: []FieldDiff{
				{Path: `TaskTemplate.ContainerSpec.Env["FOO"]`, Old: "***", New: "***"},
				{Path: `TaskTemplate.ContainerSpec.Env["MODE"]`, Old: "***", Removed: true},
				{Path: `TaskTemplate.ContainerSpec.Env["TOKEN"]`, New: "***", Added: true},
			},
		},
		{
			name: "env entry without a value is distinct from an empty value",
			edit: func(s *swarm.ServiceSpec) {
				s.TaskTemplate.ContainerSpec.Env = []string{"FOO", "BAR=", "MODE=prod"}
			},
			want: []FieldDiff{
				{Path: `TaskTemplate.ContainerSpec.Env["BAR"]`, Old: `"2"`, New: `""`},
				{Path: `TaskTemplate.ContainerSpec.Env["FOO"]`, Old: `"1"`, New: "(no value)"},
			},
		},
		{
			name: "a duplicated env key keeps its last value",
			edit: func(s *swarm.ServiceSpec) {
				s.TaskTemplate.ContainerSpec.Env = []string{"FOO=0", "BAR=2", "MODE=prod", "FOO=1"}
			},
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := webRelease().Services["web_app"]
			desired := webRelease().Services["web_app"]
			tt.edit(&desired)
			got := Fields(old, desired, tt.opts)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Fields() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMaskEnvHoldsWhenAWholeContainerSpecIsRendered(t *testing.T) {
	old := webRelease().Services["web_app"]
	desired := webRelease().Services["web_app"]
	desired.TaskTemplate.ContainerSpec = nil
	got := Fields(old, desired, Options{MaskEnv: true})
	if len(got) != 1 || got[0].Path != "TaskTemplate.ContainerSpec" || !got[0].Removed {
		t.Fatalf("Fields() = %+v, want one removed TaskTemplate.ContainerSpec", got)
	}
	if strings.Contains(got[0].Old, "prod") || !strings.Contains(got[0].Old, `"MODE=***"`) {
		t.Errorf("removed container spec renders env unmasked: %s", got[0].Old)
	}
}

func TestFieldsOfNetworksAndConfigs(t *testing.T) {
	yes := true
	old := network.CreateOptions{Driver: "overlay", Options: map[string]string{"encrypted": ""}}
	desired := network.CreateOptions{
		Driver: "overlay", Attachable: true, EnableIPv6: &yes,
		IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: "10.8.0.0/24"}}},
	}
	want := []FieldDiff{
		{Path: "EnableIPv6", New: "true", Added: true},
		{Path: "IPAM", New: `{Config: [{Subnet: "10.8.0.0/24"}]}`, Added: true},
		{Path: "Attachable", New: "true", Added: true},
		{Path: `Options["encrypted"]`, Old: `""`, Removed: true},
	}
	if diff := cmp.Diff(want, Fields(old, desired, Options{})); diff != "" {
		t.Errorf("Fields(network) mismatch (-want +got):\n%s", diff)
	}

	cfgOld := swarm.ConfigSpec{Annotations: swarm.Annotations{Name: "c"}, Data: []byte("a")}
	cfgNew := swarm.ConfigSpec{Annotations: swarm.Annotations{Name: "c"}, Data: []byte("b")}
	wantCfg := []FieldDiff{{Path: "Data", Old: digest([]byte("a")), New: digest([]byte("b"))}}
	if diff := cmp.Diff(wantCfg, Fields(cfgOld, cfgNew, Options{})); diff != "" {
		t.Errorf("Fields(config) mismatch (-want +got):\n%s", diff)
	}
}

func TestFieldsFlattensEmbeddedAnnotationsEvenWhenOneSideIsEmpty(t *testing.T) {
	old := swarm.SecretSpec{}
	desired := swarm.SecretSpec{Annotations: swarm.Annotations{Name: "s", Labels: map[string]string{"a": "1"}}}
	want := []FieldDiff{
		{Path: "Name", New: `"s"`, Added: true},
		{Path: `Labels["a"]`, New: `"1"`, Added: true},
	}
	if diff := cmp.Diff(want, Fields(old, desired, Options{})); diff != "" {
		t.Errorf("Fields() mismatch (-want +got):\n%s", diff)
	}
}

// TestSecretDataNeverShown covers every way a secret payload could leak: a
// changed payload, a rotation, an install, in the human diff and in JSON.
func TestSecretDataNeverShown(t *testing.T) {
	changed := edit(func(r *stack.Release) {
		s := r.Secrets[dbPassword]
		s.Data = []byte("rotated-" + secretText)
		r.Secrets[dbPassword] = s
	})
	plans := []Release{
		Compare(webRelease(), nil, Options{}),
		Compare(changed, recorded(), Options{}),
		Compare(webRelease(), &changed, Options{}),
	}
	var text bytes.Buffer
	if err := Render(&text, plans); err != nil {
		t.Fatalf("Render() error = %v", err)
	}
	js, err := json.Marshal(plans)
	if err != nil {
		t.Fatalf("json.Marshal() error = %v", err)
	}
	if !strings.Contains(text.String(), "sha256:") {
		t.Fatalf("rendered plan shows no digest, so the secret change is not visible:\n%s", text.String())
	}
	for _, out := range []string{text.String(), string(js)} {
		for _, secret := range []string{secretText, base64.StdEncoding.EncodeToString([]byte(secretText)), "rotated-"} {
			if strings.Contains(out, secret) {
				t.Errorf("plan output contains secret material %q:\n%s", secret, out)
			}
		}
	}
}

func TestDigestDetectsChangeBeyondShownPrefix(t *testing.T) {
	// Two payloads always differ in their full digest; the shown prefix is a
	// label, not the comparison.
	a := swarm.SecretSpec{Data: []byte("x")}
	b := swarm.SecretSpec{Data: []byte("y")}
	if got := Fields(a, b, Options{}); len(got) != 1 {
		t.Fatalf("Fields() = %+v, want one Data change", got)
	}
	if got := digest([]byte("x")); !strings.HasPrefix(got, "sha256:") || len(got) != len("sha256:")+12 {
		t.Errorf("digest() = %q, want sha256: and 12 hex digits", got)
	}
}

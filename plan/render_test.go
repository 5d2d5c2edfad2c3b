package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/golden"
	"github.com/skep-cd/skep/stack"
)

// checkGolden compares got with testdata/name, or rewrites it under -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}

func TestRenderGolden(t *testing.T) {
	upgrade := edit(rotateSettings, app(func(s *swarm.ServiceSpec) {
		s.TaskTemplate.ContainerSpec.Image = "app:v2"
		s.TaskTemplate.ContainerSpec.Env = []string{"FOO=1", "MODE=staging", "NEW=x"}
		s.EndpointSpec.Ports = s.EndpointSpec.Ports[1:]
	}), func(r *stack.Release) {
		r.Networks["web_back"] = network.CreateOptions{Driver: "overlay", Internal: true}
		s := r.Secrets[dbPassword]
		s.Data = []byte("rotated")
		r.Secrets[dbPassword] = s
	})
	tests := []struct {
		name  string
		plans []Release
	}{
		{name: "install", plans: []Release{Compare(webRelease(), nil, Options{})}},
		{name: "unchanged", plans: []Release{Compare(webRelease(), recorded(), Options{})}},
		{name: "upgrade", plans: []Release{Compare(upgrade, recorded(), Options{})}},
		{name: "upgrade_masked_env", plans: []Release{Compare(upgrade, recorded(), Options{MaskEnv: true})}},
		{name: "several_releases", plans: []Release{
			Compare(upgrade, recorded(), Options{}),
			Compare(webRelease(), recorded(), Options{}),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var text bytes.Buffer
			if err := Render(&text, tt.plans); err != nil {
				t.Fatalf("Render() error = %v", err)
			}
			checkGolden(t, tt.name+".txt", text.Bytes())

			js, err := json.MarshalIndent(tt.plans, "", "  ")
			if err != nil {
				t.Fatalf("json.MarshalIndent() error = %v", err)
			}
			checkGolden(t, tt.name+".json", append(js, '\n'))

			var back []Release
			if err := json.Unmarshal(js, &back); err != nil {
				t.Fatalf("json.Unmarshal() error = %v", err)
			}
			if diff := cmp.Diff(tt.plans, back); diff != "" {
				t.Errorf("JSON round trip changed the plan (-before +after):\n%s", diff)
			}
		})
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestRenderReportsWriteError(t *testing.T) {
	err := Render(failingWriter{}, []Release{Compare(webRelease(), nil, Options{})})
	if err == nil || err.Error() != "write plan: disk full" {
		t.Errorf("Render() error = %v, want write plan: disk full", err)
	}
}

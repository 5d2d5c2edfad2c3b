package stack

import (
	"strings"
	"testing"

	"github.com/docker/docker/api/types/swarm"
	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/sops"
)

func TestMaskedReleaseShowsNoSensitiveValueAndLeavesTheOriginal(t *testing.T) {
	secret := "s3cr3t-value"
	svc := swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: "app_web", Labels: map[string]string{"dsn": "pg://u:" + secret + "@db"}},
		TaskTemplate: swarm.TaskSpec{ContainerSpec: &swarm.ContainerSpec{
			Image: "web:1",
			Env:   []string{"TOKEN=" + secret, "PLAIN=x"},
			Args:  []string{"--token", secret},
		}},
	}
	rel := Release{
		Name:      "app",
		Services:  map[string]swarm.ServiceSpec{"app_web": svc},
		Secrets:   map[string]swarm.SecretSpec{"app_db": {Data: []byte(secret)}},
		Sensitive: []string{secret},
	}
	got := rel.Masked()
	c := got.Services["app_web"]
	m := sops.Mask(secret, []string{secret})
	want := []string{"TOKEN=" + m, "PLAIN=x"}
	if diff := cmp.Diff(want, c.TaskTemplate.ContainerSpec.Env); diff != "" {
		t.Errorf("masked env (-want +got):\n%s", diff)
	}
	if c.TaskTemplate.ContainerSpec.Args[1] != m || c.Labels["dsn"] != "pg://u:"+m+"@db" {
		t.Errorf("masked args %q, labels %q", c.TaskTemplate.ContainerSpec.Args, c.Labels)
	}
	if c.TaskTemplate.ContainerSpec.Image != "web:1" {
		t.Errorf("image changed to %q", c.TaskTemplate.ContainerSpec.Image)
	}
	// Secrets' payloads are digested by whoever records them, not here.
	if string(got.Secrets["app_db"].Data) != secret {
		t.Errorf("secret data = %q", got.Secrets["app_db"].Data)
	}
	orig := rel.Services["app_web"]
	if orig.TaskTemplate.ContainerSpec.Env[0] != "TOKEN="+secret || orig.Labels["dsn"] != "pg://u:"+secret+"@db" {
		t.Errorf("Masked changed the original: %v %v", orig.TaskTemplate.ContainerSpec.Env, orig.Labels)
	}
	if strings.Contains(cmp.Diff(nil, got.Services), secret) {
		t.Error("the masked services still hold the value")
	}
}

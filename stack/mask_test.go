package stack

import (
	"strings"
	"testing"

	composetypes "github.com/docker/cli/cli/compose/types"
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

func TestMaskedMasksByProvenanceNotByText(t *testing.T) {
	m := sops.MaskOf("1")
	doc := func(rev string) *composetypes.Config {
		return &composetypes.Config{Services: composetypes.Services{{
			Name:        "web",
			Image:       "nginx:1.27",
			Labels:      composetypes.Labels{"tier": "1", "build": "rev-" + rev},
			Environment: composetypes.MappingWithEquals{"REV": ptr(rev), "PLAIN": ptr("1")},
		}}}
	}
	opts := Options{Owner: Owner{Controller: "c1", Application: "app1", Release: "app1"}, Masked: doc(m)}
	rel, err := Convert(doc("1"), opts)
	if err != nil {
		t.Fatal(err)
	}
	rel.Sensitive = []string{"1"}
	spec := func(r Release) swarm.ServiceSpec { return r.Services["app1_web"] }

	got := spec(rel.Masked())
	c := got.TaskTemplate.ContainerSpec
	if d := cmp.Diff([]string{"PLAIN=1", "REV=" + m}, c.Env); d != "" {
		t.Errorf("masked env (-want +got):\n%s", d)
	}
	if c.Image != "nginx:1.27" || c.Labels["tier"] != "1" || c.Labels["build"] != "rev-"+m {
		t.Errorf("masked image %q, labels %q; want the image and tier as they are, build masked", c.Image, c.Labels)
	}
	if got.Labels[LabelRelease] != "app1" || got.Name != "app1_web" {
		t.Errorf("masked name %q, release label %q; want them as they are", got.Name, got.Labels[LabelRelease])
	}
	if again := spec(rel.Masked().Masked()); !cmp.Equal(again, got) {
		t.Errorf("masking twice differs:\n%s", cmp.Diff(got, again))
	}
	if env := spec(rel).TaskTemplate.ContainerSpec.Env; env[1] != "REV=1" {
		t.Errorf("Masked changed the original: %q", env)
	}

	// A field that came from the value and was changed since is masked
	// by text; one that did not come from it never is.
	changed := rel
	changed.Services = map[string]swarm.ServiceSpec{"app1_web": spec(rel)}
	s := changed.Services["app1_web"]
	s.TaskTemplate.ContainerSpec = ptr(*s.TaskTemplate.ContainerSpec)
	s.TaskTemplate.ContainerSpec.Labels = map[string]string{"tier": "1", "build": "rev-1b"}
	changed.Services["app1_web"] = s
	if l := spec(changed.Masked()).TaskTemplate.ContainerSpec.Labels; l["build"] != "rev-"+m+"b" || l["tier"] != "1" {
		t.Errorf("changed labels masked to %q", l)
	}

	// Without a masked document every occurrence is masked, as before.
	opts.Masked = nil
	plain, err := Convert(doc("1"), opts)
	if err != nil {
		t.Fatal(err)
	}
	plain.Sensitive = []string{"1"}
	if img := spec(plain.Masked()).TaskTemplate.ContainerSpec.Image; img != "nginx:"+m+".27" {
		t.Errorf("image without a masked document = %q, want every 1 masked", img)
	}
}

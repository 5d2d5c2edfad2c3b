package syncpass

import (
	"slices"
	"strings"
	"testing"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/stack"
)

// TestStandInsKeepTheRenderGoingAndAreNeverDeployed: an artifact without a
// version still gives the render its variables, and a release that took
// one of them anywhere names that artifact as waiting; one that took none
// names none.
func TestStandInsKeepTheRenderGoingAndAreNeverDeployed(t *testing.T) {
	objs := []artifact.Object{
		{Entry: artifact.Entry{Kind: artifact.Service, Name: "web", Image: "registry.example.org/team/web"},
			Desired: "v2", Condition: artifact.Waiting, Reason: "image registry.example.org/team/web:v2 is not in the registry yet"},
		{Entry: artifact.Entry{Kind: artifact.Service, Name: "web-api", Image: "registry.example.org/team/api"},
			Desired: "v1", Condition: artifact.Pushed},
	}
	vars := artifact.Variables(withStandIns(objs))
	for _, key := range []string{"WEB_IMAGE", "WEB_VERSION", "WEB_DIGEST", "WebVersion"} {
		if vars[key] == "" {
			t.Errorf("render variable %s is empty for an artifact without a version", key)
		}
	}
	if vars["WEB_API_IMAGE"] != "registry.example.org/team/api:v1" {
		t.Errorf("WEB_API_IMAGE = %q, want the artifact's own version", vars["WEB_API_IMAGE"])
	}
	service := func(image string, env ...string) stack.Release {
		return stack.Release{Name: "shop", Services: map[string]dswarm.ServiceSpec{"shop_web": {
			TaskTemplate: dswarm.TaskSpec{ContainerSpec: &dswarm.ContainerSpec{Image: image, Env: env}}}}}
	}
	cases := []struct {
		name string
		rel  stack.Release
		want []string
	}{
		{name: "the image variable", rel: service(vars["WEB_IMAGE"]), want: []string{"web"}},
		{name: "the version in an environment variable", rel: service("busybox", "VERSION="+vars["WEB_VERSION"]), want: []string{"web"}},
		{name: "the digest alone", rel: service("registry.example.org/team/web@" + vars["WEB_DIGEST"]), want: []string{"web"}},
		{name: "nothing of it", rel: service(vars["WEB_API_IMAGE"], "MODE=prod"), want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := usesStandIns(tc.rel, objs); !slices.Equal(got, tc.want) {
				t.Errorf("usesStandIns = %q, want %q", got, tc.want)
			}
		})
	}
	if got := noVersion(objs, []string{"web"}); !strings.Contains(got, "web v2 (image registry.example.org/team/web:v2 is not in the registry yet)") {
		t.Errorf("noVersion = %q, want it to name web v2 and its image", got)
	}
}

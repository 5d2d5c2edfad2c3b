package preview

import (
	"errors"
	"fmt"
	"testing"

	"github.com/docker/docker/api/types/swarm"
	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/stack"
)

func TestHashIsEightHexDigitsOfTheBranchsSHA256(t *testing.T) {
	// printf main | sha256sum
	if got := Hash("main"); got != "0d6e4079" {
		t.Errorf("Hash(main) = %q, want 0d6e4079", got)
	}
	if Hash("feature/a") == Hash("feature/b") {
		t.Error("different branches gave the same hash")
	}
	if got := Name("web", "feature/a"); got != "web-"+Hash("feature/a") {
		t.Errorf("Name = %q", got)
	}
}

func TestDomainFillsTheTemplateAndDropsEmptyParts(t *testing.T) {
	v := DomainVars{Hash: "1d0fd508", Artifact: "lite", Environment: "testing", BaseDomain: "example.org", Branch: "feat/x"}
	for _, tc := range []struct{ name, template, want string }{
		{"the default is hash, artifact, environment, base domain", "", "1d0fd508.lite.testing.example.org"},
		{"a custom template", "{branch}.{baseDomain}", "feat-x.example.org"},
	} {
		if got := Domain(tc.template, v); got != tc.want {
			t.Errorf("%s: Domain(%q) = %q, want %q", tc.name, tc.template, got, tc.want)
		}
	}
	v.BaseDomain = ""
	if got := Domain("", v); got != "1d0fd508.lite.testing" {
		t.Errorf("without a base domain: %q, want no trailing dot", got)
	}
}

func TestSelectChoosesBranchesByPatternAndBound(t *testing.T) {
	branches := map[string]string{"main": "c0", "develop": "c1", "feature/a": "c2", "feature/b": "c3", "dependabot/npm/x": "c4", "fix-1": "c5"}
	names := func(bs []Branch) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		sel       Selection
		want, out []string
	}{
		{"every branch but the excluded ones", Selection{Exclude: []string{"main"}}, []string{"develop", "feature/a", "feature/b", "fix-1"}, nil},
		{"an ignore pattern reaches into sub-paths", Selection{Exclude: []string{"main"}, Ignore: []string{"dependabot/*"}}, []string{"develop", "feature/a", "feature/b", "fix-1"}, nil},
		{"include patterns", Selection{Include: []string{"feature/*"}}, []string{"feature/a", "feature/b"}, nil},
		{"max keeps the first in name order and reports the rest", Selection{Include: []string{"feature/*", "fix-*"}, Max: 2}, []string{"feature/a", "feature/b"}, []string{"fix-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel := tc.sel
			if sel.Ignore == nil && tc.name == "every branch but the excluded ones" {
				sel.Ignore = []string{"dependabot/*"}
			}
			got, over, collisions := Select(branches, sel)
			if d := cmp.Diff(tc.want, names(got)); d != "" {
				t.Errorf("chosen (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.out, over); d != "" {
				t.Errorf("over the bound (-want +got):\n%s", d)
			}
			if len(collisions) != 0 {
				t.Errorf("collisions: %v", collisions)
			}
		})
	}
}

func TestSelectRefusesBothBranchesOfAHashCollision(t *testing.T) {
	seen := map[string]string{}
	var a, b string
	for i := 0; a == ""; i++ {
		name := fmt.Sprintf("b%d", i)
		if other, ok := seen[Hash(name)]; ok {
			a, b = other, name
		}
		seen[Hash(name)] = name
	}
	got, _, collisions := Select(map[string]string{a: "1", b: "2", "other": "3"}, Selection{})
	if len(got) != 1 || got[0].Name != "other" {
		t.Errorf("chosen = %+v, want only the branch without a collision", got)
	}
	var ce *CollisionError
	if len(collisions) != 1 || !errors.As(collisions[0], &ce) || ce.Hash != Hash(a) {
		t.Fatalf("collisions = %v, want one naming hash %s", collisions, Hash(a))
	}
	if msg := ce.Error(); msg == "" || ce.First == ce.Second {
		t.Errorf("collision message %q names %q and %q", msg, ce.First, ce.Second)
	}
}

func TestMakeCopiesTheReleaseSafelyBesideTheMainOne(t *testing.T) {
	three := uint64(3)
	rel := stack.Release{Name: "web-1d0fd508", Services: map[string]swarm.ServiceSpec{
		"web-1d0fd508_app": {
			Annotations: swarm.Annotations{Name: "web-1d0fd508_app", Labels: map[string]string{
				"traefik.enable":                                     "true",
				"traefik.http.routers.app.rule":                      "Host(`app.example.org`) && PathPrefix(`/`)",
				"traefik.http.routers.app.service":                   "app",
				"traefik.http.routers.app.middlewares":               "auth,compress@file",
				"traefik.http.middlewares.auth.basicauth.users":      "u:p",
				"traefik.http.services.app.loadbalancer.server.port": "8080",
				"caddy":               "app.example.org",
				"caddy.reverse_proxy": "{{upstreams 8080}}",
				"com.example.other":   "kept",
			}},
			Mode: swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &three}},
			TaskTemplate: swarm.TaskSpec{
				ContainerSpec: &swarm.ContainerSpec{Image: "web:v1"},
				Networks:      []swarm.NetworkAttachmentConfig{{Target: "web-1d0fd508_default", Aliases: []string{"app"}}},
			},
			EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR, Ports: []swarm.PortConfig{{TargetPort: 8080, PublishedPort: 8080, PublishMode: swarm.PortConfigPublishModeHost}}},
		},
	}}
	before := fmt.Sprintf("%+v", rel.Services["web-1d0fd508_app"].Labels)
	branch := Branch{Name: "feature/a", Commit: "c", Hash: "1d0fd508"}
	got := Make(rel, Options{Name: rel.Name, Branch: branch, Domain: "1d0fd508.app.testing.example.org"})
	s := got.Services["web-1d0fd508_app"]
	wantLabels := map[string]string{
		"traefik.enable":                                              "true",
		"traefik.http.routers.app-1d0fd508.rule":                      "Host(`1d0fd508.app.testing.example.org`) && PathPrefix(`/`)",
		"traefik.http.routers.app-1d0fd508.service":                   "app-1d0fd508",
		"traefik.http.routers.app-1d0fd508.middlewares":               "auth-1d0fd508,compress@file",
		"traefik.http.middlewares.auth-1d0fd508.basicauth.users":      "u:p",
		"traefik.http.services.app-1d0fd508.loadbalancer.server.port": "8080",
		"caddy":               "1d0fd508.app.testing.example.org",
		"caddy.reverse_proxy": "{{upstreams 8080}}",
		"com.example.other":   "kept",
		LabelBranch:           "feature/a",
		LabelHash:             "1d0fd508",
		LabelDomain:           "1d0fd508.app.testing.example.org",
	}
	if d := cmp.Diff(wantLabels, s.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	if r := s.Mode.Replicated.Replicas; r == nil || *r != 1 {
		t.Errorf("replicas = %v, want 1", r)
	}
	if len(s.EndpointSpec.Ports) != 0 || s.EndpointSpec.Mode != swarm.ResolutionModeDNSRR {
		t.Errorf("endpoint = %+v, want no published ports, dnsrr kept", s.EndpointSpec)
	}
	if a := s.TaskTemplate.Networks[0].Aliases; len(a) != 0 {
		t.Errorf("aliases = %v, want none", a)
	}
	if after := fmt.Sprintf("%+v", rel.Services["web-1d0fd508_app"].Labels); after != before || len(rel.Services["web-1d0fd508_app"].TaskTemplate.Networks[0].Aliases) != 1 || *three3(rel) != 3 {
		t.Error("Make modified its input")
	}

	shifted := Make(rel, Options{Name: rel.Name, Branch: branch, PortShift: 1000, Slot: 2}).Services["web-1d0fd508_app"]
	if p := shifted.EndpointSpec.Ports; len(p) != 1 || p[0].PublishedPort != 10080 || p[0].TargetPort != 8080 {
		t.Errorf("shifted ports = %+v, want 8080 published on 10080 (slot 2 × 1000)", p)
	}
}

func three3(rel stack.Release) *uint64 {
	return rel.Services["web-1d0fd508_app"].Mode.Replicated.Replicas
}

func TestSlotsAreStableAndReuseTheLowestFree(t *testing.T) {
	got := Slots([]string{"a", "b", "c"}, map[string]int{"b": 1, "gone": 2})
	want := map[string]int{"b": 1, "a": 2, "c": 3}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Slots (-want +got):\n%s", d)
	}
}

package appset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

func TestSelfApplicationIsOneOnTheLocalSwarm(t *testing.T) {
	const head = "apiVersion: skep/v1\napplications:\n"
	for _, tc := range []struct {
		name, apps string
		problems   []string
	}{
		{
			name: "a second self application is refused at its self, naming the first",
			apps: "  - {name: skep, source: {repo: /r}, self: true}\n  - {name: skep2, source: {repo: /r}, self: true}\n",
			problems: []string{
				"4:45 applications[1].self: only one application deploys the controller itself, and applications[0] at line 3 does already",
			},
		},
		{
			name: "a self application on another swarm is refused",
			apps: "  - {name: skep, source: {repo: /r}, self: true, destination: {swarm: prod}}\n",
			problems: []string{
				`3:44 applications[0].self: the controller runs in the local swarm, so the application that deploys it needs destination.swarm "", got "prod"`,
			},
		},
		{
			name: "one self application on the local swarm is valid",
			apps: "  - {name: skep, source: {repo: /r}, self: true}\n  - {name: web, source: {repo: /r}}\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("apps.yaml", []byte(head+tc.apps))
			if tc.problems == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if d := cmp.Diff(tc.problems, problemsOf(t, err)); d != "" {
				t.Errorf("problems (-want +got):\n%s", d)
			}
		})
	}
}

func TestSelfIsKeptAndMarshalledBack(t *testing.T) {
	set, err := Parse("apps.yaml", []byte("apiVersion: skep/v1\napplications:\n  - {name: skep, source: {repo: /r}, self: true}\n  - {name: web, source: {repo: /r}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	apps := set.Applications()
	if !apps[0].Self || apps[1].Self {
		t.Fatalf("self = %v, %v; want true, false", apps[0].Self, apps[1].Self)
	}
	out, err := yaml.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse("again.yaml", out)
	if err != nil {
		t.Fatalf("marshalled set does not parse: %v\n%s", err, out)
	}
	if !again.Applications()[0].Self {
		t.Errorf("self lost in marshalling:\n%s", out)
	}
}

func TestGeneratedApplicationCannotBeSelf(t *testing.T) {
	_, err := Parse("apps.yaml", []byte("apiVersion: skep/v1\napplications: []\ngenerators:\n  - name: stacks\n    repo: /r\n    directories: [\"stacks/*\"]\n    template: {self: true}\n"))
	want := []string{"7:22 generators[0].template.self: a generated application cannot be the controller itself; declare that application in applications"}
	if d := cmp.Diff(want, problemsOf(t, err)); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}
}

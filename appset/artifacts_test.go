package appset

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/configfile"
)

func TestArtifactsBlockDefaultsAndProblems(t *testing.T) {
	doc := func(artifacts string) string {
		return "apiVersion: skep/v1\napplications:\n  - name: web\n    source: {repo: /r}\n    artifacts:\n" + artifacts
	}
	for _, tc := range []struct {
		name, artifacts string
		problems        []string
	}{
		{"an environment alone is enough", "      environment: testing\n", nil},
		{"the environment is required", "      path: releases\n", []string{"applications[0].artifacts.environment: missing"}},
		{"a tag template needs the commit", "      environment: testing\n      tagTemplate: latest\n", []string{"applications[0].artifacts.tagTemplate: want {commit} or {short}"}},
		{"a tag template knows its placeholders", "      environment: testing\n      tagTemplate: \"{commit}-{sha}\"\n", []string{"applications[0].artifacts.tagTemplate: unknown placeholder {sha}"}},
		{"a preview domain must differ per preview", "      environment: testing\n      previews: {domain: \"{artifact}.example.org\"}\n", []string{"applications[0].artifacts.previews.domain: want {hash} or {branch}"}},
		{"preview replicas are bounded", "      environment: testing\n      previews: {replicas: 0}\n", []string{"applications[0].artifacts.previews.replicas: want 1 to 100, got 0"}},
		{"preview port shifts are bounded", "      environment: testing\n      previews: {portShift: -1}\n", []string{"applications[0].artifacts.previews.portShift: want 0"}},
		{"a preview ttl is a duration", "      environment: testing\n      previews: {ttl: often}\n", []string{"applications[0].artifacts.previews.ttl: want a duration"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("apps.yaml", []byte(doc(tc.artifacts)))
			var problems configfile.Problems
			if len(tc.problems) == 0 {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if !errors.As(err, &problems) || len(problems) != len(tc.problems) {
				t.Fatalf("Parse = %v, want %d problems", err, len(tc.problems))
			}
			for i, want := range tc.problems {
				if got := problems[i].Field + ": " + problems[i].Message; !strings.HasPrefix(got, want) {
					t.Errorf("problem %d = %q, want it to start with %q", i, got, want)
				}
			}
		})
	}
}

func TestArtifactsDefaultsAreFilledAndRoundTrip(t *testing.T) {
	set, err := Parse("apps.yaml", []byte("apiVersion: skep/v1\napplications:\n  - name: web\n    artifacts:\n      environment: testing\n      previews: {baseDomain: example.org, ttl: 48h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := set.Lookup("web")
	want := &Artifacts{Revision: DefaultRevision, Path: ".", Environment: "testing", CheckImages: true,
		Previews: Previews{Environments: []string{"testing"}, BaseDomain: "example.org", Replicas: 1, Max: 10, TTL: 48 * time.Hour}}
	if d := cmp.Diff(want, a.Artifacts); d != "" {
		t.Errorf("artifacts (-want +got):\n%s", d)
	}
	if a.Source.Repo != "" {
		t.Errorf("source.repo = %q, want empty (the infrastructure artifact may name it)", a.Source.Repo)
	}
}

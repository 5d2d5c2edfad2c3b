package chart

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/configfile"
)

// published is a requirements.yaml in the layout published Swarm charts
// use, without template actions.
const published = `networks:
  - name: traefik-public
    driver: overlay
    attachable: true
    autoCreate: true
    description: "Overlay network shared with Traefik"
secrets: []
configs: []
`

func TestRequirementsAcceptTheShortAndThePublishedForm(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		want Requirements
		// problems, when set, are Load's problems instead.
		problems []string
	}{
		{
			name: "names alone are required, never created",
			file: "networks: [traefik-public]\nconfigs: [ca-bundle]\nsecrets: [tls-cert]\n",
			want: Requirements{Networks: []NetworkRequirement{{Name: "traefik-public"}},
				Configs: []ObjectRequirement{{Name: "ca-bundle"}}, Secrets: []ObjectRequirement{{Name: "tls-cert"}}},
		},
		{
			name: "the published mapping form keeps every key",
			file: published,
			want: Requirements{Networks: []NetworkRequirement{{Name: "traefik-public", Driver: "overlay", Attachable: true, AutoCreate: true,
				Description: "Overlay network shared with Traefik"}}, Secrets: []ObjectRequirement{}, Configs: []ObjectRequirement{}},
		},
		{
			name: "a mapping defaults to an attachable overlay created when missing, as published",
			file: "networks:\n  - name: shared\nsecrets:\n  - name: db-password\n    description: Postgres password\n",
			want: Requirements{Networks: []NetworkRequirement{{Name: "shared", Driver: "overlay", Attachable: true, AutoCreate: true}},
				Secrets: []ObjectRequirement{{Name: "db-password", Description: "Postgres password"}}},
		},
		{
			name: "autoCreate and attachable false are kept",
			file: "networks:\n  - name: ingress-edge\n    autoCreate: false\n    attachable: false\n    driver: weaveworks/net-plugin\n",
			want: Requirements{Networks: []NetworkRequirement{{Name: "ingress-edge", Driver: "weaveworks/net-plugin"}}},
		},
		{
			name: "both forms mix in one list",
			file: "networks:\n  - monitoring\n  - name: traefik-public\n    description: edge\n",
			want: Requirements{Networks: []NetworkRequirement{{Name: "monitoring"},
				{Name: "traefik-public", Driver: "overlay", Attachable: true, AutoCreate: true, Description: "edge"}}},
		},
		{
			name: "an unknown key names file, line and field",
			file: "networks:\n  - name: traefik-public\n    labels: {team: edge}\nsecrets:\n  - name: tls\n    file: ./tls.pem\n",
			problems: []string{
				"c/requirements.yaml:3:5: networks[0].labels: unknown key; want one of name, driver, attachable, autoCreate, description",
				"c/requirements.yaml:6:5: secrets[0].file: unknown key; want one of name, description",
			},
		},
		{
			name: "a misspelt autoCreate is an unknown key, not a silent default",
			file: "networks:\n  - name: traefik-public\n    autocreate: false\n",
			problems: []string{
				"c/requirements.yaml:3:5: networks[0].autocreate: unknown key; want one of name, driver, attachable, autoCreate, description",
			},
		},
		{
			name: "entries without a name, twice listed or of the wrong type are each reported",
			file: "networks:\n  - driver: overlay\n  - a\n  - a\nconfigs:\n  - [x]\nsecrets:\n  - 3\n  - name: s\n    autoCreate: yes\n",
			problems: []string{
				"c/requirements.yaml:2:5: networks[0].name: required: the object's real name on the swarm",
				`c/requirements.yaml:4:5: networks[2].name: "a" is listed twice; first as networks[1]`,
				"c/requirements.yaml:6:5: configs[0]: want a mapping, got a list",
				`c/requirements.yaml:8:5: secrets[0]: want a name or a mapping with name, got "3"`,
				"c/requirements.yaml:10:5: secrets[1].autoCreate: unknown key; want one of name, description",
			},
		},
		{
			name:     "a template that does not parse names its line",
			file:     "networks:\n  - name: \"{{ .Values.net \"\n",
			problems: []string{`c/requirements.yaml:2: unterminated quoted string`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(minimal(map[string]string{"c/requirements.yaml": tc.file}), "c")
			if tc.problems != nil {
				if diff := cmp.Diff(tc.problems, problemStrings(err)); diff != "" {
					t.Errorf("Load() problems (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() = %v", err)
			}
			got, err := c.Requirements(t.Context(), RenderOptions{})
			if err != nil {
				t.Fatalf("Requirements() = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Requirements() (-want +got):\n%s", diff)
			}
		})
	}
}

// edge-whoami is written in the published layout: a templated
// requirements.yaml whose names follow the values, with a range over a
// user-supplied list, and ci values files.
func TestTemplatedRequirementsFollowTheReleaseValues(t *testing.T) {
	c := load(t, "edge-whoami")
	ci := map[string]ValuesFile{}
	for _, f := range c.CIValues() {
		ci[f.Name] = f
	}
	edge := NetworkRequirement{Name: "traefik-public", Driver: "overlay", Attachable: true, AutoCreate: true, Description: "Overlay network shared with Traefik"}
	metrics := NetworkRequirement{Name: "metrics", Driver: "overlay", Attachable: true, Description: "Overlay the metrics stack scrapes on; provided by its operator"}
	auth := []ObjectRequirement{{Name: "whoami_basic_auth", Description: "htpasswd line for the basic-auth middleware"}}
	for _, tc := range []struct {
		name string
		opts RenderOptions
		want Requirements
	}{
		{"the defaults", RenderOptions{ValuesFiles: []ValuesFile{ci["ci/default-values.yaml"]}},
			Requirements{Networks: []NetworkRequirement{edge, metrics}, Secrets: auth, Configs: []ObjectRequirement{}}},
		{"a range over extra networks adds entries", RenderOptions{ValuesFiles: []ValuesFile{ci["ci/extra-network-values.yaml"]}},
			Requirements{Networks: []NetworkRequirement{edge, metrics,
				{Name: "backoffice", Driver: "overlay", Attachable: true, Description: "Extra overlay for this release"}}, Secrets: auth, Configs: []ObjectRequirement{}}},
		{"a renamed network follows --set", RenderOptions{Set: map[string]string{"traefik.network": "edge"}},
			Requirements{Networks: []NetworkRequirement{{Name: "edge", Driver: "overlay", Attachable: true, AutoCreate: true, Description: edge.Description}, metrics},
				Secrets: auth, Configs: []ObjectRequirement{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Requirements(t.Context(), tc.opts)
			if err != nil {
				t.Fatalf("Requirements() = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Requirements() (-want +got):\n%s", diff)
			}
			if _, _, err := Render(t.Context(), c, tc.opts); err != nil {
				t.Errorf("Render() = %v", err)
			}
		})
	}
}

func TestTemplatedRequirementsReportTheRenderedProblem(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"an empty name from a missing value is required", "networks:\n  - name: \"{{ .Values.nope }}\"\n",
			[]string{"c/requirements.yaml:2:11: networks[0].name: required: the object's real name on the swarm"}},
		{"an unknown key is reported on the rendered line", "# {{ .Release.Name }}\nsecrets:\n  - name: s\n    value: hunter\n",
			[]string{"c/requirements.yaml:4:5: secrets[0].value: unknown key; want one of name, description"}},
		{"a failing function names the template line", "networks:\n  - name: {{ required \"traefik.network is required\" .Values.x }}\n",
			[]string{`c/requirements.yaml:2:13: executing "requirements.yaml" at <required "traefik.network is required" .Values.x>: error calling required: traefik.network is required`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(minimal(map[string]string{"c/requirements.yaml": tc.file}), "c")
			if err != nil {
				t.Fatalf("Load() = %v; a templated file is decoded at render", err)
			}
			_, err = c.Requirements(t.Context(), RenderOptions{ReleaseName: "r"})
			if diff := cmp.Diff(tc.want, problemStrings(err)); diff != "" {
				t.Errorf("Requirements() problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckCreatesOnlyAllowedAutoCreateNetworks(t *testing.T) {
	req := Requirements{
		Networks: []NetworkRequirement{
			{Name: "edge", Driver: "overlay", AutoCreate: true, Description: "shared with Traefik"},
			{Name: "metrics", Driver: "overlay", Description: "provided by the metrics stack"},
			{Name: "forbidden", Driver: "overlay", AutoCreate: true},
		},
		Secrets: []ObjectRequirement{{Name: "db", Description: "Postgres password"}},
	}
	allowed := Objects{Networks: []string{"edge", "metrics"}, Secrets: []string{"db"}}
	for _, tc := range []struct {
		name       string
		existing   Objects
		wantCreate []string
		wantErr    string
	}{
		{"an absent allowed autoCreate network is created; the others are unmet with their descriptions",
			Objects{}, []string{"edge"},
			"chart c: 3 requirement(s) of requirements.yaml not met:\n" +
				"  network \"metrics\" (provided by the metrics stack) does not exist on the swarm (create it with docker network create)\n" +
				"  network \"forbidden\" is not in the application's allow list and does not exist on the swarm (create it with docker network create)\n" +
				"  secret \"db\" (Postgres password) does not exist on the swarm (create it with docker secret create)"},
		{"a present network is never created again", Objects{Networks: []string{"edge", "metrics", "forbidden"}, Secrets: []string{"db"}}, nil,
			"chart c: 1 requirement(s) of requirements.yaml not met:\n  network \"forbidden\" is not in the application's allow list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			create, err := Check("c", req, allowed, tc.existing)
			var names []string
			for _, n := range create {
				names = append(names, n.Name)
			}
			if diff := cmp.Diff(tc.wantCreate, names); diff != "" {
				t.Errorf("Check() create (-want +got):\n%s", diff)
			}
			var ue *UnmetError
			if !errors.As(err, &ue) || err.Error() != tc.wantErr {
				t.Errorf("Check() = %v, want *UnmetError %q", err, tc.wantErr)
			}
		})
	}
}

func TestEntriesShowDescriptions(t *testing.T) {
	r := Requirements{Networks: []NetworkRequirement{{Name: "edge", AutoCreate: true, Description: "shared with Traefik"}, {Name: "metrics"}},
		Secrets: []ObjectRequirement{{Name: "db", Description: "Postgres password"}}}
	var got []string
	for _, e := range r.Entries() {
		got = append(got, e.String())
	}
	want := []string{"network edge (created when missing): shared with Traefik", "network metrics", "secret db: Postgres password"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Entries() (-want +got):\n%s", diff)
	}
}

// FuzzRequirements decodes arbitrary bytes as a requirements.yaml.
// Property: decoding never panics and returns problems or requirements in
// which every entry has a name and every mapping-form network a driver.
func FuzzRequirements(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "*", "requirements.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	if len(seeds) < 2 {
		f.Fatalf("found %d seed requirements files, want at least 2", len(seeds))
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		if len(data) == 0 {
			f.Fatalf("seed %s is empty", s)
		}
		f.Add(data)
	}
	f.Add([]byte(published))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, problems := decodeRequirements("requirements.yaml", data)
		if len(problems) > 0 {
			var ps configfile.Problems
			if !errors.As(problems, &ps) {
				t.Fatalf("problems %T are not configfile.Problems", problems)
			}
			return
		}
		for _, e := range r.Entries() {
			if e.Name == "" {
				t.Fatalf("entry %+v has no name and no problem was reported", e)
			}
		}
		for _, n := range r.Networks {
			if n.AutoCreate && n.Driver == "" {
				t.Fatalf("network %q is created but has no driver", n.Name)
			}
		}
	})
}

// Charts of the published Swarm layout declare the floor of the tool they
// were written for; Skep carries it for display and is not bound by it.
func TestChartYAMLOfThePublishedLayoutLoads(t *testing.T) {
	c, err := Load(minimal(map[string]string{"c/Chart.yaml": "name: c\ndescription: d\nversion: 0.1.0\nappVersion: \"v1\"\nswarmcliVersion: \">= 1.11.0\"\n",
		"c/requirements.yaml": published}), "c")
	if err != nil {
		t.Fatalf("Load() = %v", err)
	}
	if got := c.Metadata().SwarmcliVersion; got != ">= 1.11.0" {
		t.Errorf("Metadata().SwarmcliVersion = %q, want it carried", got)
	}
}

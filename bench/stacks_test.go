package bench

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestComposeSetsEachPartsHealthcheck(t *testing.T) {
	type service struct {
		Environment map[string]string `yaml:"environment"`
		Healthcheck map[string]any    `yaml:"healthcheck"`
	}
	for name, tc := range map[string]struct {
		a    app
		want map[string]any // the healthcheck of every service; nil: the image's own
	}{
		"image's own": {app{services: []string{"web", "worker"}, replicas: 1}, nil},
		"off":         {app{services: []string{"web", "worker"}, noHealthcheck: true}, map[string]any{"disable": true}},
		"calm": {app{services: []string{"web", "worker"}, replicas: 1, calmHealthcheck: true},
			map[string]any{"interval": "30s", "timeout": "10s", "retries": 3}},
	} {
		t.Run(name, func(t *testing.T) {
			var doc struct {
				Services map[string]service `yaml:"services"`
			}
			if err := yaml.Unmarshal([]byte(compose(tc.a, "img:v1", 3)), &doc); err != nil {
				t.Fatalf("compose is not YAML: %v", err)
			}
			if len(doc.Services) != 2 {
				t.Fatalf("services %v, want web and worker", doc.Services)
			}
			for name, s := range doc.Services {
				if len(s.Healthcheck) != len(tc.want) {
					t.Errorf("%s: healthcheck %v, want %v", name, s.Healthcheck, tc.want)
				}
				for k, v := range tc.want {
					if s.Healthcheck[k] != v {
						t.Errorf("%s: healthcheck %s = %v, want %v", name, k, s.Healthcheck[k], v)
					}
				}
			}
			if rev := doc.Services["web"].Environment["BENCH_REV"]; rev != "3" {
				t.Errorf("web's BENCH_REV = %q, want the revision 3", rev)
			}
		})
	}
}

package render

import (
	"context"
	"strings"
	"testing"
)

func TestComposeReadsACanaryStrategyAndRefusesBadOnesAtTheirLine(t *testing.T) {
	const web = "services:\n  web:\n    image: web\n    deploy: {replicas: 4}\n"
	for _, tc := range []struct {
		name    string
		compose string
		weights []int
		wantErr []string
	}{
		{name: "services without the key have no canary", compose: web},
		{name: "a strategy of every kind of step, with a job metric on an analysis hook",
			compose: web + "    x-skep-canary:\n      steps:\n        - setWeight: 25\n        - pause: 10s\n        - analysis:\n            metrics:\n              - {name: smoke, job: smoke}\n        - setWeight: ${HALF}\n" +
				"  smoke:\n    image: web\n    x-skep-hook: analysis\n",
			weights: []int{25, 50}},
		{name: "each problem at its own line",
			compose: web + "    x-skep-canary:\n      steps:\n        - setWeight: 150\n        - pause: never\n",
			wantErr: []string{
				"compose.yaml:7: services.web.x-skep-canary.steps[0].setWeight: want a percentage from 0 to 100, got 150",
				`compose.yaml:8: services.web.x-skep-canary.steps[1].pause: want a positive duration such as 30s or 5m, got "never"`,
			}},
		{name: "a job metric must name an analysis hook",
			compose: web + "    x-skep-canary:\n      steps:\n        - analysis:\n            metrics:\n              - name: smoke\n                job: migrate\n" +
				"  migrate:\n    image: db\n    x-skep-hook: pre-sync\n",
			wantErr: []string{"compose.yaml:10: services.web.x-skep-canary.steps[0].analysis.metrics[0].job: migrate is no service marked x-skep-hook: analysis"}},
		{name: "a global service has no canary",
			compose: "services:\n  web:\n    image: web\n    deploy: {mode: global}\n    x-skep-canary: {steps: [{setWeight: 10}]}\n",
			wantErr: []string{"compose.yaml:5: services.web.x-skep-canary: a canary needs a replicated service, not deploy.mode global"}},
		{name: "one canary per release",
			compose: web + "    x-skep-canary: {steps: [{setWeight: 10}]}\n  api:\n    image: api\n    x-skep-canary: {steps: [{setWeight: 10}]}\n",
			wantErr: []string{"compose.yaml:5: services.web.x-skep-canary: service api has a canary already; a release canaries one service at a time"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, map[string]string{"compose.yaml": tc.compose})
			doc, err := Compose(context.Background(), Input{Root: root, Variables: map[string]string{"HALF": "50"}})
			if tc.wantErr != nil {
				if err == nil || err.Error() != strings.Join(tc.wantErr, "\n") {
					t.Fatalf("Compose = %v\nwant %q", err, strings.Join(tc.wantErr, "\n"))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s, ok := doc.Canaries["web"]
			if tc.weights == nil {
				if ok {
					t.Errorf("Canaries = %v, want none", doc.Canaries)
				}
				return
			}
			if got := s.Weights(); !ok || len(got) != len(tc.weights) || got[0] != tc.weights[0] || got[1] != tc.weights[1] {
				t.Errorf("weights %v, want %v", got, tc.weights)
			}
			if doc.Hooks["smoke"].Phase != HookAnalysis {
				t.Errorf("hooks %v, want smoke an analysis hook", doc.Hooks)
			}
		})
	}
}

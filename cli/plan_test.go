package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/skep-cd/skep/wire"
)

// skep plan's exit code is its answer for CI: 0 no change, 3 changes, 1
// a revision that does not render (or a failure to ask); -o json prints
// the server's answer and keeps the code.
func TestPlanExitsZeroForNoChangeThreeForChangesOneForAnError(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	upgrade := wire.ReleasePlan{Name: "web", Action: "upgrade", Reason: "image changed", Changes: []wire.PlanChange{{Kind: "service", Name: "web_app", Op: "update",
		Reason: "image changed", Fields: []wire.FieldDiff{{Path: "TaskTemplate.ContainerSpec.Image", Old: `"app:v1"`, New: `"app:v2"`}}}}}
	answers := map[string]wire.Proposal{
		"same":   {Application: "web", Revision: commit, Releases: []wire.ProposedRelease{{ReleasePlan: wire.ReleasePlan{Name: "web", Action: "unchanged", Changes: []wire.PlanChange{}}}}},
		"change": {Application: "web", Revision: commit, Changes: 1, Releases: []wire.ProposedRelease{{ReleasePlan: upgrade}}},
		"broken": {Application: "web", Revision: commit, Error: "compose.yaml:5:7: services.web.deploy.replicas: want an integer",
			Releases: []wire.ProposedRelease{{ReleasePlan: wire.ReleasePlan{Name: "web", Changes: []wire.PlanChange{}}, Error: "render at 0123456: compose.yaml:5:7: services.web.deploy.replicas: want an integer"}}},
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req wire.PlanRequest
		if r.Method != "POST" || r.URL.Path != "/api/v1/applications/web/plan" || r.Header.Get("Authorization") != "Bearer ci-token" ||
			json.NewDecoder(r.Body).Decode(&req) != nil {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		p, ok := answers[req.Revision]
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(wire.Error{Code: wire.CodeBadRequest, Message: "invalid request: revision " + req.Revision})
			return
		}
		_ = json.NewEncoder(w).Encode(p)
	}))
	t.Cleanup(ts.Close)
	t.Setenv("SKEP_SERVER", ts.URL)
	t.Setenv("SKEP_TOKEN", "ci-token")
	t.Setenv("SKEP_TOKEN_FILE", "")
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		out, err string
	}{
		{"no change exits 0", []string{"plan", "web", "--revision", "same"}, ExitOK, "web at 0123456789ab: no change\nrelease web: unchanged\n", ""},
		{"changes exit 3", []string{"plan", "web", "--revision", "change"}, ExitChanges, `TaskTemplate.ContainerSpec.Image: "app:v1" → "app:v2"`, ""},
		{"a broken head exits 1 naming file and line", []string{"plan", "web", "--revision", "broken"}, ExitFailure, "release web: render at", "compose.yaml:5:7"},
		{"json keeps the exit code", []string{"plan", "web", "--revision", "change", "-o", "json"}, ExitChanges, `"changes":1`, ""},
		{"an unknown revision exits 1", []string{"plan", "web", "--revision", "nope"}, ExitFailure, "", "revision nope"},
		{"no revision is a usage error", []string{"plan", "web"}, ExitUsage, "", "--revision"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, tc.args...)
			if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.err) {
				t.Errorf("skep %s = %d\nstdout %q\nstderr %q\nwant %d, stdout with %q, stderr with %q", strings.Join(tc.args, " "), code, out, errOut, tc.code, tc.out, tc.err)
			}
		})
	}
}

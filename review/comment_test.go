package review

import (
	"fmt"
	"strings"
	"testing"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/wire"
)

func TestLocatedKeepsWhatNamesTheFileAndLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"render at 0123456: compose.yaml:5:7: services.web.deploy.replicas: want an integer", "compose.yaml:5:7: services.web.deploy.replicas: want an integer"},
		{"chart web: templates/web.yaml:12: unknown function", "templates/web.yaml:12: unknown function"},
		{"app set at 0123456: apps/web.yml:3:5: applications[0].source.repo: missing", "apps/web.yml:3:5: applications[0].source.repo: missing"},
		{"resolve https://git.example.org/a.git at \"main\": revision not found", "resolve https://git.example.org/a.git at \"main\": revision not found"},
	} {
		if got := located(tc.in); got != tc.want {
			t.Errorf("located(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDescribeSaysWhatTheStatusSays(t *testing.T) {
	for _, tc := range []struct {
		p    wire.Proposal
		want string
	}{
		{wire.Proposal{}, "no change"},
		{wire.Proposal{Changes: 1}, "1 change"},
		{wire.Proposal{Changes: 4}, "4 changes"},
		{wire.Proposal{Changes: 4, Error: "compose.yaml:1: bad"}, "compose.yaml:1: bad"},
	} {
		if got := describe(tc.p); got != tc.want {
			t.Errorf("describe(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}

// ctlOnly is a controller for the comment's marker.
type ctlOnly struct{ Controller }

func (ctlOnly) ID() string                         { return "ctl" }
func (ctlOnly) Applications() []appset.Application { return nil }

// A comment keeps its table and stays within MaxComment however many and
// however large the plans; what does not fit is counted and left to the UI.
func TestTheCommentStaysWithinItsBound(t *testing.T) {
	r := &Reviewer{opts: Options{Controller: ctlOnly{}, MaxComment: 8_000, UI: "https://skep.example.org"}}
	var out result
	out.head = strings.Repeat("a", 40)
	for i := range 30 {
		rel := plan.Release{Name: fmt.Sprintf("rel-%02d", i), Action: plan.Upgrade, Reason: "image changed"}
		for j := range 20 {
			rel.Changes = append(rel.Changes, plan.Change{Kind: plan.KindService, Name: fmt.Sprintf("svc-%d", j), Op: plan.Update,
				Fields: []plan.FieldDiff{{Path: "TaskTemplate.ContainerSpec.Image", Old: `"app:v1"`, New: `"app:v2"`}}})
		}
		out.plans = append(out.plans, appPlan{name: fmt.Sprintf("app-%02d", i), releases: []plan.Release{rel},
			proposal: wire.Proposal{Changes: 20, Releases: []wire.ProposedRelease{{ReleasePlan: api.PlanView(rel)}}}})
	}
	text := r.comment(api.PullRequest{}, out)
	if len(text) > 8_000 {
		t.Errorf("comment is %d bytes, over its bound of 8000", len(text))
	}
	for _, want := range []string{"<!-- skep-plan:ctl -->", "| `app-00` | `rel-00` | 20 changes (image changed) |", "<details>", "do not fit", "https://skep.example.org/#/app/app-00/pulls"} {
		if !strings.Contains(text, want) {
			t.Errorf("comment lacks %q:\n%s", want, text)
		}
	}
	if !strings.HasPrefix(text, r.marker()) {
		t.Error("the marker does not start the comment")
	}
}

func TestAnErrorInATableCellStaysOnOneLine(t *testing.T) {
	got := cell(wire.ProposedRelease{Error: "render at 0123456: compose.yaml:2: a | b\nnext"})
	if got != `**failed**: compose.yaml:2: a \| b next` {
		t.Errorf("cell = %q", got)
	}
}

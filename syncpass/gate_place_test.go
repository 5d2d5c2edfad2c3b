package syncpass

import (
	"strings"
	"testing"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/placement"
)

// Fixtures of the placement rule: what no node satisfies for two services.
var (
	noZone = placement.Problem{Service: "web_api", Rule: placement.RuleConstraint,
		Message: `constraint "node.labels.zone == c" matches none of the 5 ready, active nodes (node.labels.zone a on skep-m1)`}
	tooBig = placement.Problem{Service: "web_db", Rule: placement.RuleResources,
		Message: "reserves 64 CPUs per task; no node ready and active has it free (skep-m1 has 2 CPUs, 4 GiB free)"}
)

// allowing is an automated application whose allow.unplaceable lists rules.
func allowing(rules ...string) facts {
	app := automated()
	app.Allow.Unplaceable = rules
	return facts{app: app, key: "c2", commit: "c2", plan: changedPlan}
}

// placementCases are TestGate's cases of the placement rule, the last
// before a write: checked only once every other rule let the write
// through (judge), refused as stalled, raised once per commit and
// versions, and forgotten by a pass it places.
func placementCases(live observed) []gateCase {
	placed := func(f facts, problems ...placement.Problem) facts {
		f.seen, f.placed, f.unplaceable = live, placeChecked, problems
		return f
	}
	return []gateCase{
		{name: "a release no node can place is refused before any write, raised once per commit and versions",
			f: placed(allowing(), noZone, tooBig),
			want: gateWant{then: hold, class: outcome.Stalled, errHas: "web_api: constraint \"node.labels.zone == c\" matches none", findings: true, waiting: true,
				notices: []string{"window=", "placement=c2"}}},
		{name: "a requested sync of a release no node can place is refused and raised every time",
			f: func() facts { f := placed(allowing(), tooBig); f.ask.Sync = true; return f }(),
			want: gateWant{then: hold, class: outcome.Stalled, errHas: "web_db: reserves 64 CPUs", findings: true, waiting: true,
				notices: []string{"window=", "always"}}},
		{name: "a release every node can place is written, and a refusal raised before is forgotten",
			f:    placed(allowing()),
			want: gateWant{then: write, findings: true, waiting: true, notices: []string{"window=", "placement="}}},
		{name: "an application that allows what fails is written",
			f:    placed(allowing("constraint", "resources"), noZone, tooBig),
			want: gateWant{then: write, findings: true, waiting: true, notices: []string{"window=", "placement="}}},
		{name: "allow.unplaceable: all lets every rule through",
			f:    placed(allowing("all"), noZone, tooBig),
			want: gateWant{then: write, findings: true, waiting: true, notices: []string{"window=", "placement="}}},
		{name: "an application that allows another rule is refused for the rest",
			f:    placed(allowing("resources"), noZone, tooBig),
			want: gateWant{then: hold, class: outcome.Stalled, errHas: "web_api", findings: true, waiting: true, notices: []string{"window=", "placement=c2"}}},
		{name: "a write waits while the snapshot has not listed the nodes to check placement against",
			f:    func() facts { f := placed(allowing()); f.placed = placeUnlisted; return f }(),
			want: gateWant{then: hold, class: outcome.Waiting, errHas: "waiting for the live snapshot to list the nodes", findings: true, waiting: true, notices: []string{"window="}}},
		{name: "placement is not looked at while another rule holds the write",
			f: func() facts {
				f := placed(allowing(), noZone)
				f.seen.rollout = "service web_api is updating"
				return f
			}(),
			want: gateWant{then: hold, class: outcome.Waiting, errHas: "waiting for a rollout", findings: true, waiting: true, notices: []string{"window="}}},
	}
}

// TestGateRefusalSaysEachServiceOnALine: the refusal names the release and
// the commit, and gives each service that cannot be placed a line of its
// own, saying what no node satisfies; an allowed rule's service is left out.
func TestGateRefusalSaysEachServiceOnALine(t *testing.T) {
	f := allowing("resources")
	f.seen, f.placed, f.unplaceable = observed{has: true, readable: true}, placeChecked, []placement.Problem{noZone, tooBig}
	f.commit = "0123456789abcdef"
	v := gate(f)
	lines := strings.Split(v.err.Error(), "\n")
	want := []string{"release web at 0123456789ab cannot be placed, so nothing was written (allow.unplaceable lets a rule through):", noZone.String()}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("refusal =\n%s\nwant\n%s", v.err, strings.Join(want, "\n"))
	}
	if n := v.notices[len(v.notices)-1]; n.typ != notify.SyncFailed || n.msg != v.err.Error() {
		t.Errorf("raised %s %q, want sync-failed with the refusal", n.typ, n.msg)
	}
}

// TestAllowUnplaceableNamesEveryPlacementRule: the values
// allow.unplaceable accepts are placement's rules, by the same names, and
// all.
func TestAllowUnplaceableNamesEveryPlacementRule(t *testing.T) {
	want := []string{string(placement.RuleNoNode), string(placement.RuleConstraint), string(placement.RulePlatform),
		string(placement.RuleResources), string(placement.RuleMaxReplicas), appset.UnplaceableAll}
	if got := appset.UnplaceableRules(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("appset.UnplaceableRules() = %v, want %v", got, want)
	}
}

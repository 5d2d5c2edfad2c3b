package identity

import (
	"encoding/json"
	"testing"

	"github.com/skep-cd/skep/api"
)

func TestTheFirstGroupRuleThatMatchesWins(t *testing.T) {
	c := &SignInConfig{Roles: []GroupRule{
		{Group: "ops", Role: api.RoleAdmin},
		{Group: "web-team", Role: api.RoleDeployer, Apps: []string{"web-*"}},
		{Group: "staff", Role: api.RoleViewer},
	}}
	for _, tc := range []struct {
		name   string
		groups []string
		want   api.Role
		ok     bool
	}{
		{"a member of ops is admin", []string{"ops"}, api.RoleAdmin, true},
		{"the earlier rule wins over the later, whatever the groups' order", []string{"staff", "web-team"}, api.RoleDeployer, true},
		{"a group no rule names gives nothing", []string{"contractors"}, "", false},
		{"no groups give nothing", nil, "", false},
		{"groups compare exactly, case included", []string{"OPS"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := c.match(tc.groups)
			if ok != tc.ok || got.Role != tc.want {
				t.Errorf("match(%q) = %s, %t; want %s, %t", tc.groups, got.Role, ok, tc.want, tc.ok)
			}
		})
	}
}

// claims decodes a token's claims as go-oidc does, numbers as float64.
func claims(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAClaimRuleMatchesOnlyWhenEveryClaimItNamesDoes(t *testing.T) {
	rule := ClaimRule{Claims: map[string]string{"repository": "acme/web", "ref": "refs/heads/release-*", "ref_protected": "true", "run_attempt": "1"}}
	for _, tc := range []struct {
		name, claims string
		want         bool
	}{
		{"every claim matches", `{"repository":"acme/web","ref":"refs/heads/release-2","ref_protected":"true","run_attempt":"1"}`, true},
		{"a boolean claim compares as true or false", `{"repository":"acme/web","ref":"refs/heads/release-2","ref_protected":true,"run_attempt":"1"}`, true},
		{"a whole number compares in digits", `{"repository":"acme/web","ref":"refs/heads/release-2","ref_protected":"true","run_attempt":1}`, true},
		{"a pattern's * does not cross a slash", `{"repository":"acme/web","ref":"refs/heads/release-2/evil","ref_protected":"true","run_attempt":"1"}`, false},
		{"a missing claim never matches", `{"repository":"acme/web","ref":"refs/heads/release-2","run_attempt":"1"}`, false},
		{"a list is not a value", `{"repository":["acme/web"],"ref":"refs/heads/release-2","ref_protected":"true","run_attempt":"1"}`, false},
		{"another repository", `{"repository":"acme/webx","ref":"refs/heads/release-2","ref_protected":"true","run_attempt":"1"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rule.matches(claims(t, tc.claims)); got != tc.want {
				t.Errorf("matches(%s) = %t, want %t", tc.claims, got, tc.want)
			}
		})
	}
	if (ClaimRule{}).matches(claims(t, `{"repository":"acme/web"}`)) {
		t.Error("a rule without claims matched a token")
	}
}

func TestGroupsAreReadFromAListOrAString(t *testing.T) {
	for _, tc := range []struct {
		claims string
		want   []string
	}{
		{`{"groups":["ops","dev"]}`, []string{"ops", "dev"}},
		{`{"groups":"ops"}`, []string{"ops"}},
		{`{"groups":["ops",7,null]}`, []string{"ops"}},
		{`{"groups":{"ops":true}}`, nil},
		{`{}`, nil},
	} {
		got := groupsOf(claims(t, tc.claims), "groups")
		if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
			t.Errorf("groupsOf(%s) = %q, want %q", tc.claims, got, tc.want)
		}
	}
}

func TestActorsNameTheIssuerTheSubjectAndWhatTellsThemApart(t *testing.T) {
	const iss = "https://token.actions.githubusercontent.com"
	for _, tc := range []struct {
		name, got, want string
	}{
		{"a person with an email", personName("https://login.example.org", "248289761001", "jane@example.org"),
			"oidc:https://login.example.org#248289761001 (jane@example.org)"},
		{"a person without one", personName("https://login.example.org", "248289761001", ""), "oidc:https://login.example.org#248289761001"},
		{"a job: the rule's claims, then the audited ones it has, each once, a value with a space quoted",
			jobName(iss, "repo:acme/web:ref:refs/heads/main", ClaimRule{Claims: map[string]string{"repository": "acme/web", "ref": "refs/heads/main"}},
				[]string{"repository", "workflow", "run_id", "actor"},
				claims(t, `{"repository":"acme/web","ref":"refs/heads/main","workflow":"Deploy web","run_id":"42"}`)),
			`oidc:https://token.actions.githubusercontent.com#repo:acme/web:ref:refs/heads/main (ref=refs/heads/main repository=acme/web workflow="Deploy web" run_id=42)`},
		{"a claim that would break the line is quoted", jobName(iss, "s", ClaimRule{}, []string{"actor"}, claims(t, `{"actor":"eve\n) (role=admin"}`)),
			`oidc:https://token.actions.githubusercontent.com#s (actor="eve\n) (role=admin")`},
	} {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, tc.got, tc.want)
		}
	}
}

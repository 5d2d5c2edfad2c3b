package identity

import (
	"encoding/json"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/skep-cd/skep/api"
)

// match returns the first rule naming one of groups; ok is false when
// none does, and the person may do nothing.
func (c *SignInConfig) match(groups []string) (rule GroupRule, ok bool) {
	for _, r := range c.Roles {
		if slices.Contains(groups, r.Group) {
			return r, true
		}
	}
	return GroupRule{}, false
}

// match returns the first rule whose every claim matches claims; ok is
// false when none does, and the job may do nothing.
func (c *CIIssuer) match(claims map[string]any) (rule ClaimRule, ok bool) {
	for _, r := range c.Rules {
		if r.matches(claims) {
			return r, true
		}
	}
	return ClaimRule{}, false
}

// matches reports whether every claim r names is in claims and matches
// its pattern. A malformed pattern matches nothing (Parse refuses them).
func (r ClaimRule) matches(claims map[string]any) bool {
	for name, pattern := range r.Claims {
		v, ok := claimString(claims[name])
		if !ok {
			return false
		}
		if m, err := path.Match(pattern, v); err != nil || !m {
			return false
		}
	}
	return len(r.Claims) > 0
}

// claimString is a claim's value as rules compare it: a string as it is,
// a boolean as true or false, a whole number in digits. Anything else (a
// list, an object, a fraction) has no string form and matches no rule.
func claimString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case json.Number:
		if _, err := v.Int64(); err == nil {
			return v.String(), true
		}
	case float64:
		if v == float64(int64(v)) {
			return strconv.FormatInt(int64(v), 10), true
		}
	}
	return "", false
}

// groupsOf reads the groups claim: a list of strings, or one string (as
// some providers write a single group). Other values give none.
func groupsOf(claims map[string]any, claim string) []string {
	switch v := claims[claim].(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, g := range v {
			if s, ok := g.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// subject builds what a rule grants; an empty scope stays nil, which is
// every application.
func subject(name string, role api.Role, apps []string) api.Subject {
	return api.Subject{Name: name, Role: role, Apps: slices.Clone(apps)}
}

// personName is the actor of a person: oidc:<issuer>#<subject>, and the
// email when the token has one, so that events name who it was in words
// and in the provider's stable id.
func personName(issuer, sub, email string) string {
	name := "oidc:" + issuer + "#" + sub
	if email != "" {
		name += " (" + email + ")"
	}
	return name
}

// jobName is the actor of a CI job: oidc:<issuer>#<subject> and the claims
// that say which job it was, the rule's first and then audit's, in that
// order, each once and only when the token has it.
func jobName(issuer, sub string, rule ClaimRule, audit []string, claims map[string]any) string {
	var names []string
	for name := range rule.Claims {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, a := range audit {
		if !slices.Contains(names, a) {
			names = append(names, a)
		}
	}
	var parts []string
	for _, name := range names {
		if v, ok := claimString(claims[name]); ok && v != "" {
			parts = append(parts, name+"="+quoteIfNeeded(v))
		}
	}
	out := "oidc:" + issuer + "#" + sub
	if len(parts) > 0 {
		out += " (" + strings.Join(parts, " ") + ")"
	}
	return out
}

// quoteIfNeeded quotes a claim value that holds a space, a quote or a
// character that is not printable, so the actor reads as one line of
// name=value pairs ("workflow=\"Deploy web\"").
func quoteIfNeeded(v string) string {
	if strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == '"' || r == '(' || r == ')' || !strconv.IsPrint(r) }) {
		return strconv.Quote(v)
	}
	return v
}

package ui_test

import (
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/wire"
)

// stubPulls are the open pull requests the stub API answers, by
// application.
var stubPulls = map[string][]wire.PullRequest{
	"shop": {
		{Provider: "github", Repository: "acme/shop", Number: 7, Title: "Scale out", URL: "https://github.example.org/acme/shop/pull/7",
			Base: "main", Branch: "scale-out", Head: "c4a5e1e0d6a3b2f1e0d9c8b7a6f5e4d3c2b1a098", State: wire.PullPlanned,
			PlannedAt: ptr(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)),
			Plan: &wire.Proposal{Application: "shop", Revision: "c4a5e1e0d6a3b2f1e0d9c8b7a6f5e4d3c2b1a098", Changes: 1, Releases: []wire.ProposedRelease{{
				ReleasePlan: wire.ReleasePlan{Name: "shop", Action: "upgrade", Reason: "image and replicas changed", Changes: []wire.PlanChange{{
					Kind: "service", Name: "shop_api", Op: "update", Reason: "image and replicas changed", Fields: []wire.FieldDiff{
						{Path: "TaskTemplate.ContainerSpec.Image", Old: `"registry.internal/shop/api:v1.2.0"`, New: `"registry.internal/shop/api:v1.3.0"`},
						{Path: "Mode.Replicated.Replicas", Old: "1", New: "2"}}}}}}}}},
		{Provider: "github", Repository: "acme/shop", Number: 8, Title: "Add a healthcheck", URL: "javascript:alert(1)",
			Base: "main", Branch: "healthcheck", Head: "7e6d5c4b3a2918f7e6d5c4b3a2918f7e6d5c4b3a", Fork: true, State: wire.PullQueued,
			Plan: &wire.Proposal{Application: "shop", Revision: "7e6d5c4b3a2918f7e6d5c4b3a2918f7e6d5c4b3a", Sealed: true,
				Error: "compose.yaml:5:7: services.api.deploy.replicas: want an integer", Releases: []wire.ProposedRelease{{
					ReleasePlan: wire.ReleasePlan{Name: "shop", Changes: []wire.PlanChange{}},
					Error:       "render at 7e6d5c4: compose.yaml:5:7: services.api.deploy.replicas: want an integer"}}}},
	},
}

func ptr[T any](v T) *T { return &v }

// The application page lists its open pull requests, each with what
// merging it would change: the plan field by field, or the error that
// keeps it from planning; a URL that is not a web page is no link.
func TestBrowserListsOpenPullRequestsWithTheirPlans(t *testing.T) {
	chromium := requireChromium(t)
	p, _ := signedIn(t, chromium, artifactApps())

	p.open(t, "#/app/shop/pulls")
	p.waitFor(t, "both pull requests", `document.querySelectorAll('article.pull').length === 2`, 20*time.Second)
	for _, want := range []struct{ selector, text string }{
		{`article[data-pull="7"] h2`, "#7 Scale out 1 change"},
		{`article[data-pull="7"]`, "scale-out into main"},
		{`article[data-pull="7"] .release-diff`, "TaskTemplate.ContainerSpec.Image"},
		{`article[data-pull="7"] .release-diff`, `"registry.internal/shop/api:v1.3.0"`},
		{`article[data-pull="7"] .release-diff`, "Mode.Replicated.Replicas"},
		{`article[data-pull="8"] h2`, "does not plan"},
		{`article[data-pull="8"] h2`, "new head queued"},
		{`article[data-pull="8"] h2`, "fork"},
		{`article[data-pull="8"] .alert.bad`, "compose.yaml:5:7"},
		{`article[data-pull="8"]`, "Encrypted values were not decrypted"},
		{`nav.tabs a[aria-current="page"]`, "Pull requests"},
	} {
		if !p.eval(t, has(want.selector, want.text)) {
			t.Errorf("%s does not show %q", want.selector, want.text)
		}
	}
	if !p.eval(t, `document.querySelector('article[data-pull="7"] h2 a').href === "https://github.example.org/acme/shop/pull/7"`) {
		t.Error("pull request 7 does not link its page")
	}
	if p.eval(t, `document.querySelector('article[data-pull="8"] a[href^="javascript"]') !== null`) {
		t.Error("a javascript: URL became a link")
	}
	p.screenshot(t, "30-pull-requests")

	p.open(t, "#/app/plain/pulls")
	p.waitFor(t, "no pull requests", has("main", "No open pull request changes this application"), 20*time.Second)
	if text := p.console.String(); strings.Contains(text, "exception") {
		t.Errorf("the page threw:\n%s", text)
	}
}

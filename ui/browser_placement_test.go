package ui_test

import (
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/wire"
)

// stubDiff is the plan the stub API answers for name: an install of which
// two services no node can place.
func stubDiff(name string) wire.Diff {
	return wire.Diff{Application: name, Revision: strings.Repeat("b", 40), Releases: []wire.ReleasePlan{{
		Name: name, Action: "install", Reason: "no revision recorded",
		Changes: []wire.PlanChange{{Kind: "service", Name: name + "_db", Op: "create", Reason: "not in the swarm"}},
		Unplaceable: []string{
			name + `_db: reserves 8 CPUs per task; no node ready and active has it free (skep-m1 has 2 CPUs, 4 GiB free)`,
			name + `_web: constraint "node.labels.zone == c" matches none of the 5 ready, active nodes`,
		},
	}}}
}

// TestBrowserShowsWhatNoNodeCanPlaceAndEachTasksNode: the diff says, one
// line per service, what no node satisfies, and so does the refusal on
// the application's page; its tasks name their node by hostname, its id
// at hand.
func TestBrowserShowsWhatNoNodeCanPlaceAndEachTasksNode(t *testing.T) {
	chromium := requireChromium(t)
	apps := artifactApps()
	shop := apps["shop"]
	at := time.Now().Add(-time.Minute)
	shop.Releases = []wire.Release{{Name: "shop", Services: []wire.Service{{Name: "shop_api", ID: "svc1", Image: "registry.internal/shop/api:v1.2.0",
		Mode: "replicated", Desired: 1, Running: 1, Tasks: []wire.Task{{ID: "task1", Slot: 1, Node: "skep-w1", NodeID: "n0d3w1",
			State: "running", DesiredState: "running", UpdatedAt: at}}}}}}
	shop.Application.LastError = "release shop at 0123456789ab cannot be placed, so nothing was written (allow.unplaceable lets a rule through):\n" +
		"shop_db: reserves 8 CPUs per task; no node ready and active has it free\nshop_web: constraint \"node.labels.zone == c\" matches none of the 5 ready, active nodes"
	shop.Application.LastErrorClass = "stalled"
	apps["shop"] = shop
	p, _ := signedIn(t, chromium, apps)

	p.open(t, "#/app/shop/diff")
	p.waitFor(t, "what no node can place", has(`.unplaceable li`, `shop_web: constraint "node.labels.zone == c" matches none`), 20*time.Second)
	if !p.eval(t, `document.querySelectorAll('.unplaceable li').length === 2 && document.querySelector('.unplaceable').getAttribute('role') === 'alert'`) {
		t.Error("the diff does not list both services no node can place in an alert")
	}
	p.screenshot(t, "41-unplaceable")

	p.open(t, "#/app/shop")
	p.waitFor(t, "the task's node", has(`ul.tasks li`, "skep-w1"), 20*time.Second)
	if !p.eval(t, `[...document.querySelectorAll('ul.tasks li span')].some(e => e.textContent === 'skep-w1' && e.title === 'node n0d3w1')`) {
		t.Error("the task names its node without its id at hand")
	}
	// The refusal's lines stay lines: one per service.
	if !p.eval(t, `(() => { const e = document.querySelector('.last-error'); return e && getComputedStyle(e).whiteSpace === 'pre-line' && e.innerText.split('\n').length === 3; })()`) {
		t.Error("the last error does not keep its lines")
	}
	p.screenshot(t, "42-task-nodes")
}

package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/skep-cd/skep/ui"
	"github.com/skep-cd/skep/wire"
)

// stubAPI serves the UI and answers the API routes the UI calls with
// fixed bodies, so a browser test can look at a screen without a swarm.
// A request to any other API route is answered 404 and remembered, and
// the test fails on it: the fixture must cover what the page reads.
type stubAPI struct {
	url string

	mu         sync.Mutex
	unexpected []string
	// posted are the promotions and aborts the page asked for.
	posted []string
}

// postedCalls returns what the page POSTed to the canary routes.
func (s *stubAPI) postedCalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.posted...)
}

func startStubAPI(t testing.TB, apps map[string]wire.ApplicationDetail) *stubAPI {
	t.Helper()
	webUI, err := ui.New()
	if err != nil {
		t.Fatal(err)
	}
	s := &stubAPI{}
	list := wire.ApplicationList{}
	for _, d := range apps {
		list.Applications = append(list.Applications, d.Application)
	}
	answer := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.Handle("/", webUI)
	mux.HandleFunc("GET /api/v1/whoami", func(w http.ResponseWriter, r *http.Request) {
		// Any token will do, but some token: without one the page shows
		// its sign-in, as a controller's 401 makes it.
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			w.WriteHeader(http.StatusUnauthorized)
			answer(w, wire.Error{Code: wire.CodeUnauthorized, Message: "a valid bearer token or sign-in session is required"})
			return
		}
		answer(w, wire.Whoami{Name: "root", Role: "admin", Apps: []string{}})
	})
	mux.HandleFunc("GET /api/v1/auth", func(w http.ResponseWriter, _ *http.Request) { answer(w, wire.AuthMethods{Token: true}) })
	mux.HandleFunc("GET /api/v1/applications", func(w http.ResponseWriter, _ *http.Request) { answer(w, list) })
	mux.HandleFunc("GET /api/v1/version", func(w http.ResponseWriter, _ *http.Request) {
		answer(w, wire.VersionInfo{Version: "stub", Commit: "0123456789ab", APIVersion: "v1", Capabilities: []string{"sse"}})
	})
	mux.HandleFunc("GET /api/v1/status", func(w http.ResponseWriter, _ *http.Request) {
		since := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		answer(w, wire.ControllerStatus{ControllerID: "stub", Ready: true, Applications: len(list.Applications),
			AppSet:   wire.AppSetStatus{Source: "file apps.yaml", Loaded: true},
			Orphaned: []string{}, Pruned: []string{},
			Swarms: []wire.Swarm{{Name: "", Reachable: true, EngineVersion: "20.10.24", APIVersion: "1.41", Nodes: 1, Applications: 1},
				{Name: "edge", Reachable: false, UnreachableSince: &since, Error: `swarm "edge": no manager answered`, Applications: 1}}})
	})
	mux.HandleFunc("GET /api/v1/applications/{name}", func(w http.ResponseWriter, r *http.Request) {
		d, ok := apps[r.PathValue("name")]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			answer(w, map[string]string{"code": "not-found", "message": "no application " + r.PathValue("name")})
			return
		}
		answer(w, d)
	})
	mux.HandleFunc("GET /api/v1/applications/{name}/pulls", func(w http.ResponseWriter, r *http.Request) {
		list := wire.PullRequestList{Application: r.PathValue("name"), PullRequests: []wire.PullRequest{}}
		list.PullRequests = append(list.PullRequests, stubPulls[r.PathValue("name")]...)
		answer(w, list)
	})
	mux.HandleFunc("GET /api/v1/applications/{name}/diff", func(w http.ResponseWriter, r *http.Request) {
		answer(w, stubDiff(r.PathValue("name")))
	})
	mux.HandleFunc("GET /api/v1/events", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			answer(w, wire.EventList{Events: []wire.EventItem{}})
			return
		}
		// A stream that stays open with nothing to say.
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(": heartbeat\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	canary := func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.posted = append(s.posted, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		answer(w, wire.SyncResponse{Application: r.PathValue("name"), Status: wire.SyncQueued, Revision: "fedcba9876543210fedcba9876543210fedcba98"})
	}
	mux.HandleFunc("POST /api/v1/applications/{name}/promote", canary)
	mux.HandleFunc("POST /api/v1/applications/{name}/abort", canary)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.unexpected = append(s.unexpected, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		w.WriteHeader(http.StatusNotFound)
		answer(w, map[string]string{"code": "not-found", "message": "the stub does not answer " + r.URL.Path})
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.unexpected) > 0 {
			t.Errorf("the page called routes the stub does not answer: %q", s.unexpected)
		}
	})
	s.url = ts.URL
	return s
}

// artifactApps is the fixture: shop with a waiting artifact, a suspended
// one and a preview; plain with neither.
// signedIn opens the UI of a stub API serving apps in chromium, signed in
// with any token.
func signedIn(t *testing.T, chromium string, apps map[string]wire.ApplicationDetail) (*page, *stubAPI) {
	t.Helper()
	stub := startStubAPI(t, apps)
	console := &consoleLog{}
	p := &page{console: console, ctx: browser(t, chromium, console), dir: screenshotDir(t), base: stub.url}
	p.run(t, "load the page", chromedp.Navigate(stub.url+"/"))
	p.signIn(t, "any-token")
	return p, stub
}

func artifactApps() map[string]wire.ApplicationDetail {
	now := time.Now().Add(-time.Minute)
	base := func(name string) wire.Application {
		return wire.Application{Name: name, Repo: "git@git.internal:" + name + ".git", TargetRevision: "main", Swarm: "local",
			Releases: []string{name}, Sync: "synced", Health: "healthy", Drift: []wire.DriftFinding{}, Phase: wire.PhaseIdle,
			Revision: "0123456789abcdef0123456789abcdef01234567", DeployedRevision: "0123456789abcdef0123456789abcdef01234567",
			Services: wire.ServiceCounts{Services: 1, Running: 1, Desired: 1}, LastReconcile: &now}
	}
	shop := base("shop")
	shop.Swarm = "edge"
	shop.Sync, shop.DriftReason = "out-of-sync", "artifact"
	shop.Artifacts = []wire.Artifact{
		{Name: "api", Kind: "service", Strategy: "release", Preview: true, Image: "registry.internal/shop/api",
			Desired: "v1.3.0", Current: "v1.2.0", Version: "v1.2.0", Condition: "waiting",
			Reason: "tag v1.3.0 is not in the registry yet", Drift: wire.ArtifactWaiting},
		{Name: "schema", Kind: "infrastructure", Strategy: "suspend", Suspended: true,
			Desired: "feedc0ffee", Current: "c0ffee1234", Version: "c0ffee1234", Drift: wire.ArtifactInSync},
	}
	shop.Previews = []wire.Preview{{Branch: "feature/login", Hash: "9f1c2e3d", Release: "shop-9f1c2e3d",
		Commit: "abcdef0123456789abcdef0123456789abcdef01", Domain: "9f1c2e3d.api.staging.example.test",
		Health: "progressing", Deployed: true, Error: "image registry.internal/shop/api:feature-login-abcdef01 is not pushed yet",
		Artifacts: []wire.Artifact{{Name: "api", Kind: "service", Strategy: "branch", Preview: true,
			Desired: "feature-login-abcdef01", Current: "feature-login-12345678", Version: "feature-login-12345678",
			Condition: "waiting", Drift: wire.ArtifactWaiting}}}}
	shop.PreviewProblems = []string{"branch wip/a-very-long-name: its release name would be too long"}
	return map[string]wire.ApplicationDetail{
		"shop":  {Application: shop, Releases: []wire.Release{}},
		"plain": {Application: base("plain"), Releases: []wire.Release{}},
	}
}

// rowCells returns an expression giving the text of each cell of the row
// matching selector, by its data-label.
func rowCells(selector string) string {
	s, _ := json.Marshal(selector)
	return `(() => { const row = document.querySelector(` + string(s) + `); if (!row) return {};
		return Object.fromEntries([...row.children].map(c => [c.dataset.label, c.textContent.trim()])); })()`
}

func TestBrowserShowsArtifactsAndPreviewsFromTheAPI(t *testing.T) {
	chromium := requireChromium(t)
	p, _ := signedIn(t, chromium, artifactApps())

	t.Run("the list says the artifact waits", func(t *testing.T) {
		p.waitFor(t, "both rows", `document.querySelectorAll('tr[data-app]').length === 2`, 20*time.Second)
		p.waitFor(t, "artifact waiting", has(`tr[data-app="shop"] td[data-label="Drift"] .badge`, "artifact waiting"), 10*time.Second)
	})

	t.Run("the application shows its artifacts and previews", func(t *testing.T) {
		p.open(t, "#/app/shop")
		p.waitFor(t, "the artifacts table", `document.querySelector('table.artifacts tr[data-artifact="api"]') !== null`, 20*time.Second)
		checkCells(t, p, `table.artifacts tr[data-artifact="api"]`, map[string]string{
			"Artifact": "apipreviewregistry.internal/shop/api", "Kind": "service", "Strategy": "release",
			"Desired": "v1.3.0", "Current": "v1.2.0", "Used version": "v1.2.0",
			"Image": "waitingtag v1.3.0 is not in the registry yet", "Drift": "waiting for image",
		})
		checkCells(t, p, `table.artifacts tr[data-artifact="schema"]`, map[string]string{
			"Artifact": "schemasuspended", "Kind": "infrastructure", "Strategy": "suspend",
			"Desired": "feedc0ffee", "Current": "c0ffee1234", "Used version": "c0ffee1234", "Image": "—", "Drift": "suspended",
		})
		if !p.eval(t, `document.querySelector('table.artifacts tr[data-artifact="api"]').classList.contains('waiting')`) {
			t.Error("the waiting artifact's row is not marked waiting")
		}
		checkCells(t, p, `table.previews tr[data-branch="feature/login"]`, map[string]string{
			"Branch": "feature/loginrelease shop-9f1c2e3d", "Commit": "abcdef01", "Domain": "9f1c2e3d.api.staging.example.test",
			"Health": "progressing", "Deployed": "deployedimage registry.internal/shop/api:feature-login-abcdef01 is not pushed yet",
			"Versions": "api feature-login-12345678 waiting for feature-login-abcdef01",
		})
		if p.eval(t, `document.querySelector('table.previews a') !== null`) {
			t.Error("the preview's domain is a link; it should be text")
		}
		if !p.eval(t, has(`section[aria-labelledby="h-prev"] .alert li`, "wip/a-very-long-name")) {
			t.Error("the preview problem is not listed")
		}
		if !p.eval(t, has(`section[aria-labelledby="h-drift"]`, "artifact version whose image is not in the registry yet")) {
			t.Error("the drift section does not explain the artifact drift")
		}
		p.screenshot(t, "20-artifacts-previews")
		p.run(t, "phone, dark", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
			emulateMedia([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}))
		p.screenshot(t, "21-artifacts-previews-phone-dark")
		p.run(t, "desktop, light", chromedp.EmulateViewport(1280, 900), emulateMedia(nil))
	})

	t.Run("the list and the controller screen name each application's swarm", func(t *testing.T) {
		p.open(t, "#/")
		p.waitFor(t, "both rows", `document.querySelectorAll('tr[data-app]').length === 2`, 20*time.Second)
		for app, want := range map[string]string{"shop": "edge", "plain": "local"} {
			if !p.eval(t, `document.querySelector('tr[data-app="`+app+`"] td[data-label="Swarm"]').textContent.trim() === "`+want+`"`) {
				t.Errorf("%s's swarm cell is not %q", app, want)
			}
		}
		p.open(t, "#/controller")
		p.waitFor(t, "the swarms table", `document.querySelector('table.swarms tr[data-swarm="edge"]') !== null`, 20*time.Second)
		checkCells(t, p, `table.swarms tr[data-swarm=""]`, map[string]string{
			"Swarm": "local", "State": "reachable", "Engine": "20.10.24", "API": "1.41", "Nodes": "1", "Applications": "1"})
		checkCells(t, p, `table.swarms tr[data-swarm="edge"]`, map[string]string{
			"Swarm": "edge", "State": `unreachableswarm "edge": no manager answered`, "Engine": "—", "API": "—", "Nodes": "—", "Applications": "1"})
	})

	t.Run("an application without artifacts or previews has neither section", func(t *testing.T) {
		p.open(t, "#/app/plain")
		p.waitFor(t, "plain's overview", has(".app-head h1", "plain")+` && document.querySelector('section[aria-labelledby="h-rel"]') !== null`, 20*time.Second)
		if p.eval(t, `document.querySelector('#h-art, #h-prev, table.artifacts, table.previews') !== null`) {
			t.Error("an application without artifacts or previews shows a section for them")
		}
	})
	if text := p.console.String(); strings.Contains(text, "exception") {
		t.Errorf("the page threw:\n%s", text)
	}
}

func checkCells(t *testing.T, p *page, selector string, want map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](rowCells(selector)))
	if err != nil {
		t.Fatalf("read %s: %v", selector, err)
	}
	for label, w := range want {
		if got[label] != w {
			t.Errorf("%s cell %q = %q, want %q", selector, label, got[label], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s has cells %q, want exactly %d", selector, got, len(want))
	}
}

// A visitor who has not signed in sees the sign-in form and nothing that
// needs a token: the [hidden] attribute must win over the header's own
// display rules (nav is a flex box, buttons are inline blocks).
func TestBrowserSignInPageShowsNoNavigationOrSignOut(t *testing.T) {
	chromium := requireChromium(t)
	stub := startStubAPI(t, artifactApps())
	console := &consoleLog{}
	p := &page{console: console, ctx: browser(t, chromium, console), dir: screenshotDir(t), base: stub.url}
	shown := func(id string) string {
		return `(() => { const e = document.getElementById('` + id + `'); return e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden'; })()`
	}

	p.run(t, "load the page", chromedp.Navigate(stub.url+"/"))
	p.waitFor(t, "the sign-in form", `document.querySelector('#token') !== null`, 20*time.Second)
	for _, id := range []string{"nav", "signout"} {
		if p.eval(t, shown(id)) {
			t.Errorf("the sign-in page shows #%s to a visitor who is not signed in", id)
		}
	}
	p.screenshot(t, "30-sign-in")

	p.signIn(t, "any-token")
	for _, id := range []string{"nav", "signout"} {
		if !p.eval(t, shown(id)) {
			t.Errorf("#%s is not shown once signed in", id)
		}
	}

	p.run(t, "sign out", chromedp.Click(chromedp.ID("signout")))
	p.waitFor(t, "the sign-in form again", `document.querySelector('#token') !== null`, 20*time.Second)
	for _, id := range []string{"nav", "signout"} {
		if p.eval(t, shown(id)) {
			t.Errorf("#%s is still shown after signing out", id)
		}
	}
}

func TestBrowserShowsTheRenderWarningsOfAnApplication(t *testing.T) {
	chromium := requireChromium(t)
	apps := artifactApps()
	shop := apps["shop"]
	shop.Application.Warnings = []string{"ignoring unsupported options: network_mode, privileged"}
	apps["shop"] = shop
	p, _ := signedIn(t, chromium, apps)

	p.open(t, "#/app/shop")
	p.waitFor(t, "the warnings", has(`section[aria-labelledby="h-warn"] li`, "ignoring unsupported options: network_mode, privileged"), 20*time.Second)
	p.screenshot(t, "31-render-warnings")
	p.open(t, "#/app/plain")
	p.waitFor(t, "the plain application", has(`h1`, "plain"), 20*time.Second)
	if p.eval(t, `document.querySelector('section[aria-labelledby="h-warn"]') !== null`) {
		t.Error("an application without warnings shows a warnings section")
	}
}

// The application page says why the last rollout failed, with the
// failing task's log tail, and which commit a release rollback holds off.
func TestBrowserShowsWhyARolloutFailedAndTheCommitHeldOff(t *testing.T) {
	chromium := requireChromium(t)
	apps := artifactApps()
	shop := apps["shop"]
	since := time.Date(2026, 12, 4, 18, 30, 0, 0, time.UTC)
	shop.Application.RolledBack = &wire.RolledBack{Revision: "badbadbadbad0123456789abcdef0123456789ab", Restored: "0123456789abcdef0123456789abcdef01234567",
		RestoredRevision: 7, Cause: "shop_api: exit code 1", Since: since}
	shop.Application.Cause = &wire.Cause{Line: "shop_api: exit code 1 (task: non-zero exit (1)); last log line: cannot open database",
		Service: "shop_api", Kind: "exit", ExitCode: 1, Logs: "starting\ncannot open database"}
	apps["shop"] = shop
	p, _ := signedIn(t, chromium, apps)

	p.open(t, "#/app/shop")
	p.waitFor(t, "the cause", has(`section[aria-labelledby="h-cause"] p`, "last log line: cannot open database"), 20*time.Second)
	p.waitFor(t, "the log tail", has(`section[aria-labelledby="h-cause"] pre`, "starting"), 5*time.Second)
	p.waitFor(t, "the hold", has(`.alert.warn`, "its rollout failed"), 5*time.Second)
	p.waitFor(t, "the badge", has(`.states .badge.bad`, "rolled back"), 5*time.Second)
	p.screenshot(t, "32-rollout-failed")
	p.open(t, "#/app/plain")
	p.waitFor(t, "the plain application", has(`h1`, "plain"), 20*time.Second)
	if p.eval(t, `document.querySelector('section[aria-labelledby="h-cause"]') !== null`) {
		t.Error("an application whose rollouts did not fail shows a cause")
	}
}

// The application page shows a running canary (its step, weight, tasks
// and each metric's values) and lets a deployer promote it.
func TestBrowserShowsACanaryAndPromotesIt(t *testing.T) {
	chromium := requireChromium(t)
	apps := artifactApps()
	shop := apps["shop"]
	since := time.Now().Add(-20 * time.Second).UTC()
	next := since.Add(25 * time.Second)
	shop.Application.Canary = &wire.Canary{Service: "shop_web", CanaryService: "shop_web-canary", Revision: "fedcba9876543210fedcba9876543210fedcba98",
		Phase: wire.CanaryProgressing, Step: 2, Steps: 4, StepName: "analysis errors", Weight: 20, Replicas: 1, StableReplicas: 4, TotalReplicas: 5,
		Started: since, Since: since, Next: &next, Analysis: []wire.CanaryMetric{{Metric: "errors", Phase: "running", Count: 2, Successful: 2,
			Measurements: []wire.CanaryMeasurement{{At: since, Phase: "successful", Value: "[0.012]"}, {At: since.Add(2 * time.Second), Phase: "successful", Value: "[0.008]"}}}}}
	apps["shop"] = shop
	p, stub := signedIn(t, chromium, apps)

	p.open(t, "#/app/shop")
	p.waitFor(t, "the canary", has(`section[aria-labelledby="h-canary"] dd`, "1 canary and 4 stable of 5"), 20*time.Second)
	p.waitFor(t, "its step", has(`section[aria-labelledby="h-canary"] dd`, "analysis errors"), 5*time.Second)
	p.waitFor(t, "its values", has(`section[aria-labelledby="h-canary"] tr[data-metric="errors"]`, "[0.008]"), 5*time.Second)
	p.screenshot(t, "33-canary")
	p.do(t, `[...document.querySelectorAll('.actions button')].find((b) => b.textContent === 'Promote canary').click()`)
	p.waitFor(t, "the promotion queued", has(`.alert.ok`, "Promote canary: queued"), 10*time.Second)
	if got := stub.postedCalls(); len(got) != 1 || got[0] != "POST /api/v1/applications/shop/promote" {
		t.Errorf("the page posted %q, want one promotion of shop", got)
	}
	p.open(t, "#/app/plain")
	p.waitFor(t, "the plain application", has(`h1`, "plain"), 20*time.Second)
	if p.eval(t, `document.querySelector('section[aria-labelledby="h-canary"]') !== null || [...document.querySelectorAll('.actions button')].some((b) => b.textContent.includes('canary'))`) {
		t.Error("an application without a canary shows one, or its buttons")
	}
}

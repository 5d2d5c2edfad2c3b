package ui_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/api/apitest"
	"github.com/skep-cd/skep/identity"
	"github.com/skep-cd/skep/identity/identitytest"
	"github.com/skep-cd/skep/store"
	"github.com/skep-cd/skep/ui"
)

// oidcUI is the UI and the API of a controller whose people sign in at
// a real OpenID provider, with the fake reconciler's two applications.
type oidcUI struct {
	url      string
	provider *identitytest.Provider
	rec      *apitest.Reconciler
}

func startOIDCUI(t *testing.T) *oidcUI {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	o := &oidcUI{url: "http://" + srv.Listener.Addr().String(), rec: &apitest.Reconciler{}}
	o.provider = identitytest.Start(t, identitytest.Options{Users: []identitytest.User{
		{Subject: "u-bob", Username: "bob", Password: "pw", Email: "bob@example.test", Groups: []string{"web-team"}},
		{Subject: "u-carol", Username: "carol", Password: "pw", Email: "carol@example.test", Groups: []string{"viewers"}},
	}})
	o.provider.AddClient(identitytest.Client{ID: "skep", Secret: "web-secret", RedirectURIs: []string{o.url + "/api/v1/auth/oidc/callback"},
		PostLogoutRedirectURIs: []string{o.url + "/"}})
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), store.FileName), store.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	cfg, err := identity.Parse("oidc.yaml", []byte(`signIn:
  issuer: `+o.provider.URL+`
  clientID: skep
  clientSecretEnv: CLIENT_SECRET
  redirectURL: `+o.url+`/api/v1/auth/oidc/callback
  label: Test SSO
  roles:
    - {group: web-team, role: deployer, apps: ["web*"]}
    - {group: viewers, role: viewer}
`), func(k string) string { return map[string]string{"CLIENT_SECRET": "web-secret"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.New(identity.Options{Config: cfg, Sessions: db, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	webUI, err := ui.New()
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Options{Reconciler: o.rec, Authorizer: api.Chain(id.Authorizers()), SignIn: id.SignIn, UI: webUI, Logger: logger, Heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = s
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return o
}

// fetchStatus is an expression that sends a request from the page, with
// the session cookie the browser holds, and gives its status. csrf adds
// the session's CSRF token, read from whoami as the page does.
func fetchStatus(method, path string, csrf bool) string {
	headers := `{'Content-Type': 'application/json'}`
	if csrf {
		headers = `{'Content-Type': 'application/json', 'X-Skep-CSRF': me.session.csrfToken}`
	}
	return `fetch('/api/v1/whoami').then(r => r.json()).then(me => fetch('` + path + `', {method: '` + method + `', headers: ` + headers + `, body: '{}'})).then(r => r.status)`
}

// waitAcross is waitFor for a page that is still navigating (through the
// provider and back): a poll cut short by a navigation is started again
// on the new page until timeout.
func (p *page) waitAcross(t *testing.T, what, expression string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithDeadline(p.ctx, deadline)
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expression, chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
		cancel()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			text, _ := chromedp.Run(p.ctx, chromedp.Text(chromedp.CSS("body")))
			t.Fatalf("waiting for %s: %v\npage: %s\nconsole:\n%s", what, err, text, p.console)
		}
	}
}

func (p *page) status(t *testing.T, expression string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[int](expression, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expression, err)
	}
	return v
}

// signInAtTheProvider clicks the provider's button on the sign-in page
// and signs in there as user.
func (p *page) signInAtTheProvider(t *testing.T, user string) {
	t.Helper()
	p.waitAcross(t, "the provider's sign-in button", has(`#sso`, "Sign in with Test SSO"), 20*time.Second)
	p.run(t, "go to the provider", chromedp.Click(chromedp.ID("sso")))
	p.run(t, "sign in at the provider as "+user,
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), user),
		chromedp.SendKeys(chromedp.ID("password"), "pw"),
		chromedp.Click(chromedp.ID("submit")))
}

func TestBrowserSignsInAtTheProviderActsInItsRoleAndSignsOut(t *testing.T) {
	chromium := requireChromium(t)
	o := startOIDCUI(t)
	console := &consoleLog{}
	p := &page{console: console, ctx: browser(t, chromium, console), dir: screenshotDir(t), base: o.url}
	bob := "oidc:" + o.provider.URL + "#u-bob (bob@example.test)"

	p.run(t, "load the page", chromedp.Navigate(o.url+"/"))
	p.screenshot(t, "40-oidc-sign-in")
	p.signInAtTheProvider(t, "bob")

	t.Run("a deployer lands on the application list with a deployer's buttons", func(t *testing.T) {
		p.waitAcross(t, "the application list", `document.querySelectorAll('tr[data-app]').length === 1`, 20*time.Second)
		if !p.eval(t, has(`tr[data-app="web"]`, "web")) {
			t.Error("bob's list does not show web")
		}
		if !p.eval(t, has(`#who`, "deployer")) || !p.eval(t, has(`#who`, "u-bob")) {
			t.Error("the header does not name bob and his role")
		}
		if !p.eval(t, `location.pathname === '/' && location.search === ''`) {
			t.Error("the sign-in left a query in the address")
		}
		p.waitFor(t, "the live indicator", `document.querySelector('#live[data-state="live"]') !== null`, 20*time.Second)
		p.screenshot(t, "41-oidc-deployer-list")
		p.open(t, "#/app/web")
		p.waitFor(t, "the sync button", has(`button.primary`, "Sync…"), 20*time.Second)
		p.screenshot(t, "42-oidc-deployer-app")
	})

	t.Run("the page syncs in the session, with its CSRF token", func(t *testing.T) {
		p.run(t, "plan the sync", chromedp.Click(`//button[contains(., "Sync…")]`))
		p.waitFor(t, "the confirmation", has(`button.primary`, "Sync now"), 20*time.Second)
		if calls := o.rec.Calls(); !slices.Contains(calls, "plan web "+bob) {
			t.Errorf("the dry run was not made as bob: %q", calls)
		}
		p.run(t, "confirm", chromedp.Click(`//button[contains(., "Sync now")]`))
		p.waitFor(t, "the sync's answer", has(`.alert.ok`, "Sync queued"), 20*time.Second)
		if calls := o.rec.Calls(); !slices.Contains(calls, "sync web "+bob) {
			t.Errorf("the sync did not reach the controller as bob: %q", calls)
		}
	})

	t.Run("a request with the cookie but without the CSRF token is refused", func(t *testing.T) {
		before := len(o.rec.Calls())
		if got := p.status(t, fetchStatus("POST", "/api/v1/applications/web/sync", false)); got != 403 {
			t.Errorf("a sync with the cookie and no CSRF token answered %d, want 403", got)
		}
		if got := p.status(t, fetchStatus("POST", "/api/v1/applications/web/sync", true)); got != 202 {
			t.Errorf("the same sync with the CSRF token answered %d, want 202", got)
		}
		if calls := o.rec.Calls()[before:]; len(calls) != 1 {
			t.Errorf("the controller was asked %q, want the one sync with the token", calls)
		}
	})

	t.Run("signing out ends the session here and at the provider", func(t *testing.T) {
		p.open(t, "#/")
		p.run(t, "sign out", chromedp.Click(chromedp.ID("signout")))
		p.waitAcross(t, "the sign-in page again", `location.origin === '`+o.url+`' && document.querySelector('#token') !== null`, 20*time.Second)
		if ended := o.provider.EndedSessions(); !slices.Contains(ended, "u-bob skep") {
			t.Errorf("the provider ended %q, want bob's session of skep", ended)
		}
		if got := p.status(t, `fetch('/api/v1/whoami').then(r => r.status)`); got != 401 {
			t.Errorf("after signing out whoami answered %d, want 401", got)
		}
		p.screenshot(t, "43-oidc-signed-out")
	})

	t.Run("a viewer's session sees every application and cannot sync", func(t *testing.T) {
		p.signInAtTheProvider(t, "carol")
		p.waitAcross(t, "the application list", `document.querySelectorAll('tr[data-app]').length === 2`, 20*time.Second)
		p.open(t, "#/app/web")
		p.waitFor(t, "the read-only note", has(`main`, "Role viewer: read only."), 20*time.Second)
		if p.eval(t, has(`button`, "Sync…")) {
			t.Error("a viewer is offered the sync button")
		}
		if got := p.status(t, fetchStatus("POST", "/api/v1/applications/web/sync", true)); got != 403 {
			t.Errorf("a viewer's sync with the CSRF token answered %d, want 403", got)
		}
		p.screenshot(t, "44-oidc-viewer-app")
	})
	if text := console.String(); strings.Contains(text, "exception") {
		t.Errorf("the page threw:\n%s", text)
	}
}

func TestBrowserSaysWhyASignInWasRefused(t *testing.T) {
	chromium := requireChromium(t)
	o := startOIDCUI(t)
	o.provider.AddUser(identitytest.User{Subject: "u-dave", Username: "dave", Password: "pw", Groups: []string{"contractors"}})
	console := &consoleLog{}
	p := &page{console: console, ctx: browser(t, chromium, console), dir: screenshotDir(t), base: o.url}
	p.run(t, "load the page", chromedp.Navigate(o.url+"/"))
	p.signInAtTheProvider(t, "dave")
	p.waitAcross(t, "the reason", has(`.signin .alert`, "no rule of this controller gives you a role"), 20*time.Second)
	if !p.eval(t, `location.search === '' && document.querySelector('#nav').hidden`) {
		t.Error("the refused sign-in left its reason in the address, or shows the navigation")
	}
	p.screenshot(t, "45-oidc-denied")
}

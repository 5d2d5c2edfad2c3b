package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	dswarm "github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/store"
	skepswarm "github.com/skep-cd/skep/swarm"
	"github.com/skep-cd/skep/ui"
	"github.com/skep-cd/skep/wire"
)

// Environment of the browser test.
const (
	// envRequireBrowser makes a missing Chromium a failure instead of a skip.
	envRequireBrowser = "SKEP_REQUIRE_BROWSER"
	// envScreenshots names the directory the screenshots are written to;
	// empty means a temporary directory of the test.
	envScreenshots = "SKEP_SCREENSHOTS"
)

// tokens of the live controller, by role.
const (
	adminToken  = "ui-admin-secret"
	viewerToken = "ui-viewer-secret" // viewer for web* only
)

// requireChromium returns the path of Chromium, failing the test when
// SKEP_REQUIRE_BROWSER=1 and there is none, skipping it otherwise.
func requireChromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(envRequireBrowser) == "1" {
		t.Fatalf("%s=1 but no chromium is installed (apt-get install chromium)", envRequireBrowser)
	}
	t.Skipf("no chromium installed (set %s=1 to make this a failure)", envRequireBrowser)
	return ""
}

// browser starts a headless Chromium with a fresh profile and the flags
// that keep it off the (closed) network, and returns a tab's context.
func browser(t testing.TB, path string, console *consoleLog) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.WithoutCancel(t.Context()), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(func(string, ...any) {}), chromedp.WithListener(console.listen))
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// consoleLog keeps what the page logged and threw, to explain a failure.
type consoleLog struct {
	mu    sync.Mutex
	lines []string
}

func (c *consoleLog) listen(ev any) {
	var line string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		line = "exception: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			line += " " + ev.ExceptionDetails.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		line = "console." + string(ev.Type) + ":"
		for _, a := range ev.Args {
			line += " " + string(a.Value) + a.Description
		}
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, line)
}

func (c *consoleLog) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.lines, "\n")
}

// liveUI is a real controller on the real swarm with the API and the UI
// on one port.
type liveUI struct {
	url string
	ts  *httptest.Server
	cli *client.Client
	ns  string

	mu sync.Mutex
	// lastEventIDs holds the Last-Event-ID of each event-stream request.
	lastEventIDs []string
}

// streams returns the Last-Event-ID header of every stream opened so far.
func (l *liveUI) streams() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lastEventIDs)
}

// startLiveUI runs a controller with a store, an event stream, the live
// snapshot and the UI. Applications: web (manual, live drift detection)
// and db (manual), both on long intervals so that only the UI's requests
// and the swarm's events make them reconcile.
func startLiveUI(t *testing.T) *liveUI {
	t.Helper()
	return startLiveUIWith(t, liveUIOptions{})
}

// liveUIOptions vary the applications of startLiveUIWith.
type liveUIOptions struct {
	// Automated makes web automated: the controller installs it and
	// corrects its drift on its own.
	Automated bool
}

// startLiveUIWith is startLiveUI with opts.
func startLiveUIWith(t *testing.T, opts liveUIOptions) *liveUI {
	t.Helper()
	cli := harness.RequireSwarm(t)
	git := harness.StartGitServer(t, harness.GitServerOptions{})
	l := &liveUI{cli: cli, ns: harness.Name(t, "ui")}
	image := harness.TestImage(t, cli, harness.ImageOptions{Version: "v1"})
	harness.CleanupStack(t, cli, l.ns)
	harness.CleanupStack(t, cli, l.ns+"-db")
	repo := git.CreateRepo(t, "app")
	repo.Commit(t, "main", map[string]string{"compose.yaml": fmt.Sprintf(`services:
  web:
    image: ${IMAGE}
    deploy:
      endpoint_mode: dnsrr
      replicas: 1
    ports:
      - target: 8080
        published: %d
        mode: host
`, harness.FreePort(t)), ".env": "IMAGE=" + image + "\n"})
	apps := fmt.Sprintf(`apiVersion: skep/v1
applications:
  - name: web
    release: %[1]s
    source: {repo: %[2]s, revision: main}
    syncPolicy: {automated: %[3]t, interval: 1h, resolveImage: never}
    driftDetection: live
  - name: db
    release: %[1]s-db
    source: {repo: %[2]s, revision: main}
    syncPolicy: {automated: false, interval: 1h, resolveImage: never}
`, l.ns, repo.URL, opts.Automated)
	appsFile := filepath.Join(t.TempDir(), "apps.yaml")
	if err := os.WriteFile(appsFile, []byte(apps), 0o644); err != nil {
		t.Fatal(err)
	}

	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	gitCache, err := gitsource.New(gitsource.Options{Dir: t.TempDir(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := skepswarm.Connect(t.Context(), skepswarm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close() })
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), store.FileName), store.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	broker := notify.NewBroker(notify.BrokerOptions{Logger: logger})
	recorder := notify.NewRecorder(notify.RecorderOptions{Store: db, Publish: broker, Logger: logger})
	var reg notify.Registry
	reg.Register(recorder)
	ctrl, err := reconcile.New(reconcile.Options{
		ControllerID: harness.Name(t, "ctl"), AppSet: appset.FileSource{Path: appsFile}, AppSetInterval: time.Hour,
		Git: gitCache, Notifier: &reg, Logger: logger,
		Destinations: map[string]reconcile.Remote{"": {Engine: engine, Live: skepswarm.NewWatcher(engine, skepswarm.WatcherOptions{Logger: logger})}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := api.NewTokens(
		api.TokenSpec{Name: "root", Role: api.RoleAdmin, Digest: wire.NewToken(adminToken).Digest()},
		api.TokenSpec{Name: "eve", Role: api.RoleViewer, Apps: []string{"web*"}, Digest: wire.NewToken(viewerToken).Digest()},
	)
	if err != nil {
		t.Fatal(err)
	}
	webUI, err := ui.New()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Reconciler: api.NewController(ctrl), Authorizer: tokens, Broker: broker,
		Notifiers: func() []string { return []string{"log", "store"} },
		EventLog:  db, Syncs: db, UI: webUI, Logger: logger, Heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); _ = ctrl.Run(ctx) }()
	go func() { defer wg.Done(); _ = recorder.Run(ctx) }()
	go func() { defer wg.Done(); srv.Run(ctx) }()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/events" && r.Header.Get("Accept") == "text/event-stream" {
			l.mu.Lock()
			l.lastEventIDs = append(l.lastEventIDs, r.Header.Get("Last-Event-ID"))
			l.mu.Unlock()
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		broker.Close()
		ts.CloseClientConnections()
		ts.Close()
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("controller did not stop within 30s")
		}
	})
	l.url, l.ts = ts.URL, ts
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		return ctrl.Ready(t.Context()) == nil, "controller not ready"
	})
	return l
}

// page drives one tab and saves screenshots.

type page struct {
	console *consoleLog
	ctx     context.Context
	dir     string
	base    string
}

func (p *page) run(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitFor polls the JavaScript expression until it is true, failing the
// test with the page's main text after timeout.
func (p *page) waitFor(t *testing.T, what, expression string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, timeout)
	defer cancel()
	// The poll's own timeout (30 s unless told) would cut a longer wait short.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expression, chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(timeout))); err != nil {
		text, _ := chromedp.Run(p.ctx, chromedp.Text(chromedp.CSS("main")))
		t.Fatalf("waiting for %s: %v\npage: %s\nconsole:\n%s", what, err, text, p.console)
	}
}

// has returns an expression true when selector matches an element whose
// text contains want.
func has(selector, want string) string {
	s, _ := json.Marshal(selector)
	w, _ := json.Marshal(want)
	return fmt.Sprintf(`[...document.querySelectorAll(%s)].some(e => e.textContent.includes(%s))`, s, w)
}

func (p *page) eval(t *testing.T, expression string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expression))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expression, err)
	}
	return v
}

// do runs a JavaScript statement for its effect.
func (p *page) do(t *testing.T, statement string) {
	t.Helper()
	p.eval(t, "(() => { "+statement+"; return true })()")
}

func (p *page) screenshot(t *testing.T, name string) {
	t.Helper()
	p.run(t, "settle", chromedp.Sleep(300*time.Millisecond))
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	file := filepath.Join(p.dir, name+".png")
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", file)
}

func (p *page) open(t *testing.T, hash string) {
	t.Helper()
	p.do(t, fmt.Sprintf("location.hash = %q", hash))
}

func (p *page) signIn(t *testing.T, token string) {
	t.Helper()
	p.run(t, "sign in",
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.CSS(`form.signin button[type="submit"]`)))
	p.waitFor(t, "the live indicator", `document.querySelector('#live[data-state="live"]') !== null`, 20*time.Second)
}

func screenshotDir(t *testing.T) string {
	dir := os.Getenv(envScreenshots)
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBrowserFollowsSyncAndDriftLiveAndOffersOnlyWhatTheRoleAllows(t *testing.T) {
	chromium := requireChromium(t)
	l := startLiveUI(t)
	console := &consoleLog{}
	p := &page{console: console, ctx: browser(t, chromium, console), dir: screenshotDir(t), base: l.url}

	p.run(t, "load the page", chromedp.Navigate(l.url+"/"))
	p.waitFor(t, "the sign-in form", `document.querySelector('#token') !== null`, 20*time.Second)
	p.screenshot(t, "01-sign-in")

	t.Run("an unknown token is refused as such", func(t *testing.T) {
		p.run(t, "sign in badly", chromedp.SendKeys(chromedp.ID("token"), "nope"), chromedp.Click(chromedp.CSS(`form.signin button[type="submit"]`)))
		p.waitFor(t, "the 401 message", has(".signin .alert", "401"), 10*time.Second)
		p.do(t, `document.getElementById('token').value = ''`)
	})

	p.signIn(t, adminToken)
	p.do(t, `window.skepNoReload = true`)

	t.Run("the list shows both applications out of sync", func(t *testing.T) {
		p.waitFor(t, "both rows", `document.querySelectorAll('tr[data-app]').length === 2`, 30*time.Second)
		p.waitFor(t, "web out of sync", has(`tr[data-app="web"]`, "out-of-sync"), 30*time.Second)
		p.screenshot(t, "02-applications")
	})

	t.Run("the diff shows the install line by line with glyphs", func(t *testing.T) {
		p.open(t, "#/app/web/diff")
		p.waitFor(t, "the release diff", has(".release-diff", "install"), 20*time.Second)
		if !p.eval(t, `document.querySelectorAll('.line.add .glyph').length > 0 && [...document.querySelectorAll('.line.add .sr')].every(e => e.textContent.startsWith('added'))`) {
			t.Error("the diff has no added line with a + glyph and a spoken label")
		}
		p.screenshot(t, "03-diff")
	})

	t.Run("sync shows the dry run, then events arrive and the state changes without a reload", func(t *testing.T) {
		p.open(t, "#/app/web/events")
		p.waitFor(t, "the events tab", `document.querySelector('ol.timeline') !== null`, 20*time.Second)
		p.run(t, "press sync", chromedp.Click(chromedp.Search(`//button[normalize-space()="Sync…"]`)))
		p.waitFor(t, "the sync preview", has(`[aria-label="Sync preview"]`, "install"), 30*time.Second)
		p.screenshot(t, "04-sync-preview")
		p.run(t, "confirm", chromedp.Click(chromedp.Search(`//button[normalize-space()="Sync now"]`)))
		p.waitFor(t, "sync-started in the timeline", `document.querySelector('li.event[data-type="sync-started"]') !== null`, 60*time.Second)
		p.waitFor(t, "sync-succeeded in the timeline", has(`li.event[data-type="sync-succeeded"]`, "by root"), 2*time.Minute)
		p.waitFor(t, "the header to say synced", has(".app-head .states", "synced"), 30*time.Second)
		p.screenshot(t, "05-application-events")
		if !p.eval(t, `window.skepNoReload === true`) {
			t.Error("the page reloaded")
		}
	})

	t.Run("the overview shows the release, its service and its task", func(t *testing.T) {
		p.open(t, "#/app/web")
		p.waitFor(t, "a running task", has(".service", "1/1 running"), 2*time.Minute)
		p.screenshot(t, "06-application")
	})

	t.Run("an out-of-band change shows as drift", func(t *testing.T) {
		svc, err := findService(t.Context(), l.cli, l.ns+"_web")
		if err != nil {
			t.Fatal(err)
		}
		spec := svc.Spec
		spec.TaskTemplate.ContainerSpec.Env = append(spec.TaskTemplate.ContainerSpec.Env, "CHANGED_BY=hand")
		if _, err := l.cli.ServiceUpdate(t.Context(), svc.ID, svc.Version, spec, dswarm.ServiceUpdateOptions{}); err != nil {
			t.Fatalf("out-of-band update: %v", err)
		}
		p.waitFor(t, "the drift finding", has("table.drift", "env"), 2*time.Minute)
		p.screenshot(t, "07-drift")
		p.open(t, "#/")
		p.waitFor(t, "the list to show the finding", has(`tr[data-app="web"]`, "1 finding"), 30*time.Second)
		if !p.eval(t, `window.skepNoReload === true`) {
			t.Error("the page reloaded")
		}
	})

	t.Run("a dropped stream shows reconnecting and resumes with Last-Event-ID", func(t *testing.T) {
		p.do(t, `window.liveStates = []; new MutationObserver(() => liveStates.push(document.getElementById('live').textContent))
			.observe(document.getElementById('live'), {childList: true, subtree: true, characterData: true})`)
		before := len(l.streams())
		l.ts.CloseClientConnections()
		p.waitFor(t, "reconnecting, then live", `liveStates.includes('Reconnecting…') && liveStates[liveStates.length - 1] === 'Live'`, 30*time.Second)
		streams := l.streams()
		if len(streams) <= before || streams[len(streams)-1] == "" {
			t.Errorf("event streams opened (Last-Event-ID of each) %q; want a new one that names the last event seen", streams)
		}
	})

	t.Run("history lists the revision and the sync with its actor", func(t *testing.T) {
		p.open(t, "#/app/web/history")
		p.waitFor(t, "the sync row", has("table", "root"), 20*time.Second)
		p.waitFor(t, "the revision row", has("table", "#1"), 20*time.Second)
		p.screenshot(t, "08-history")
	})

	t.Run("events of every application and the controller screen", func(t *testing.T) {
		p.open(t, "#/events")
		p.waitFor(t, "web's events", has(`li.event a`, "web"), 20*time.Second)
		if !p.eval(t, `(() => { const types = [...document.querySelectorAll('li.event')].map(e => e.dataset.type);
			return types.indexOf('sync-succeeded') < types.indexOf('sync-started'); })()`) {
			t.Error("the timeline does not show the newest event first")
		}
		p.screenshot(t, "09-events")
		p.open(t, "#/controller")
		p.waitFor(t, "the admin details", has("main", "Swarm node"), 20*time.Second)
		p.waitFor(t, "the active notifiers", has("main", "store"), 20*time.Second)
		p.waitFor(t, "the orphaned releases, none here", has("main", "Orphaned releases"), 20*time.Second)
		p.screenshot(t, "10-controller")
	})

	t.Run("at phone width and in dark mode the list still reads", func(t *testing.T) {
		p.open(t, "#/")
		p.run(t, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
			emulateMedia([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}))
		p.waitFor(t, "the rows", `document.querySelectorAll('tr[data-app]').length === 2`, 20*time.Second)
		p.screenshot(t, "11-applications-phone-dark")
		p.run(t, "desktop", chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
			_, err := cdp.Call(ctx, target, emulation.ClearDeviceMetricsOverride, cdp.Empty{})
			return err
		}), emulateMedia(nil))
	})

	t.Run("a viewer gets no sync button and a 403 shown as such", func(t *testing.T) {
		p.run(t, "sign out", chromedp.Click(chromedp.ID("signout")))
		p.signIn(t, viewerToken)
		p.waitFor(t, "web only", `document.querySelectorAll('tr[data-app]').length === 1 && document.querySelector('tr[data-app="web"]') !== null`, 20*time.Second)
		p.open(t, "#/app/web")
		p.waitFor(t, "the read-only note", has(".actions", "read only"), 20*time.Second)
		if p.eval(t, `[...document.querySelectorAll('button')].some(b => /sync|refresh|roll back/i.test(b.textContent))`) {
			t.Error("a viewer is offered a sync, refresh or rollback button")
		}
		p.open(t, "#/app/db")
		p.waitFor(t, "the 403", has(".alert", "403 Forbidden"), 20*time.Second)
		p.screenshot(t, "12-viewer-403")
	})
}

// emulateMedia sets the CSS media features the page sees; nil clears them.
func emulateMedia(features []*emulation.MediaFeature) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: features})
		return err
	})
}

// The stream parser must give the same frames however the network splits
// the bytes: heartbeats are comments, data lines join, CRLF works, and an
// id without data moves the last id without dispatching.
func TestBrowserStreamParserReadsFramesSplitAnywhere(t *testing.T) {
	chromium := requireChromium(t)
	webUI, err := ui.New()
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(webUI)
	defer ts.Close()
	console := &consoleLog{}
	p := &page{console: console, ctx: browser(t, chromium, console)}
	p.run(t, "load the page", chromedp.Navigate(ts.URL+"/"))
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	results, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(async () => {
		const { FrameParser } = await import('/ui/api.js');
		const text = ': heartbeat\n\nid: 7\nevent: sync-started\ndata: {"application":"web"}\n\n' +
			': heartbeat\r\n\r\nid: 8\r\nevent: x\r\ndata: a\r\ndata:b\r\n\r\nid: 9\n\n';
		const out = [];
		for (const size of [1, 2, 3, 5, 7, 1000]) {
			const frames = [];
			let comments = 0;
			const parser = new FrameParser((f) => frames.push(f), () => comments++);
			for (let i = 0; i < text.length; i += size) parser.push(text.slice(i, i + size));
			out.push(JSON.stringify({ frames, comments, lastId: parser.lastId }));
		}
		return out;
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("run the parser: %v\nconsole:\n%s", err, console)
	}
	want := `{"frames":[{"id":"7","event":"sync-started","data":"{\"application\":\"web\"}"},{"id":"8","event":"x","data":"a\nb"}],"comments":2,"lastId":"9"}`
	if len(results) != 6 {
		t.Fatalf("got %d results, want 6", len(results))
	}
	for i, got := range results {
		if got != want {
			t.Errorf("split %d: parsed\n%s\nwant\n%s", i, got, want)
		}
	}
}

func findService(ctx context.Context, cli *client.Client, name string) (dswarm.Service, error) {
	list, err := cli.ServiceList(ctx, dswarm.ServiceListOptions{})
	if err != nil {
		return dswarm.Service{}, fmt.Errorf("list services: %w", err)
	}
	for _, s := range list {
		if s.Spec.Name == name {
			return s, nil
		}
	}
	return dswarm.Service{}, fmt.Errorf("no service %s", name)
}

// An application the controller synced on its own, and whose drift it
// corrected, has a last sync: the list and the application page say when
// and what started it, not "never" (which is what they said while only
// requested syncs counted).
func TestBrowserShowsTheLastSyncTheControllerMadeOnItsOwn(t *testing.T) {
	chromium := requireChromium(t)
	l := startLiveUIWith(t, liveUIOptions{Automated: true})
	console := &consoleLog{}
	p := &page{console: console, ctx: browser(t, chromium, console), dir: screenshotDir(t), base: l.url}
	lastSyncFact := `(() => { const dt = [...document.querySelectorAll('.app-head dt')].find(e => e.textContent === 'Last sync');
		return dt ? dt.nextElementSibling.textContent : ''; })()`
	lastSyncIs := func(want string) string {
		w, _ := json.Marshal(want)
		return lastSyncFact + `.includes(` + string(w) + `)`
	}

	p.run(t, "load the page", chromedp.Navigate(l.url+"/#/app/web"))
	p.signIn(t, adminToken)

	t.Run("the install the controller made for the commit in git", func(t *testing.T) {
		p.waitFor(t, "the header to say synced", has(".app-head .states", "synced"), 2*time.Minute)
		p.waitFor(t, "a last sync started by git", lastSyncIs("new commit in git"), 30*time.Second)
		if p.eval(t, lastSyncIs("never")) {
			t.Error("the application page says the last sync was never")
		}
		p.screenshot(t, "40-last-sync-git")
	})

	t.Run("the drift correction the controller made", func(t *testing.T) {
		svc, err := findService(t.Context(), l.cli, l.ns+"_web")
		if err != nil {
			t.Fatal(err)
		}
		spec := svc.Spec
		spec.TaskTemplate.ContainerSpec.Env = append(spec.TaskTemplate.ContainerSpec.Env, "CHANGED_BY=hand")
		if _, err := l.cli.ServiceUpdate(t.Context(), svc.ID, svc.Version, spec, dswarm.ServiceUpdateOptions{}); err != nil {
			t.Fatalf("out-of-band update: %v", err)
		}
		p.waitFor(t, "a last sync that corrected drift", lastSyncIs("drift correction")+" && "+lastSyncIs("by the controller"), 2*time.Minute)
		p.screenshot(t, "41-last-sync-drift")
	})

	t.Run("the list says the same", func(t *testing.T) {
		p.open(t, "#/")
		p.waitFor(t, "web's last sync cell", has(`tr[data-app="web"] td[data-label="Last sync"]`, "drift correction"), 30*time.Second)
		if !p.eval(t, has(`tr[data-app="db"] td[data-label="Last sync"]`, "never")) {
			t.Error("db, which nothing synced, does not say never")
		}
	})
	if text := console.String(); strings.Contains(text, "exception") {
		t.Errorf("the page threw:\n%s", text)
	}
}

package ui_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skep-cd/skep/wire"
)

// BenchmarkListFirstRender measures, in headless Chromium against a stub
// API with 100 applications, the time from the start of navigation until
// every row of the applications list is in the page, as the page's own
// clock (performance.now) reports it. Run with:
//
//	go test -run '^$' -bench ListFirstRender -benchtime 10x ./ui/
func BenchmarkListFirstRender(b *testing.B) {
	chromium := requireChromium(b)
	apps := map[string]wire.ApplicationDetail{}
	for i := range 100 {
		name := fmt.Sprintf("app-%03d", i)
		apps[name] = wire.ApplicationDetail{Application: wire.Application{Name: name, Repo: "git@git.internal:" + name + ".git",
			TargetRevision: "main", Releases: []string{name}, Sync: "synced", Health: "healthy", Drift: []wire.DriftFinding{},
			Phase: wire.PhaseIdle, Services: wire.ServiceCounts{Services: 2, Running: 2, Desired: 2}}}
	}
	stub := startStubAPI(b, apps)
	ctx := browser(b, chromium, &consoleLog{})
	// Sign in once: the token stays in the tab's session storage.
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(sctx, chromedp.Navigate(stub.url+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "any-token"),
		chromedp.Click(chromedp.CSS(`form.signin button[type="submit"]`))); err != nil {
		b.Fatalf("sign in: %v", err)
	}
	all := `document.querySelectorAll('tr[data-app]').length === 100`
	if _, err := chromedp.Run(sctx, chromedp.Poll[bool](all)); err != nil {
		b.Fatalf("the list after sign-in: %v", err)
	}
	var total float64
	b.ResetTimer()
	for range b.N {
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := chromedp.Do(ictx, chromedp.Navigate(stub.url+"/")); err != nil {
			cancel()
			b.Fatalf("navigate: %v", err)
		}
		// The poll answers the page's own clock once every row is there.
		ms, err := chromedp.Run(ictx, chromedp.Poll[float64](`(`+all+`) ? performance.now() : null`,
			chromedp.WithPollingInterval(2*time.Millisecond)))
		cancel()
		if err != nil {
			b.Fatalf("render the list: %v", err)
		}
		total += ms
	}
	b.ReportMetric(total/float64(b.N), "ms/first-render")
}

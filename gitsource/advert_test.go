package gitsource

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// checkoutReadme checks commit out of url and reads its README.
func checkoutReadme(t *testing.T, c *Cache, url, commit string) string {
	t.Helper()
	tree, err := c.Checkout(t.Context(), url, commit)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Release()
	data, err := tree.ReadFile("README")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestAFetchRightAfterAnLsRemoteIsServedItsAdvertisement(t *testing.T) {
	root := t.TempDir()
	h := newHistory(t, filepath.Join(root, "app"))
	server := serveHTTP(t, root, "", "", "")
	c := newCache(t, Options{})
	url := server.URL + "/app"
	requests := func(step string, refs, packs int64) {
		t.Helper()
		if got := server.count("/info/refs"); got != refs {
			t.Errorf("%s: server saw %d ref advertisements, want %d", step, got, refs)
		}
		if got := server.count("/git-upload-pack"); got != packs {
			t.Errorf("%s: server saw %d pack requests, want %d", step, got, packs)
		}
	}

	// A first deploy: the tick's ls-remote, then the clone's first fetch.
	head, err := c.Resolve(t.Context(), url, "main")
	if err != nil || head != h.head {
		t.Fatalf("Resolve(main) = %s, %v; want %s", head, err, h.head)
	}
	if got := checkoutReadme(t, c, url, head); got != "head\n" {
		t.Errorf("README at main = %q", got)
	}
	requests("first checkout", 1, 1)

	// A push seen by a webhook: the ls-remote after Forget, then the fetch
	// of the new commit, with every branch and tag mirrored as before.
	pushed := h.repo.commit("pushed", map[string]string{"README": "pushed\n"})
	c.Forget(url)
	moved, err := c.Resolve(t.Context(), url, "main")
	if err != nil || moved != pushed {
		t.Fatalf("Resolve(main) after push = %s, %v; want %s", moved, err, pushed)
	}
	if got := checkoutReadme(t, c, url, moved); got != "pushed\n" {
		t.Errorf("README after push = %q", got)
	}
	requests("fetch of a pushed commit", 2, 2)
	if sha, err := c.Resolve(t.Context(), url, h.feature[:10]); err != nil || sha != h.feature {
		t.Errorf("the fetch did not mirror branch feature: %s, %v", sha, err)
	}

	// A Forget between the ls-remote and the fetch means the remote moved
	// again: the fetch asks for itself.
	again := h.repo.commit("again", map[string]string{"README": "again\n"})
	c.Forget(url)
	if _, err := c.ListRefs(t.Context(), url); err != nil {
		t.Fatal(err)
	}
	c.Forget(url)
	if got := checkoutReadme(t, c, url, again); got != "again\n" {
		t.Errorf("README after a second push = %q", got)
	}
	requests("fetch after Forget", 4, 3)
}

func TestAnAdvertisementOlderThanRefsMaxAgeIsNotServed(t *testing.T) {
	root := t.TempDir()
	h := newHistory(t, filepath.Join(root, "app"))
	server := serveHTTP(t, root, "", "", "")
	c := newCache(t, Options{RefsMaxAge: time.Nanosecond})
	url := server.URL + "/app"
	if _, err := c.ListRefs(t.Context(), url); err != nil {
		t.Fatal(err)
	}
	if got := checkoutReadme(t, c, url, h.head); got != "head\n" {
		t.Errorf("README at main = %q", got)
	}
	if got := server.count("/info/refs"); got != 2 {
		t.Errorf("server saw %d ref advertisements, want 2: the fetch must ask for itself", got)
	}
}

func TestARedirectedRepositoryIsFetchedWhereItMoved(t *testing.T) {
	root := t.TempDir()
	h := newHistory(t, filepath.Join(root, "app"))
	server := serveHTTP(t, root, "", "", "")
	// The old address answers every request with a redirect to the new
	// one, as a forge does for a renamed repository.
	old := serveRedirect(t, server.URL, http.StatusMovedPermanently, nil)
	c := newCache(t, Options{})
	url := old.URL + "/old"
	head, err := c.Resolve(t.Context(), url, "main")
	if err != nil || head != h.head {
		t.Fatalf("Resolve(main) through a redirect = %s, %v; want %s", head, err, h.head)
	}
	if got := checkoutReadme(t, c, url, head); got != "head\n" {
		t.Errorf("README at main through a redirect = %q", got)
	}
	if got := server.count("/info/refs"); got != 2 {
		t.Errorf("server saw %d ref advertisements, want 2: a redirected answer is not kept", got)
	}
}

// The ls-remotes of one tick run together, up to the per-host limit; the
// next tick's reuse their connections instead of dialling all but two
// anew (net/http's default idle connections per host).
func TestLsRemotesThatRanTogetherKeepTheirConnections(t *testing.T) {
	const n = DefaultMaxPerHost
	root := t.TempDir()
	var urls []string
	server := serveHTTP(t, root, "", "", "")
	for i := range n {
		newHistory(t, filepath.Join(root, fmt.Sprintf("app%d", i)))
		urls = append(urls, fmt.Sprintf("%s/app%d", server.URL, i))
	}
	// Each request waits until every request of its tick has arrived, so
	// that the tick holds n connections at once.
	var arrived, due atomic.Int64
	server.before = func(*http.Request) {
		arrived.Add(1)
		for deadline := time.Now().Add(10 * time.Second); arrived.Load() < due.Load() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	c := newCache(t, Options{})
	tick := func() {
		due.Add(n)
		var wg sync.WaitGroup
		for _, url := range urls {
			wg.Go(func() {
				c.Forget(url)
				if _, err := c.ListRefs(t.Context(), url); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	tick()
	if got := server.conns.Load(); got != n {
		t.Fatalf("the first tick opened %d connections, want %d: its ls-remotes did not run together", got, n)
	}
	tick()
	if got := server.conns.Load() - n; got != 0 {
		t.Errorf("the second tick opened %d connections, want 0: the first tick's were not kept", got)
	}
}

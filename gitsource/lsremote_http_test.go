package gitsource

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
)

// Every ls-remote asks the remote, and an answer the same as the one
// before is not decoded again; a changed answer is.
func TestAnUnchangedAdvertisementIsNotDecodedAgain(t *testing.T) {
	root := t.TempDir()
	h := newHistory(t, filepath.Join(root, "app"))
	server := serveHTTP(t, root, "", "", "")
	c := newCache(t, Options{})
	url := server.URL + "/app"
	list := func(step string, wantHead string, wantDecodes int64) Refs {
		t.Helper()
		c.Forget(url)
		refs, err := c.ListRefs(t.Context(), url)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got := refs.byName["refs/heads/main"]; got != wantHead {
			t.Errorf("%s: main = %s, want %s", step, got, wantHead)
		}
		if got := c.decodes.Load(); got != wantDecodes {
			t.Errorf("%s: %d advertisements decoded, want %d", step, got, wantDecodes)
		}
		return refs
	}
	first := list("first ls-remote", h.head, 1)
	again := list("unchanged remote", h.head, 1)
	if fmt.Sprint(again.byName) != fmt.Sprint(first.byName) || again.head != first.head {
		t.Errorf("an unchanged remote listed %v (head %q), before %v (head %q)", again.byName, again.head, first.byName, first.head)
	}
	pushed := h.repo.commit("pushed", map[string]string{"README": "pushed\n"})
	list("after a push", pushed, 2)
	list("unchanged after the push", pushed, 2)
	if got := server.count("/info/refs"); got != 4 {
		t.Errorf("server saw %d ref advertisements, want 4: every ls-remote asks", got)
	}
}

// A repository that redirects is listed through go-git, whose policy
// keeps credentials from the origin it moved to; the direct request is
// not tried again.
func TestARedirectedLsRemoteCarriesNoCredentialToTheNewOrigin(t *testing.T) {
	root := t.TempDir()
	h := newHistory(t, filepath.Join(root, "app"))
	moved := serveHTTP(t, root, "", "", "")
	var mu sync.Mutex
	var movedAuth []string
	moved.before = func(req *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		movedAuth = append(movedAuth, req.Header.Get("Authorization"))
	}
	var oldAsked, oldAuthorised int
	old := serveRedirect(t, moved.URL, http.StatusFound, func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		oldAsked++
		if u, p, ok := r.BasicAuth(); ok && u == "ci" && p == "s3cret-pw" {
			oldAuthorised++
		}
	})
	password := writeFile(t, t.TempDir(), "password", "s3cret-pw\n")
	creds := mustCredentials(t, fmt.Sprintf("credentials:\n  - urlPrefix: %s/old\n    username: ci\n    passwordFile: %s\n", old.URL, password))
	c := newCache(t, Options{Credentials: creds})
	url := old.URL + "/old"
	for i := range 2 {
		c.Forget(url)
		head, err := c.Resolve(t.Context(), url, "main")
		if err != nil || head != h.head {
			t.Fatalf("Resolve(main) %d through a redirect = %s, %v; want %s", i+1, head, err, h.head)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// The first ls-remote: the direct request, then go-git's; the second:
	// go-git's alone.
	if oldAsked != 3 || oldAuthorised != 3 {
		t.Errorf("the old address was asked %d times, %d with the credential; want 3 and 3", oldAsked, oldAuthorised)
	}
	if len(movedAuth) != 2 {
		t.Errorf("the new address was asked %d times, want 2", len(movedAuth))
	}
	for _, a := range movedAuth {
		if a != "" {
			t.Errorf("the new origin was sent Authorization %q", a)
		}
	}
}

package gitsource

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
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

// listAgain asks url's remote for its refs anew, as a tick does.
func listAgain(t *testing.T, c *Cache, url, want string) {
	t.Helper()
	c.Forget(url)
	head, err := c.Resolve(t.Context(), url, "main")
	if err != nil || head != want {
		t.Fatalf("Resolve(main) = %s, %v; want %s", head, err, want)
	}
}

func TestLsRemotesKeepOneConnection(t *testing.T) {
	root := t.TempDir()
	h := newHistory(t, filepath.Join(root, "app"))
	server := serveHTTP(t, root, "", "", "")
	c := newCache(t, Options{})
	for range 5 {
		listAgain(t, c, server.URL+"/app", h.head)
	}
	if got := server.conns.Load(); got != 1 {
		t.Errorf("five ls-remotes opened %d connections, want 1", got)
	}
}

// A kept connection the server has closed (its idle timeout, a restart)
// fails the next request, which is sent again on a new connection.
func TestAKeptConnectionTheServerClosedIsReplaced(t *testing.T) {
	root := t.TempDir()
	h := newHistory(t, filepath.Join(root, "app"))
	server := serveHTTP(t, root, "", "", "")
	c := newCache(t, Options{})
	listAgain(t, c, server.URL+"/app", h.head)
	server.srv.CloseClientConnections()
	listAgain(t, c, server.URL+"/app", h.head)
	if got := server.conns.Load(); got != 2 {
		t.Errorf("the ls-remotes opened %d connections, want 2", got)
	}
	if got := server.count("/info/refs"); got != 2 {
		t.Errorf("server answered %d ref advertisements, want 2", got)
	}
}

// A server that says it closes the connection after each answer is not
// asked again on it.
func TestAConnectionTheServerClosesIsNotKept(t *testing.T) {
	root := t.TempDir()
	h := newHistory(t, filepath.Join(root, "app"))
	server := newGitServer(t, root, "", "", "")
	server.srv.Config.SetKeepAlivesEnabled(false)
	server.srv.Start()
	server.URL = server.srv.URL
	c := newCache(t, Options{})
	for range 3 {
		listAgain(t, c, server.URL+"/app", h.head)
	}
	if got := server.conns.Load(); got != 3 {
		t.Errorf("three ls-remotes opened %d connections, want 3", got)
	}
}

// trustServer makes c trust srv's certificate; c has made no request yet.
func trustServer(c *Cache, srv *httptest.Server) {
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c.transport.TLSClientConfig = &tls.Config{RootCAs: roots}
}

func TestHTTPSListsAndFetchesAndChecksTheCertificate(t *testing.T) {
	root := t.TempDir()
	h := newHistory(t, filepath.Join(root, "app"))
	server := newGitServer(t, root, "", "", "")
	server.srv.StartTLS()
	server.URL = server.srv.URL
	url := server.URL + "/app"

	// Not trusted: the system's roots do not hold the test certificate.
	c := newCache(t, Options{})
	_, err := c.Resolve(t.Context(), url, "main")
	var re *RemoteError
	if !errors.As(err, &re) || !re.Transient() || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Resolve over https with an unknown certificate = %v, want a transient RemoteError about the certificate", err)
	}
	if got := server.count("/info/refs"); got != 0 {
		t.Errorf("an untrusted server was sent %d requests", got)
	}

	c = newCache(t, Options{})
	trustServer(c, server.srv)
	listAgain(t, c, url, h.head)
	listAgain(t, c, url, h.head)
	if got := checkoutReadme(t, c, url, h.head); got != "head\n" {
		t.Errorf("README at main over https = %q", got)
	}
	if got := server.count("/info/refs"); got != 2 {
		t.Errorf("server answered %d ref advertisements, want 2 (the fetch is served the second)", got)
	}
}

// A caller that gives up in the middle of an ls-remote gets its
// context's error.
func TestAnLsRemoteGivenUpOnReturnsTheContextsError(t *testing.T) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); hang.Close() })
	c := newCache(t, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-arrived
		cancel()
	}()
	if _, err := c.ListRefs(ctx, hang.URL+"/app.git"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ListRefs given up on = %v, want context.Canceled", err)
	}
}

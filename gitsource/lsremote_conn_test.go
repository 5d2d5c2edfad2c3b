package gitsource

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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
	if kc := lsRemoteConns.get(server.URL); kc != nil {
		_ = kc.Close()
		t.Error("a connection the server closes was kept")
	}
}

// trustServer makes the git clients of this process trust srv's
// certificate until the test ends.
func trustServer(t *testing.T, srv *httptest.Server) {
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	saved := gitPool.TLSClientConfig
	gitPool.TLSClientConfig = &tls.Config{RootCAs: roots}
	t.Cleanup(func() { gitPool.TLSClientConfig = saved })
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

	trustServer(t, server.srv)
	c = newCache(t, Options{})
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
// context's error, and the connection is not kept.
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
	if kc := lsRemoteConns.get(hang.URL); kc != nil {
		t.Errorf("the connection of a call given up on was kept")
	}
}

func TestAnIdleKeptConnectionIsClosedWhenItExpires(t *testing.T) {
	client, server := net.Pipe()
	t.Cleanup(func() { _ = server.Close() })
	p := &connPool{idle: map[string][]*keptConn{}}
	kc := &keptConn{Conn: client, key: "http://h:80"}
	p.put(kc)
	p.expire(kc)
	if got := p.get("http://h:80"); got != nil {
		t.Error("an expired connection was handed out")
	}
	if len(p.idle) != 0 {
		t.Errorf("the pool still holds %v", p.idle)
	}
	_ = client.SetDeadline(time.Now().Add(time.Second))
	if _, err := client.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("writing to an expired connection: %v, want it closed", err)
	}
}

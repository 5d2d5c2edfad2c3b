package gitsource

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/skep-cd/skep/egress"
)

// serveHTTPOn is serveHTTP on address (such as "127.0.0.2:0").
func serveHTTPOn(t *testing.T, address, root string) *gitServer {
	t.Helper()
	ln, err := net.Listen("tcp", address)
	if err != nil {
		t.Fatalf("listen on %s (all of 127.0.0.0/8 is loopback on Linux): %v", address, err)
	}
	s := newGitServer(t, root, "", "", "")
	_ = s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
	s.URL = s.srv.URL
	return s
}

// A remote on an address the policy allows that redirects to one it
// refuses gains nothing, whether its ls-remote or a later fetch is
// redirected there: the hop is refused at connect time (the policy holds
// the dialler, not only the first host), the call fails for good naming
// the refusal, and the refused server is never connected to. The
// repository behind it is real, so following the redirect would have
// succeeded.
func TestARedirectToARefusedAddressIsNeverDialled(t *testing.T) {
	policy, err := egress.Parse("127.0.0.1/32")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// allowedAdverts is how many advertisement requests are sent on
		// to the repository on the allowed address before every request
		// is sent to the refused one.
		allowedAdverts int64
	}{
		{"the ls-remote is redirected", 0},
		{"the fetch after the ls-remote is redirected", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			h := newHistory(t, filepath.Join(root, "app"))
			internal := serveHTTPOn(t, "127.0.0.2:0", root)
			direct := serveHTTP(t, root, "", "", "")
			var adverts atomic.Int64
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				to := internal.URL
				if strings.HasSuffix(r.URL.Path, "/info/refs") && adverts.Add(1) <= tc.allowedAdverts {
					to = direct.URL
				}
				http.Redirect(w, r, to+r.URL.RequestURI(), http.StatusFound)
			}))
			t.Cleanup(front.Close)
			c := newCache(t, Options{CheckHost: policy.CheckHost, DialContext: policy.Dialer().DialContext})
			url := front.URL + "/app"
			_, err := c.Resolve(t.Context(), url, "main")
			if err == nil {
				_, err = c.Checkout(t.Context(), url, h.head)
			}
			var re *RemoteError
			if !errors.As(err, &re) || re.Transient() || !errors.Is(err, ErrHostRefused) || !errors.Is(err, egress.ErrRefused) ||
				!strings.Contains(err.Error(), "127.0.0.2 is an internal address") {
				t.Errorf("a remote redirecting to 127.0.0.2 = %v, want a final RemoteError wrapping ErrHostRefused and naming the refused address", err)
			}
			if n := internal.conns.Load(); n != 0 {
				t.Errorf("the refused address was connected to %d times, want 0", n)
			}
		})
	}
}

// go-git's one client per process sends a request only on the transport
// of the Cache whose call it belongs to; a request of no call has no
// dialler of its own and is refused rather than dialled by default.
func TestAGitRequestOutsideACallIsRefused(t *testing.T) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://127.0.0.1:1/app/info/refs?service=git-upload-pack", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (callTransport{}).RoundTrip(req); !errors.Is(err, errNoCall) {
		t.Errorf("RoundTrip of a request outside a call = %v, want errNoCall", err)
	}
}

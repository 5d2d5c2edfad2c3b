package gitsource

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// A fetch over smart HTTP starts as an ls-remote does, with
// GET <repo>/info/refs?service=git-upload-pack, and a fetch follows an
// ls-remote whenever a tick finds a commit the clone does not have: a
// first deploy, a push seen by a tick or a webhook. The fetch is served
// the answer that ls-remote received instead of asking again, while that
// answer still serves ListRefs (Options.RefsMaxAge, ended early by
// Forget): one request fewer per new commit, which on a git server that
// runs a process per request (git http-backend) is a process fewer. The
// commit being fetched was resolved from that very answer. The pack is
// still asked of the remote, which checks the wants against its refs of
// now, as it does for any stateless HTTP fetch.

// maxAdvert is the largest advertisement kept for reuse; a larger one
// (tens of thousands of refs) is decoded as it streams in, not kept, and
// asked again by the fetch.
const maxAdvert = 4 << 20

// advert is one ref advertisement as the remote sent it.
type advert struct {
	header http.Header
	body   []byte
}

// response is a as the answer to req.
func (a *advert) response(req *http.Request) *http.Response {
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        a.header.Clone(),
		Body:          io.NopCloser(bytes.NewReader(a.body)),
		ContentLength: int64(len(a.body)),
		Request:       req,
	}
}

// advertCall carries, in a fetch's context, the advertisement that
// advertTransport serves its first advertisement request. One call's
// requests are sent one after the other, so it needs no lock.
type advertCall struct {
	serve *advert
}

type advertKey struct{}

// withAdvertCall returns ctx carrying call for advertTransport.
func withAdvertCall(ctx context.Context, call *advertCall) context.Context {
	return context.WithValue(ctx, advertKey{}, call)
}

// advertTransport passes every request on unchanged, except the first
// upload-pack advertisement of a call that carries one to serve.
type advertTransport struct{ next http.RoundTripper }

func (t advertTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	call, _ := req.Context().Value(advertKey{}).(*advertCall)
	if call == nil || call.serve == nil || !isUploadPackAdvert(req) {
		return t.next.RoundTrip(req)
	}
	a := call.serve
	call.serve = nil
	return a.response(req), nil
}

// isUploadPackAdvert reports whether req asks for the refs a fetch or an
// ls-remote starts from.
func isUploadPackAdvert(req *http.Request) bool {
	return req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/info/refs") &&
		req.URL.Query().Get("service") == "git-upload-pack"
}

// maxIdlePerHost is how many idle connections to one host the git client
// keeps: at least as many as a cache's calls to one host run at once
// (Options.MaxPerHost), or every tick whose ls-remotes ran together
// dials anew all but net/http's default of 2.
const maxIdlePerHost = 16

// newTransport returns the transport of every HTTP request of one Cache
// to a git remote: http.DefaultTransport's settings (proxy from the
// environment, HTTP/2, timeouts), keeping maxIdlePerHost idle connections
// per host, each connection made by dial when it is set.
func newTransport(dial func(ctx context.Context, network, address string) (net.Conn, error)) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = maxIdlePerHost
	if dial != nil {
		t.DialContext = dial
	}
	return t
}

// errNoCall means go-git made an HTTP request outside a Cache's remote
// call, which would have no transport and so no Options.DialContext.
var errNoCall = errors.New("git HTTP request outside a remote call of a cache")

type transportKey struct{}

// withTransport returns ctx carrying t, the transport callTransport sends
// the call's requests on.
func withTransport(ctx context.Context, t http.RoundTripper) context.Context {
	return context.WithValue(ctx, transportKey{}, t)
}

// callTransport sends each request on the transport its context carries:
// go-git keeps one client per process, and each Cache dials as its own
// Options say. A request whose context carries none is refused.
type callTransport struct{}

func (callTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t, _ := req.Context().Value(transportKey{}).(http.RoundTripper)
	if t == nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errNoCall
	}
	return t.RoundTrip(req)
}

// go-git picks a transport by URL scheme from one table per process; this
// package is the process's only go-git user. The client is go-git's own
// default (its redirect policy, whose every hop is sent on the calling
// Cache's transport and so dialled by its Options.DialContext), with the
// advertisement step above in front.
func init() {
	c := githttp.NewClient(&http.Client{Transport: advertTransport{next: callTransport{}}})
	client.InstallProtocol("http", c)
	client.InstallProtocol("https", c)
}

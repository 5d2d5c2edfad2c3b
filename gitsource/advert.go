package gitsource

import (
	"bytes"
	"context"
	"io"
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
// (tens of thousands of refs) is passed on, read once, and asked again by
// the fetch.
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

// advertCall is what one remote call asks of advertTransport, carried in
// its context: keep the advertisement it receives (an ls-remote), or be
// served one instead of asking (a fetch). One call's requests are sent
// one after the other, so it needs no lock.
type advertCall struct {
	record bool
	got    *advert // what a recording call received
	serve  *advert // what a serving call's first advertisement request gets
}

type advertKey struct{}

// withAdvertCall returns ctx carrying call for advertTransport.
func withAdvertCall(ctx context.Context, call *advertCall) context.Context {
	return context.WithValue(ctx, advertKey{}, call)
}

// advertTransport passes every request on unchanged, except the
// upload-pack advertisement of a call that carries an advertCall.
type advertTransport struct{ next http.RoundTripper }

func (t advertTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	call, _ := req.Context().Value(advertKey{}).(*advertCall)
	if call == nil || !isUploadPackAdvert(req) {
		return t.next.RoundTrip(req)
	}
	if a := call.serve; a != nil {
		call.serve = nil
		return a.response(req), nil
	}
	res, err := t.next.RoundTrip(req)
	// A redirected repository is not kept: go-git moves its endpoint by
	// the answer's URL, which a kept answer would no longer carry.
	if err != nil || !call.record || req.Response != nil || res.StatusCode != http.StatusOK {
		return res, err
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxAdvert+1))
	if err != nil {
		_ = res.Body.Close()
		return nil, err
	}
	if len(body) > maxAdvert {
		res.Body = readCloser{io.MultiReader(bytes.NewReader(body), res.Body), res.Body}
		return res, nil
	}
	_ = res.Body.Close()
	call.got = &advert{header: res.Header.Clone(), body: body}
	res.Body, res.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return res, nil
}

// isUploadPackAdvert reports whether req asks for the refs a fetch or an
// ls-remote starts from.
func isUploadPackAdvert(req *http.Request) bool {
	return req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/info/refs") &&
		req.URL.Query().Get("service") == "git-upload-pack"
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// maxIdlePerHost is how many idle connections to one host the git client
// keeps: at least as many as a cache's calls to one host run at once
// (Options.MaxPerHost), or every tick whose ls-remotes ran together
// dials anew all but net/http's default of 2.
const maxIdlePerHost = 16

// go-git picks a transport by URL scheme from one table per process; this
// package is the process's only go-git user. The client is go-git's own
// default (its redirect policy; http.DefaultTransport's settings, in a
// pool of its own that keeps maxIdlePerHost idle connections) with the
// advertisement step above in front.
func init() {
	pool := http.DefaultTransport.(*http.Transport).Clone()
	pool.MaxIdleConnsPerHost = maxIdlePerHost
	c := githttp.NewClient(&http.Client{Transport: advertTransport{next: pool}})
	client.InstallProtocol("http", c)
	client.InstallProtocol("https", c)
}

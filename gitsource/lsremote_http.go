package gitsource

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// An ls-remote over smart HTTP is one GET of
// <repo>/info/refs?service=git-upload-pack, and a quiet tick is little
// more than that request. It is made here, with net/http on the Cache's
// transport (connections kept, Options.DialContext dialling), rather than
// through go-git's Remote.List, which builds a remote, a storage and a
// session for every call and decodes every answer anew. An answer byte
// for byte the same as the one before is not decoded again: its refs are
// those of the one before.
//
// A redirect is not followed here. go-git follows it under its own policy
// (credentials never cross to another origin, https is never downgraded),
// on the same transport, so a repository that answered with a redirect is
// listed through go-git from then on.

// errRedirected means the remote answered an ls-remote with a redirect.
var errRedirected = errors.New("ls-remote was redirected")

// uploadPackAdvert is what an ls-remote asks of a repository's URL.
const uploadPackAdvert = "/info/refs?service=git-upload-pack"

// noRedirect is an http.Client's CheckRedirect that follows none: the
// caller hands a redirected repository to go-git.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// decodedAdvert is the advertisement an http remote's refs were last
// decoded from, by its hash, with those refs.
type decodedAdvert struct {
	sum  [sha256.Size]byte
	refs Refs
}

// httpAuth returns auth as what an HTTP request can carry, and false when
// it cannot (a method for another transport). No credential is nil, true.
func httpAuth(auth transport.AuthMethod) (githttp.AuthMethod, bool) {
	if auth == nil {
		return nil, true
	}
	a, ok := auth.(githttp.AuthMethod)
	return a, ok
}

// lsRemoteHTTP asks r's http(s) remote for its refs and returns them with
// the advertisement they came from (nil when it was too large to keep).
// It fails with errRedirected when the remote answered with a redirect;
// any other failure is go-git's error for the same answer, so classify
// reads it alike. The caller holds r.refsLock, which guards r.decoded.
func (c *Cache) lsRemoteHTTP(ctx context.Context, r *repo, auth githttp.AuthMethod) (Refs, *advert, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.loc.transport+uploadPackAdvert, nil)
	if err != nil {
		return Refs{}, nil, err
	}
	req.Header.Set("User-Agent", capability.DefaultAgent())
	req.Header.Set("Accept", "*/*")
	if auth != nil {
		auth.SetAuth(req)
	}
	res, err := c.lsClient.Do(req)
	if err != nil {
		return Refs{}, nil, err
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode >= http.StatusMultipleChoices && res.StatusCode < http.StatusBadRequest {
		return Refs{}, nil, errRedirected
	}
	if err := githttp.NewErr(res); err != nil {
		return Refs{}, nil, err
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxAdvert+1))
	if err != nil {
		return Refs{}, nil, err
	}
	if len(body) > maxAdvert {
		r.decoded = nil
		c.decodes.Add(1)
		refs, err := decodeAdvert(io.MultiReader(bytes.NewReader(body), res.Body))
		return refs, nil, err
	}
	adv := &advert{header: res.Header.Clone(), body: body}
	sum := sha256.Sum256(body)
	if d := r.decoded; d != nil && d.sum == sum {
		return d.refs, adv, nil
	}
	c.decodes.Add(1)
	refs, err := decodeAdvert(bytes.NewReader(body))
	if err != nil {
		r.decoded = nil
		return Refs{}, nil, err
	}
	r.decoded = &decodedAdvert{sum: sum, refs: refs}
	return refs, adv, nil
}

// decodeAdvert reads an upload-pack advertisement into Refs, annotated
// tags peeled, as go-git's Remote.List with git.AppendPeeled lists them.
// A repository with no commits has no refs.
func decodeAdvert(rd io.Reader) (Refs, error) {
	ar := packp.NewAdvRefs()
	if err := ar.Decode(rd); err != nil {
		if errors.Is(err, packp.ErrEmptyAdvRefs) {
			return newRefs(nil), nil
		}
		return Refs{}, err
	}
	if ar.IsEmpty() {
		return newRefs(nil), nil
	}
	all, err := ar.AllReferences()
	if err != nil {
		return Refs{}, err
	}
	list := make([]*plumbing.Reference, 0, len(all)+len(ar.Peeled))
	for _, ref := range all {
		list = append(list, ref)
	}
	for name, h := range ar.Peeled {
		list = append(list, plumbing.NewReferenceFromStrings(name+"^{}", h.String()))
	}
	return newRefs(list), nil
}

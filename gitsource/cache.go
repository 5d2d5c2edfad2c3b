package gitsource

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Defaults for the zero values of Options.
const (
	// DefaultRefsMaxAge is how old an ls-remote answer may be and still
	// serve a caller. It is shorter than any interval (the floor is 10s),
	// so every tick sees the remote as of that tick, not a previous one;
	// applications of one repository ticking together still share a call,
	// and concurrent callers always wait for the one in flight.
	DefaultRefsMaxAge = time.Second
	DefaultKeepTrees  = 8
	// DefaultMaxPerHost bounds the load one controller puts on a forge,
	// which may throttle a client opening many connections at once.
	DefaultMaxPerHost = 4
	// DefaultTimeout bounds one ls-remote or fetch: a git host that
	// accepts a connection and never answers must not hold a reconcile,
	// and the per-host slot it took, for ever. It leaves a first clone of
	// a large repository room to finish.
	DefaultTimeout = 2 * time.Minute
)

// Options configures a Cache. The zero value of each field but Dir means
// its default.
type Options struct {
	// Dir holds the clones and exported trees; it is created if missing.
	Dir string
	// Credentials for remotes; nil means none.
	Credentials *Credentials
	// Logger receives debug lines about remote calls; nil discards them.
	Logger *slog.Logger
	// RefsMaxAge is how long one ls-remote answer serves ListRefs and
	// Resolve for a repository (DefaultRefsMaxAge). Forget ends it early.
	RefsMaxAge time.Duration
	// KeepTrees is how many exported trees nobody holds are kept per
	// repository, least recently used removed first (DefaultKeepTrees).
	KeepTrees int
	// MaxPerHost bounds concurrent ls-remote and fetch calls to one host,
	// shared by all repositories on it (DefaultMaxPerHost).
	MaxPerHost int
	// Timeout bounds one ls-remote or fetch, from when it has a host slot
	// (DefaultTimeout). A call past it fails with a transient RemoteError
	// that says so.
	Timeout time.Duration
	// CheckHost, when set, is asked before every ls-remote and fetch of a
	// network remote (not a local path) with the remote's host name or
	// address, without port or brackets; an error refuses the call, wrapped
	// in ErrHostRefused, and no connection is made. The controller passes
	// its egress policy here. It is called concurrently.
	CheckHost func(ctx context.Context, host string) error
	// DialContext makes every connection to an http(s) remote: each
	// ls-remote and fetch, and every hop of a redirect either follows.
	// nil means a net.Dialer. The controller passes its egress policy's,
	// which refuses an internal address at connect time, whatever name or
	// redirect led to it; such a refusal fails the call with
	// ErrHostRefused.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
	// MaxFileBytes caps one file (one git object) a fetch may receive and a
	// checkout may export (DefaultMaxFileBytes). It is what one fetch may
	// hold in memory: go-git reads each received object whole.
	MaxFileBytes int64
	// MaxPackBytes caps what one fetch may receive (DefaultMaxPackBytes,
	// or twice MaxFileBytes when that is more).
	MaxPackBytes int64
	// MaxTreeBytes and MaxTreeFiles cap one exported tree, in the bytes of
	// its files and the number of its files, directories and links
	// (DefaultMaxTreeBytes, DefaultMaxTreeFiles).
	MaxTreeBytes int64
	MaxTreeFiles int
	// A repository over a cap is refused with a *LimitError (ErrTooLarge),
	// and nothing of the fetch or the export is kept.
}

// Cache is the shared clone cache. Its methods are safe for concurrent
// use: calls for one repository are serialised where they touch its clone,
// calls for different repositories run in parallel.
type Cache struct {
	dir        string
	creds      *Credentials
	log        *slog.Logger
	refsMaxAge time.Duration
	keepTrees  int
	maxPerHost int
	timeout    time.Duration
	checkHost  func(ctx context.Context, host string) error
	// transport carries every HTTP request to a remote (advert.go), and
	// lsClient makes the ls-remotes' on it (lsremote_http.go).
	transport *http.Transport
	lsClient  *http.Client
	caps      caps

	mu    sync.Mutex
	repos map[string]*repo         // by location key
	byURL map[string]*repo         // by the URL as callers spell it
	hosts map[string]chan struct{} // per-host semaphores

	listRefs, fetches, exports atomic.Int64
	decodes                    atomic.Int64 // HTTP ref advertisements decoded (lsremote_http.go)
}

// repo is the state of one repository URL.
type repo struct {
	loc   location
	dir   string
	trees *treeSet

	lock chan struct{} // held while using git (the clone) or exporting
	git  *git.Repository
	// refused, held under lock, is the last fetch refused for a cap and
	// the refs the remote advertised then; nil after a fetch that passed.
	refused *refusal

	refsLock chan struct{} // held during ls-remote, so callers share one
	refsMu   sync.Mutex
	refs     Refs
	refsErr  error
	refsAt   time.Time
	advert   *advert // the HTTP advertisement refs came from; nil for other transports

	// Held under refsLock, like the ls-remote that sets them.
	decoded    *decodedAdvert // the last HTTP advertisement decoded, by hash
	redirected bool           // the remote redirected an ls-remote: go-git lists it
}

// Stats counts remote calls and exports since New. Tests use it to prove
// that work is shared; operators may export it as metrics.
type Stats struct {
	ListRefs int64 // ls-remote calls made to remotes
	Fetches  int64 // fetches made to remotes
	Exports  int64 // trees exported
}

// New returns a Cache keeping its state in o.Dir.
func New(o Options) (*Cache, error) {
	if o.Dir == "" {
		return nil, errors.New("git cache: directory is required")
	}
	if o.RefsMaxAge < 0 || o.KeepTrees < 0 || o.MaxPerHost < 0 || o.Timeout < 0 ||
		o.MaxFileBytes < 0 || o.MaxPackBytes < 0 || o.MaxTreeBytes < 0 || o.MaxTreeFiles < 0 {
		return nil, errors.New("git cache: refs max age, trees kept, per-host limit, timeout and caps must not be negative")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("git cache: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("git cache: %w", err)
	}
	c := &Cache{
		dir: dir, creds: o.Credentials, log: o.Logger,
		refsMaxAge: o.RefsMaxAge, keepTrees: o.KeepTrees, maxPerHost: o.MaxPerHost, timeout: o.Timeout,
		checkHost: o.CheckHost, transport: newTransport(o.DialContext), caps: newCaps(o),
		repos: map[string]*repo{}, byURL: map[string]*repo{}, hosts: map[string]chan struct{}{},
	}
	c.lsClient = &http.Client{Transport: c.transport, CheckRedirect: noRedirect}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.refsMaxAge == 0 {
		c.refsMaxAge = DefaultRefsMaxAge
	}
	if c.keepTrees == 0 {
		c.keepTrees = DefaultKeepTrees
	}
	if c.maxPerHost == 0 {
		c.maxPerHost = DefaultMaxPerHost
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	return c, nil
}

// Stats returns the counters so far.
func (c *Cache) Stats() Stats {
	return Stats{ListRefs: c.listRefs.Load(), Fetches: c.fetches.Load(), Exports: c.exports.Load()}
}

// repo returns the state of repoURL, creating its directory on first use.
// Spellings of one URL that normalise alike share one repo and one clone.
func (c *Cache) repo(repoURL string) (*repo, error) {
	// Every tick asks by the same spelling: it is parsed once.
	c.mu.Lock()
	r, ok := c.byURL[repoURL]
	c.mu.Unlock()
	if ok {
		return r, nil
	}
	l, err := parseLocation(repoURL)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.repos[l.key]; ok {
		c.byURL[repoURL] = r
		return r, nil
	}
	sum := sha256.Sum256([]byte(l.key))
	dir := filepath.Join(c.dir, hex.EncodeToString(sum[:10]))
	trees := filepath.Join(dir, "trees")
	if err := os.MkdirAll(trees, 0o755); err != nil {
		return nil, err
	}
	_ = os.WriteFile(filepath.Join(dir, "repository"), []byte(RedactURL(l.key)+"\n"), 0o644)
	r = &repo{
		loc: l, dir: dir, trees: loadTreeSet(trees, c.keepTrees),
		lock: make(chan struct{}, 1), refsLock: make(chan struct{}, 1),
	}
	c.repos[l.key] = r
	c.byURL[repoURL] = r
	return r, nil
}

// name is the repository as errors and logs show it.
func (r *repo) name() string { return RedactURL(r.loc.key) }

// acquire takes a slot of sem, a channel used as a lock or semaphore, or
// returns ctx's error; unlike sync.Mutex it gives up when ctx ends.
func acquire(ctx context.Context, sem chan struct{}) error {
	if err := ctx.Err(); err != nil {
		return err // select would pick at random when both are ready
	}
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// hostSlot takes one of host's MaxPerHost slots and returns the function
// that gives it back.
func (c *Cache) hostSlot(ctx context.Context, host string) (func(), error) {
	c.mu.Lock()
	sem, ok := c.hosts[host]
	if !ok {
		sem = make(chan struct{}, c.maxPerHost)
		c.hosts[host] = sem
	}
	c.mu.Unlock()
	if err := acquire(ctx, sem); err != nil {
		return nil, err
	}
	return func() { <-sem }, nil
}

// allowed asks Options.CheckHost about r's host; nil for a local
// repository or when no check is set.
func (c *Cache) allowed(ctx context.Context, r *repo) error {
	if c.checkHost == nil || r.loc.scheme == "file" {
		return nil
	}
	u, err := url.Parse(r.loc.host) // scheme://host[:port], as parse made it
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrHostRefused, r.loc.host, err)
	}
	if err := c.checkHost(ctx, u.Hostname()); err != nil {
		return fmt.Errorf("%w: %w", ErrHostRefused, err)
	}
	return nil
}

// auth returns the go-git auth method of the credential matching r, nil
// when none matches (the remote is asked anonymously). Secrets are read
// now, so a rotated file is used at the next remote call.
func (c *Cache) auth(r *repo) (transport.AuthMethod, error) {
	cr, ok := c.creds.match(r.loc)
	if !ok {
		return nil, nil
	}
	a, err := cr.auth(r.loc)
	if err != nil {
		return nil, fmt.Errorf("%w: credential %s: %w", ErrAuth, cr.source, err)
	}
	return a, nil
}

// ListRefs returns the refs the remote of repo advertises. One ls-remote
// answers all callers for Options.RefsMaxAge; concurrent callers wait for
// the same call. A failure is remembered just as long, so a broken remote
// is not asked once per application. An empty repository has no refs.
func (c *Cache) ListRefs(ctx context.Context, repoURL string) (Refs, error) {
	r, err := c.repo(repoURL)
	if err != nil {
		return Refs{}, err
	}
	if refs, err, ok := c.cachedRefs(r); ok {
		return refs, err
	}
	if err := acquire(ctx, r.refsLock); err != nil {
		return Refs{}, err
	}
	defer func() { <-r.refsLock }()
	if refs, err, ok := c.cachedRefs(r); ok {
		return refs, err
	}
	refs, adv, err := c.lsRemote(ctx, r)
	if err != nil && ctx.Err() != nil {
		return Refs{}, err // the caller gave up; the remote may be fine
	}
	r.refsMu.Lock()
	r.refs, r.refsErr, r.refsAt, r.advert = refs, err, time.Now(), adv
	r.refsMu.Unlock()
	return refs, err
}

// cachedRefs returns r's remembered ls-remote answer, and ok false when
// there is none younger than RefsMaxAge.
func (c *Cache) cachedRefs(r *repo) (Refs, error, bool) {
	r.refsMu.Lock()
	defer r.refsMu.Unlock()
	if r.refsAt.IsZero() || time.Since(r.refsAt) >= c.refsMaxAge {
		return Refs{}, nil, false
	}
	return r.refs, r.refsErr, true
}

// Forget drops the remembered ls-remote answer for repo, so the next
// ListRefs or Resolve asks the remote. Call it when a webhook says the
// repository changed.
func (c *Cache) Forget(repoURL string) {
	r, err := c.repo(repoURL)
	if err != nil {
		return
	}
	r.refsMu.Lock()
	r.refsAt, r.advert = time.Time{}, nil
	r.refsMu.Unlock()
}

// freshAdvert returns the advertisement r's remembered refs came from
// while they still serve ListRefs (see advert.go), and drops it: a fetch
// needs it once.
func (c *Cache) freshAdvert(r *repo) *advert {
	r.refsMu.Lock()
	defer r.refsMu.Unlock()
	a := r.advert
	r.advert = nil
	if a == nil || r.refsAt.IsZero() || time.Since(r.refsAt) >= c.refsMaxAge {
		return nil
	}
	return a
}

// lsRemote asks r's remote for its refs, and returns with them the HTTP
// advertisement they came from, for the fetch that may follow (nil over
// other transports). It never takes r.lock, so listing never waits for a
// fetch.
func (c *Cache) lsRemote(ctx context.Context, r *repo) (Refs, *advert, error) {
	if err := c.allowed(ctx, r); err != nil {
		return Refs{}, nil, &RemoteError{Op: "ls-remote", Repo: r.name(), Err: err}
	}
	auth, err := c.auth(r)
	if err != nil {
		return Refs{}, nil, &RemoteError{Op: "ls-remote", Repo: r.name(), Err: err}
	}
	done, err := c.hostSlot(ctx, r.loc.host)
	if err != nil {
		return Refs{}, nil, err
	}
	defer done()
	start := time.Now()
	c.listRefs.Add(1)
	call, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	refs, adv, err := c.listRemote(call, r, auth)
	err = c.timedOut(ctx, call, err)
	if err != nil {
		return Refs{}, nil, &RemoteError{Op: "ls-remote", Repo: r.name(), Err: classify(err, auth)}
	}
	c.log.DebugContext(ctx, "git ls-remote", "repo", r.name(), "refs", len(refs.byName), "duration", time.Since(start))
	return refs, adv, nil
}

// listRemote is an ls-remote's request: lsRemoteHTTP's over http(s), until
// the remote redirects; go-git's Remote.List over other transports and
// after a redirect, with no advertisement to keep.
func (c *Cache) listRemote(ctx context.Context, r *repo, auth transport.AuthMethod) (Refs, *advert, error) {
	if ha, ok := httpAuth(auth); ok && !r.redirected && (r.loc.scheme == "http" || r.loc.scheme == "https") {
		refs, adv, err := c.lsRemoteHTTP(ctx, r, ha)
		if !errors.Is(err, errRedirected) {
			return refs, adv, err
		}
		r.redirected = true
		c.log.InfoContext(ctx, "git remote redirects; following it from now on", "repo", r.name())
	}
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{r.loc.transport}})
	list, err := remote.ListContext(withTransport(ctx, c.transport), &git.ListOptions{Auth: auth, PeelingOption: git.AppendPeeled})
	// go-git reports a repository with no commits as an error; to us it
	// is a remote with no refs, where every revision is not found.
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		list, err = nil, nil
	}
	if err != nil {
		return Refs{}, nil, err
	}
	return newRefs(list), nil, nil
}

// Resolve returns the full commit sha that revision names in repo: a
// branch, a tag (annotated tags peeled), "HEAD" or "" (the remote's default
// branch), a full ref name, or a commit sha (full, or at least 7 hex
// digits). Names are looked up in ListRefs's answer, so resolving many
// revisions of one repository costs one ls-remote per RefsMaxAge. A sha no
// ref points at is looked up in the local clone, fetching once if it is not
// there; only commits reachable from a branch or tag can be found. A name
// or sha that does not exist is ErrRevisionNotFound.
func (c *Cache) Resolve(ctx context.Context, repoURL, revision string) (string, error) {
	refs, err := c.ListRefs(ctx, repoURL)
	if err != nil {
		return "", err
	}
	sha, err := refs.resolve(revision)
	if err == nil || !isSHA(revision) || !errors.Is(err, ErrRevisionNotFound) {
		return sha, c.wrapResolve(repoURL, revision, err)
	}
	r, err := c.repo(repoURL)
	if err != nil {
		return "", err
	}
	sha, err = c.withClone(ctx, r, func(g *git.Repository) (string, error) {
		sha, err := findCommit(g, revision)
		if !errors.Is(err, ErrRevisionNotFound) {
			return sha, err
		}
		if err := c.fetch(ctx, r, g); err != nil {
			return "", err
		}
		return findCommit(g, revision)
	})
	return sha, c.wrapResolve(repoURL, revision, err)
}

// wrapResolve names the revision and repository in err, unless it is a
// RemoteError, which names the repository already.
func (c *Cache) wrapResolve(repoURL, revision string, err error) error {
	var re *RemoteError
	if err == nil || errors.As(err, &re) {
		return err
	}
	return fmt.Errorf("resolve %q in %s: %w", revision, RedactURL(repoURL), err)
}

// withClone runs f with the repository's clone, opened or created, while
// holding the repository's lock.
func (c *Cache) withClone(ctx context.Context, r *repo, f func(*git.Repository) (string, error)) (string, error) {
	if err := acquire(ctx, r.lock); err != nil {
		return "", err
	}
	defer func() { <-r.lock }()
	if r.git == nil {
		g, err := openClone(filepath.Join(r.dir, "git"), r.loc.transport, c.caps)
		if err != nil {
			return "", fmt.Errorf("open clone of %s: %w", r.name(), err)
		}
		r.git = g
	}
	return f(r.git)
}

// openClone opens the bare clone at dir, creating it when missing or
// unreadable (a crash while it was being created). Its storage refuses a
// fetch over caps, and streams objects larger than a small buffer from
// disk rather than reading them whole.
func openClone(dir, remoteURL string, caps caps) (*git.Repository, error) {
	storage := func() *cappedStorage {
		fs := filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRUDefault(),
			filesystem.Options{LargeObjectThreshold: largeObject})
		return &cappedStorage{Storage: fs, dir: dir, maxPack: caps.pack, maxFile: caps.file}
	}
	if g, err := git.Open(storage(), nil); err == nil {
		return g, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	g, err := git.Init(storage(), nil)
	if err != nil {
		return nil, err
	}
	_, err = g.CreateRemote(&config.RemoteConfig{
		Name:  "origin",
		URLs:  []string{remoteURL},
		Fetch: []config.RefSpec{"+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"},
	})
	return g, err
}

// refusal is a fetch refused for a cap (its error) and the refs the
// remote advertised when it was.
type refusal struct {
	refs map[string]string
	err  error
}

// fetch brings every branch and tag of the remote into the clone. A
// fetch refused for a cap is refused again without asking the remote
// while the refs last listed are the same: the same pack would come.
func (c *Cache) fetch(ctx context.Context, r *repo, g *git.Repository) error {
	r.refsMu.Lock()
	listed, refs := !r.refsAt.IsZero(), r.refs.byName
	r.refsMu.Unlock()
	if r.refused != nil && listed && maps.Equal(r.refused.refs, refs) {
		return r.refused.err
	}
	err := c.fetchRemote(ctx, r, g, nil)
	r.refused = nil
	if errors.Is(err, ErrTooLarge) && listed {
		r.refused = &refusal{refs: refs, err: err}
	}
	return err
}

// fetchRemote is fetch's call to the remote: every branch and tag, or
// only specs when not nil (FetchRef's one ref), which then prune nothing.
func (c *Cache) fetchRemote(ctx context.Context, r *repo, g *git.Repository, specs []config.RefSpec) error {
	if err := c.allowed(ctx, r); err != nil {
		return &RemoteError{Op: "fetch", Repo: r.name(), Err: err}
	}
	auth, err := c.auth(r)
	if err != nil {
		return &RemoteError{Op: "fetch", Repo: r.name(), Err: err}
	}
	done, err := c.hostSlot(ctx, r.loc.host)
	if err != nil {
		return err
	}
	defer done()
	start := time.Now()
	c.fetches.Add(1)
	call, cancel := context.WithTimeout(withTransport(ctx, c.transport), c.timeout)
	defer cancel()
	reused := false
	if a := c.freshAdvert(r); a != nil {
		call, reused = withAdvertCall(call, &advertCall{serve: a}), true
	}
	err = g.FetchContext(call, &git.FetchOptions{
		RemoteName: "origin",
		RefSpecs:   specs,
		Auth:       auth,
		Tags:       git.NoTags, // the refspecs already take every tag
		// Force and Prune mirror the remote: a force-pushed or deleted
		// branch must not keep resolving to its old commit here.
		Force: true,
		Prune: specs == nil,
	})
	err = c.timedOut(ctx, call, err)
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return &RemoteError{Op: "fetch", Repo: r.name(), Err: classify(err, auth)}
	}
	c.log.DebugContext(ctx, "git fetch", "repo", r.name(), "refs_reused", reused, "duration", time.Since(start))
	return nil
}

// timedOut says, for a remote call made under call (ctx bounded by the
// timeout) that failed with err, that the remote did not answer in time
// when that is why it failed; any other error is returned as it is.
func (c *Cache) timedOut(ctx, call context.Context, err error) error {
	if err == nil || ctx.Err() != nil || !errors.Is(call.Err(), context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("no answer within %s: %w", c.timeout, err)
}

// findCommit returns the commit a full or abbreviated sha names in the
// clone, peeling an annotated tag object.
func findCommit(g *git.Repository, sha string) (string, error) {
	sha = strings.ToLower(sha)
	var candidates []plumbing.Hash
	if isFullSHA(sha) {
		candidates = []plumbing.Hash{plumbing.NewHash(sha)}
	} else {
		type prefixer interface {
			HashesWithPrefix([]byte) ([]plumbing.Hash, error)
		}
		p, ok := g.Storer.(prefixer)
		if !ok {
			return "", errors.New("clone storage cannot look up abbreviated shas")
		}
		// The storer matches whole bytes; an odd last digit is checked
		// against the full names below.
		b, _ := hex.DecodeString(sha[:len(sha)/2*2])
		hashes, err := p.HashesWithPrefix(b)
		if err != nil {
			return "", err
		}
		for _, h := range hashes {
			if strings.HasPrefix(h.String(), sha) {
				candidates = append(candidates, h)
			}
		}
	}
	found := map[plumbing.Hash]bool{}
	for _, h := range candidates {
		if commit, ok := peelToCommit(g, h); ok {
			found[commit] = true
		}
	}
	switch len(found) {
	case 0:
		return "", ErrRevisionNotFound
	case 1:
		for h := range found {
			return h.String(), nil
		}
	}
	return "", errors.New("abbreviated sha is ambiguous")
}

// peelToCommit follows tag objects from h to the commit they name; ok is
// false for a tree or blob. Tags may point at tags, so a few levels are
// followed, but a bounded number: a crafted chain must not spin.
func peelToCommit(g *git.Repository, h plumbing.Hash) (plumbing.Hash, bool) {
	for range 10 {
		if _, err := g.CommitObject(h); err == nil {
			return h, true
		}
		tag, err := g.TagObject(h)
		if err != nil {
			return plumbing.ZeroHash, false
		}
		h = tag.Target
	}
	return plumbing.ZeroHash, false
}

// Checkout pins commit (a full sha, as Resolve returns) of repo for one
// reconcile: it fetches only when the commit is not in the local clone yet,
// exports the commit's files once, and returns the shared Tree. Call
// Release when done; the tree stays until then however many other
// commits are checked out. A commit the remote does not have is
// ErrRevisionNotFound.
func (c *Cache) Checkout(ctx context.Context, repoURL, commit string) (*Tree, error) {
	if !isFullSHA(commit) {
		return nil, fmt.Errorf("checkout %s: commit %q is not a full sha", RedactURL(repoURL), commit)
	}
	commit = strings.ToLower(commit)
	r, err := c.repo(repoURL)
	if err != nil {
		return nil, err
	}
	if r.trees.hold(commit) {
		return c.tree(r, commit), nil
	}
	_, err = c.withClone(ctx, r, func(g *git.Repository) (string, error) {
		if r.trees.hold(commit) {
			return "", nil // exported while we waited for the lock
		}
		h := plumbing.NewHash(commit)
		if _, err := g.CommitObject(h); err != nil {
			if err := c.fetch(ctx, r, g); err != nil {
				return "", err
			}
			if _, err := g.CommitObject(h); err != nil {
				return "", fmt.Errorf("%w: commit %s", ErrRevisionNotFound, commit)
			}
		}
		return "", c.export(ctx, r, g, h)
	})
	if err != nil {
		var re *RemoteError
		if errors.As(err, &re) {
			return nil, err
		}
		return nil, fmt.Errorf("checkout %s at %s: %w", r.name(), ShortCommit(commit), err)
	}
	return c.tree(r, commit), nil
}

// tree returns a Tree for commit, which the caller has already held once
// in r.trees; Release gives that hold back.
func (c *Cache) tree(r *repo, commit string) *Tree {
	return &Tree{
		dir:     filepath.Join(r.trees.dir, commit),
		commit:  commit,
		release: func() { r.trees.release(commit) },
	}
}

// export writes the tree of h to a temporary directory and moves it into
// place held once, so no reader ever sees a half-written tree.
func (c *Cache) export(ctx context.Context, r *repo, g *git.Repository, h plumbing.Hash) error {
	start := time.Now()
	tmp, err := os.MkdirTemp(r.trees.dir, ".export-")
	if err != nil {
		return err
	}
	if err := exportTree(ctx, g, h, tmp, c.caps); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := r.trees.add(h.String(), tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	c.exports.Add(1)
	c.log.DebugContext(ctx, "git tree exported", "repo", r.name(), "revision", h.String(), "duration", time.Since(start))
	return nil
}

// ReadFile returns the file at name (slash-separated, relative to the
// repository root) in commit of repo, checking the commit out as Checkout
// does. Absolute paths and ".." are refused (fs.ErrInvalid) before any
// remote is asked; symlinks leading outside the tree are ErrOutsideTree.
func (c *Cache) ReadFile(ctx context.Context, repoURL, commit, name string) ([]byte, error) {
	if err := checkRelPath(name); err != nil {
		return nil, err
	}
	t, err := c.Checkout(ctx, repoURL, commit)
	if err != nil {
		return nil, err
	}
	defer t.Release()
	data, err := t.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", RedactURL(repoURL), ShortCommit(commit), err)
	}
	return data, nil
}

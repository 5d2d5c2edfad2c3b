// Package chartrepo fetches charts from a Helm-style chart repository: an
// index.yaml over HTTPS that lists, per chart, its versions with the URL and
// the SHA-256 digest of each .tgz archive.
//
// An application pins one exact version (no ranges). Fetch reads the index,
// takes that version's digest, and returns the chart's files from the
// archive cached under Options.Dir, named by digest, or downloads, verifies
// and caches it first. Every download and every response is size-capped;
// the archive is extracted into memory with caps on files and bytes.
//
// The package must never follow a URL, from the index or a redirect, to a
// scheme other than https (plain http only for loopback hosts, when
// Options.AllowHTTP says so); never extract outside memory (an entry that
// is absolute, climbs with "..", is a link or a device is refused); and
// never trust a cached archive without checking its digest against the
// index, on every read. Credentials come from secret.Source and never
// reach a URL, an error or a log; a repository URL carrying userinfo is
// refused. A *Repos is safe for concurrent use, and concurrent fetches of
// one archive download it once.
//
// The format and the caps are documented in docs/charts.md.
package chartrepo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Defaults of Options; a zero field takes its default.
const (
	DefaultMaxArchive   = 20 << 20
	DefaultMaxIndex     = 10 << 20
	DefaultMaxExtracted = 64 << 20
	DefaultMaxFiles     = 1000
)

// Errors a caller branches on. Each is wrapped in a message naming the
// repository, the chart and the version. ErrNotFound, ErrDigestMismatch,
// ErrTooLarge, ErrUnsafeArchive and ErrInsecureURL do not heal by retrying
// the same configuration unless the repository changes; other errors
// (network, status codes) may be transient.
var (
	// ErrNotFound: the index lists no such chart, or not that version.
	ErrNotFound = errors.New("chart version not found")
	// ErrDigestMismatch: a downloaded archive's SHA-256 is not the index's.
	ErrDigestMismatch = errors.New("digest mismatch")
	// ErrTooLarge: an index, an archive or its content is over a cap.
	ErrTooLarge = errors.New("too large")
	// ErrUnsafeArchive: the archive holds an entry that may not be extracted.
	ErrUnsafeArchive = errors.New("unsafe archive")
	// ErrInsecureURL: a URL that is not https, or carries credentials.
	ErrInsecureURL = errors.New("insecure URL")
	// ErrBadIndex: index.yaml cannot be read, or its entry lacks a digest or URL.
	ErrBadIndex = errors.New("bad index")
)

// Options configures New. The zero value of every field but Dir means its
// default.
type Options struct {
	// Dir is the cache directory, normally <data>/charts; New creates it.
	Dir string
	// Client makes every request; nil means a client with connect, TLS,
	// header and overall timeouts. Its CheckRedirect is wrapped so that a
	// redirect never changes scheme.
	Client *http.Client
	// DialContext makes the default client's connections; nil means a
	// net.Dialer. The controller passes its egress policy's, which refuses
	// internal addresses at connect time. Ignored when Client is set.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)
	// MaxArchive caps a .tgz archive (DefaultMaxArchive).
	MaxArchive int64
	// MaxIndex caps index.yaml (DefaultMaxIndex).
	MaxIndex int64
	// MaxExtracted caps the sum of the uncompressed files of an archive
	// (DefaultMaxExtracted).
	MaxExtracted int64
	// MaxFiles caps the entries of an archive (DefaultMaxFiles).
	MaxFiles int
	// AllowHTTP lets plain http:// reach loopback hosts (127.0.0.0/8, ::1,
	// localhost), for local tests and demos. Other hosts need https.
	AllowHTTP bool
	// Credentials are sent to the URLs they match; see Credential.
	Credentials []Credential
	// Getenv reads the environment for secret.Source; nil means os.Getenv.
	Getenv func(string) string
	// Logger receives debug and warning events; nil discards them.
	Logger *slog.Logger
}

// Repos fetches charts from chart repositories and caches their archives.
// It is safe for concurrent use.
type Repos struct {
	dir    string
	client *http.Client
	opts   Options // defaults applied
	creds  []Credential
	getenv func(string) string
	log    *slog.Logger

	mu    sync.Mutex
	locks map[string]*keyLock // by digest: one download per archive
}

// keyLock serialises the fetches of one archive. ch holds one token;
// refs counts the holders and waiters, so the entry is dropped at zero.
type keyLock struct {
	ch   chan struct{}
	refs int
}

// New checks opts, applies defaults and creates the cache directory.
func New(opts Options) (*Repos, error) {
	if opts.Dir == "" {
		return nil, errors.New("chart repository cache: no directory given")
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("chart repository cache: %w", err)
	}
	if opts.MaxArchive <= 0 {
		opts.MaxArchive = DefaultMaxArchive
	}
	if opts.MaxIndex <= 0 {
		opts.MaxIndex = DefaultMaxIndex
	}
	if opts.MaxExtracted <= 0 {
		opts.MaxExtracted = DefaultMaxExtracted
	}
	if opts.MaxFiles <= 0 {
		opts.MaxFiles = DefaultMaxFiles
	}
	creds, err := checkCredentials(opts.Credentials, opts.AllowHTTP)
	if err != nil {
		return nil, err
	}
	r := &Repos{
		dir:    opts.Dir,
		opts:   opts,
		creds:  creds,
		getenv: opts.Getenv,
		log:    opts.Logger,
		locks:  map[string]*keyLock{},
	}
	if r.getenv == nil {
		r.getenv = os.Getenv
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	client := opts.Client
	if client == nil {
		client = defaultClient(opts.DialContext)
	}
	r.client = r.wrapClient(client)
	return r, nil
}

// defaultClient bounds each phase of a request, so a stalled repository
// cannot hold a reconcile for ever even under a context without deadline.
func defaultClient(dial func(ctx context.Context, network, address string) (net.Conn, error)) *http.Client {
	t := &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	if d, ok := http.DefaultTransport.(*http.Transport); ok {
		t = d.Clone()
	}
	if dial != nil {
		t.DialContext = dial
	}
	t.TLSHandshakeTimeout = 10 * time.Second
	t.ResponseHeaderTimeout = 30 * time.Second
	return &http.Client{Transport: t, Timeout: 5 * time.Minute}
}

// wrapClient returns a copy of c whose redirects keep the
// scheme and pass the URL checks of the index's own URLs.
func (r *Repos) wrapClient(c *http.Client) *http.Client {
	cp := *c
	next := c.CheckRedirect
	cp.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if req.URL.Scheme != via[0].URL.Scheme {
			return failf(ErrInsecureURL, "redirect from %s to %s changes the scheme", display(via[0].URL), display(req.URL))
		}
		if err := r.checkURL(req.URL); err != nil {
			return err
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
	return &cp
}

// Fetch returns the files of version of chart name in the repository at
// repoURL, and the directory within them that holds the chart (the
// archive's top folder), ready for chart.Load(fsys, dir). The version is
// matched exactly as index.yaml spells it. Fetch reads the index on every
// call; the archive comes from the cache when its SHA-256 matches the
// index's digest, else it is downloaded (a corrupt cached copy is deleted
// and downloaded again, once). It blocks until done or ctx ends, is safe
// for concurrent use, and the caller owns the returned fs.FS.
func (r *Repos) Fetch(ctx context.Context, repoURL, name, version string) (fs.FS, string, error) {
	fsys, dir, err := r.fetch(ctx, repoURL, name, version)
	if err != nil {
		return nil, "", fmt.Errorf("fetch chart %s %s: %w", name, version, err)
	}
	return fsys, dir, nil
}

func (r *Repos) fetch(ctx context.Context, repoURL, name, version string) (fs.FS, string, error) {
	if name == "" || version == "" {
		return nil, "", errors.New("chart name and version are required")
	}
	base, err := r.parseRepo(repoURL)
	if err != nil {
		return nil, "", err
	}
	e, err := r.lookup(ctx, base, name, version)
	if err != nil {
		return nil, "", err
	}
	unlock, err := r.lock(ctx, e.digest)
	if err != nil {
		return nil, "", err
	}
	defer unlock()

	data, err := r.readCache(e)
	if err != nil {
		return nil, "", err
	}
	if data == nil {
		if data, err = r.download(ctx, e); err != nil {
			return nil, "", err
		}
	}
	fsys, dir, err := extract(data, limits{maxBytes: r.opts.MaxExtracted, maxFiles: r.opts.MaxFiles})
	if err != nil {
		return nil, "", fmt.Errorf("archive %s: %w", display(e.url), err)
	}
	return fsys, dir, nil
}

// cachePath names an archive by its digest, so two repositories serving
// the same bytes share one file and a republished version gets a new one.
func (r *Repos) cachePath(digest string) string {
	return filepath.Join(r.dir, digest+".tgz")
}

// readCache returns the cached archive of e when its digest matches, nil
// when there is none. A copy that does not match, or is over the cap, is
// deleted so the caller downloads it again.
func (r *Repos) readCache(e entry) ([]byte, error) {
	p := r.cachePath(e.digest)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read chart cache: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, r.opts.MaxArchive+1))
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("read chart cache: %w", err)
	}
	got := sha256.Sum256(data)
	if int64(len(data)) <= r.opts.MaxArchive && hex.EncodeToString(got[:]) == e.digest {
		r.log.Debug("chart cache hit", "chart", e.name, "version", e.version, "digest", e.digest)
		return data, nil
	}
	r.log.Warn("chart cache corrupt, downloading again", "chart", e.name, "version", e.version, "file", p)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove corrupt chart cache: %w", err)
	}
	return nil, nil
}

// download fetches e's archive, checks size and digest, and writes it to
// the cache atomically (a temporary file renamed into place), so a reader
// never sees half an archive.
func (r *Repos) download(ctx context.Context, e entry) ([]byte, error) {
	data, err := r.get(ctx, e.url, r.opts.MaxArchive, "archive")
	if err != nil {
		return nil, err
	}
	got := sha256.Sum256(data)
	if g := hex.EncodeToString(got[:]); g != e.digest {
		return nil, failf(ErrDigestMismatch, "archive %s: digest mismatch: want sha256:%s, got sha256:%s", display(e.url), e.digest, g)
	}
	tmp, err := os.CreateTemp(r.dir, ".download-*")
	if err != nil {
		return nil, fmt.Errorf("write chart cache: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	if _, err := io.Copy(tmp, bytes.NewReader(data)); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write chart cache: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write chart cache: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("write chart cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), r.cachePath(e.digest)); err != nil {
		return nil, fmt.Errorf("write chart cache: %w", err)
	}
	r.log.Debug("chart archive downloaded", "chart", e.name, "version", e.version, "digest", e.digest, "bytes", len(data))
	return data, nil
}

// lock takes the lock of one archive, giving up when ctx ends; the
// returned function releases it.
func (r *Repos) lock(ctx context.Context, key string) (func(), error) {
	r.mu.Lock()
	l := r.locks[key]
	if l == nil {
		l = &keyLock{ch: make(chan struct{}, 1)}
		r.locks[key] = l
	}
	l.refs++
	r.mu.Unlock()

	release := func() {
		r.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(r.locks, key)
		}
		r.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// authorization returns the Authorization header value for u, "" when no
// credential matches.
func (r *Repos) authorization(u string) (string, error) {
	c, ok := match(r.creds, u)
	if !ok {
		return "", nil
	}
	return c.header(r.getenv)
}

package chartrepo

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/skep-cd/skep/chart"
	"github.com/skep-cd/skep/egress"
	"github.com/skep-cd/skep/secret"
)

// tarEntry is one entry of a test archive; a zero Type is a regular file.
type tarEntry struct {
	Name     string
	Body     string
	Type     byte
	Linkname string
}

// buildArchive returns a .tgz holding entries, in order.
func buildArchive(t testing.TB, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Mode: 0o644, Typeflag: e.Type, Linkname: e.Linkname}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			h = &tar.Header{Typeflag: h.Typeflag, PAXRecords: map[string]string{"comment": e.Body}}
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.Body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.Body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// webChart is a small chart that chart.Load accepts.
func webChart(version string) []tarEntry {
	return []tarEntry{
		{Name: "web/", Type: tar.TypeDir},
		{Name: "web/Chart.yaml", Body: "apiVersion: v2\nname: web\nversion: " + version + "\n"},
		{Name: "web/values.yaml", Body: "image: nginx:1.27\n"},
		{Name: "web/templates/x.yaml", Body: "services:\n  web:\n    image: {{ .Values.image }}\n"},
	}
}

// noise returns n bytes that gzip cannot shrink much.
func noise(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		sum := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		b.Write(sum[:])
	}
	return b.String()[:n]
}

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// repoServer is a chart repository over TLS: index.yaml, written by the
// test with {{base}} standing for the server's URL, and archives by path.
// It counts requests per path.
type repoServer struct {
	*httptest.Server
	mu       sync.Mutex
	index    string
	archives map[string][]byte
	hits     map[string]*atomic.Int64
}

func newRepoServer(t *testing.T) *repoServer {
	t.Helper()
	return newWrappedRepoServer(t, func(h http.Handler) http.Handler { return h })
}

// newWrappedRepoServer is newRepoServer with wrap around its handler.
func newWrappedRepoServer(t *testing.T, wrap func(http.Handler) http.Handler) *repoServer {
	t.Helper()
	s := &repoServer{archives: map[string][]byte{}, hits: map[string]*atomic.Int64{}}
	s.Server = httptest.NewTLSServer(wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.hits[r.URL.Path] == nil {
			s.hits[r.URL.Path] = &atomic.Int64{}
		}
		s.hits[r.URL.Path].Add(1)
		if r.URL.Path == "/charts/index.yaml" {
			_, _ = w.Write([]byte(strings.ReplaceAll(s.index, "{{base}}", s.URL)))
			return
		}
		data, ok := s.archives[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	})))
	t.Cleanup(s.Close)
	return s
}

func (s *repoServer) set(index string, archives map[string][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index = index
	s.archives = archives
}

func (s *repoServer) count(p string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hits[p] == nil {
		return 0
	}
	return s.hits[p].Load()
}

func (s *repoServer) repoURL() string { return s.URL + "/charts" }

// indexFor lists one version of web per archive: version → (url, digest).
func indexFor(entries ...[3]string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\ngenerated: \"2025-01-01T00:00:00Z\"\nentries:\n  web:\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "    - name: web\n      version: %s\n      urls: [%q]\n      digest: %q\n      created: \"2025-01-01T00:00:00Z\"\n", e[0], e[1], e[2])
	}
	return b.String()
}

func newRepos(t *testing.T, s *repoServer, opts Options) *Repos {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "charts")
	}
	opts.Client = s.Client()
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestFetchReturnsAChartThatLoads(t *testing.T) {
	s := newRepoServer(t)
	tgz := buildArchive(t, webChart("1.2.3"))
	s.set(indexFor([3]string{"1.2.3", "web-1.2.3.tgz", digestOf(tgz)}), map[string][]byte{"/charts/web-1.2.3.tgz": tgz})
	r := newRepos(t, s, Options{})

	fsys, dir, err := r.Fetch(t.Context(), s.repoURL(), "web", "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if dir != "web" {
		t.Errorf("dir = %q, want web", dir)
	}
	c, err := chart.Load(fsys, dir)
	if err != nil {
		t.Fatalf("chart.Load: %v", err)
	}
	if m := c.Metadata(); m.Name != "web" || m.Version != "1.2.3" {
		t.Errorf("Metadata = %s %s, want web 1.2.3", m.Name, m.Version)
	}
}

func TestFetchReadsTheCacheWithoutDownloading(t *testing.T) {
	s := newRepoServer(t)
	tgz := buildArchive(t, webChart("1.2.3"))
	s.set(indexFor([3]string{"1.2.3", "web-1.2.3.tgz", digestOf(tgz)}), map[string][]byte{"/charts/web-1.2.3.tgz": tgz})
	dir := filepath.Join(t.TempDir(), "charts")
	for range 3 {
		// A new Repos each time: the cache is the directory, not memory.
		r := newRepos(t, s, Options{Dir: dir})
		if _, _, err := r.Fetch(t.Context(), s.repoURL(), "web", "1.2.3"); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.count("/charts/web-1.2.3.tgz"); n != 1 {
		t.Errorf("archive requested %d times, want 1", n)
	}
	if n := s.count("/charts/index.yaml"); n != 3 {
		t.Errorf("index requested %d times, want 3 (once per fetch)", n)
	}
	if _, err := os.Stat(filepath.Join(dir, digestOf(tgz)+".tgz")); err != nil {
		t.Errorf("cached archive not named by digest: %v", err)
	}
}

func TestFetchDownloadsAgainWhenTheCacheIsTampered(t *testing.T) {
	s := newRepoServer(t)
	tgz := buildArchive(t, webChart("1.2.3"))
	s.set(indexFor([3]string{"1.2.3", "web-1.2.3.tgz", digestOf(tgz)}), map[string][]byte{"/charts/web-1.2.3.tgz": tgz})
	r := newRepos(t, s, Options{})
	if _, _, err := r.Fetch(t.Context(), s.repoURL(), "web", "1.2.3"); err != nil {
		t.Fatal(err)
	}
	cached := filepath.Join(r.dir, digestOf(tgz)+".tgz")
	evil := buildArchive(t, []tarEntry{{Name: "web/Chart.yaml", Body: "apiVersion: v2\nname: web\nversion: 6.6.6\n"}})
	if err := os.WriteFile(cached, evil, 0o600); err != nil {
		t.Fatal(err)
	}

	fsys, dir, err := r.Fetch(t.Context(), s.repoURL(), "web", "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	c, err := chart.Load(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	if v := c.Metadata().Version; v != "1.2.3" {
		t.Errorf("version = %s, want 1.2.3: the tampered cache was trusted", v)
	}
	if n := s.count("/charts/web-1.2.3.tgz"); n != 2 {
		t.Errorf("archive requested %d times, want 2", n)
	}
	if got, _ := os.ReadFile(cached); !bytes.Equal(got, tgz) {
		t.Error("cache file not replaced by the verified archive")
	}
}

func TestFetchResolvesRelativeAndAbsoluteURLs(t *testing.T) {
	s := newRepoServer(t)
	rel := buildArchive(t, webChart("1.0.0"))
	abs := buildArchive(t, webChart("2.0.0"))
	s.set(indexFor(
		[3]string{"1.0.0", "pkg/web-1.0.0.tgz", digestOf(rel)},
		[3]string{"2.0.0", "{{base}}/elsewhere/web-2.0.0.tgz", digestOf(abs)},
	), map[string][]byte{"/charts/pkg/web-1.0.0.tgz": rel, "/elsewhere/web-2.0.0.tgz": abs})
	r := newRepos(t, s, Options{})
	for _, v := range []string{"1.0.0", "2.0.0"} {
		fsys, dir, err := r.Fetch(t.Context(), s.repoURL()+"/", "web", v)
		if err != nil {
			t.Fatalf("version %s: %v", v, err)
		}
		c, err := chart.Load(fsys, dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Metadata().Version; got != v {
			t.Errorf("Fetch(%s) loaded version %s", v, got)
		}
	}
}

func TestFetchDownloadsOnceForConcurrentCallers(t *testing.T) {
	s := newRepoServer(t)
	tgz := buildArchive(t, webChart("1.2.3"))
	s.set(indexFor([3]string{"1.2.3", "web-1.2.3.tgz", digestOf(tgz)}), map[string][]byte{"/charts/web-1.2.3.tgz": tgz})
	r := newRepos(t, s, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, _, err := r.Fetch(t.Context(), s.repoURL(), "web", "1.2.3")
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := s.count("/charts/web-1.2.3.tgz"); n != 1 {
		t.Errorf("archive requested %d times, want 1", n)
	}
}

func TestFetchSendsCredentialsOnlyWhereTheyMatch(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var auth sync.Map
	s := newWrappedRepoServer(t, func(inner http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			auth.Store(r.URL.Path, r.Header.Get("Authorization"))
			inner.ServeHTTP(w, r)
		})
	})
	tgz := buildArchive(t, webChart("1.2.3"))
	s.set(indexFor([3]string{"1.2.3", "{{base}}/public/web-1.2.3.tgz", digestOf(tgz)}), map[string][]byte{"/public/web-1.2.3.tgz": tgz})
	r := newRepos(t, s, Options{Credentials: []Credential{{URLPrefix: s.repoURL(), Token: secret.Source{File: token}}}})
	if _, _, err := r.Fetch(t.Context(), s.repoURL(), "web", "1.2.3"); err != nil {
		t.Fatal(err)
	}
	if got, _ := auth.Load("/charts/index.yaml"); got != "Bearer s3cret" {
		t.Errorf("index Authorization = %q, want the bearer token", got)
	}
	if got, _ := auth.Load("/public/web-1.2.3.tgz"); got != "" {
		t.Errorf("archive outside the prefix got Authorization %q", got)
	}
}

func TestFetchRefuses(t *testing.T) {
	good := buildArchive(t, webChart("1.2.3"))
	big := buildArchive(t, append(webChart("1.2.3"), tarEntry{Name: "web/files/big", Body: noise(4096)}))
	traversal := buildArchive(t, []tarEntry{
		{Name: "web/Chart.yaml", Body: "name: web\n"},
		{Name: "web/../../etc/passwd", Body: "root::0:0::/:/bin/sh\n"},
	})
	tests := []struct {
		name     string
		version  string
		repoURL  func(s *repoServer) string // nil: the TLS server's /charts
		index    string
		archive  []byte
		opts     Options
		want     error
		wantText []string
	}{
		{
			name: "a digest in the index that the archive does not match", version: "1.2.3",
			index: indexFor([3]string{"1.2.3", "a.tgz", strings.Repeat("ab", 32)}), archive: good,
			want:     ErrDigestMismatch,
			wantText: []string{"digest mismatch: want sha256:" + strings.Repeat("ab", 32) + ", got sha256:" + digestOf(good)},
		},
		{
			name: "an entry without a digest", version: "1.2.3",
			index: indexFor([3]string{"1.2.3", "a.tgz", ""}), archive: good,
			want: ErrBadIndex, wantText: []string{"has no digest"},
		},
		{
			name: "an archive over the cap", version: "1.2.3",
			index: indexFor([3]string{"1.2.3", "a.tgz", digestOf(big)}), archive: big,
			opts: Options{MaxArchive: 1 << 10},
			want: ErrTooLarge, wantText: []string{"archive", "is larger than 1 KiB"},
		},
		{
			name: "an archive whose content is over the cap", version: "1.2.3",
			index: indexFor([3]string{"1.2.3", "a.tgz", digestOf(big)}), archive: big,
			opts: Options{MaxExtracted: 1 << 10},
			want: ErrTooLarge, wantText: []string{"archive content is larger than 1 KiB"},
		},
		{
			name: "a version the index does not list, naming those it has", version: "1.2.4",
			index: indexFor([3]string{"1.3.0", "b.tgz", digestOf(good)}, [3]string{"1.2.3", "a.tgz", digestOf(good)}), archive: good,
			want:     ErrNotFound,
			wantText: []string{"fetch chart web 1.2.4: version 1.2.4 of chart web not in https://", "/charts/index.yaml; it has 1.2.3, 1.3.0"},
		},
		{
			name: "a version range", version: "^1.2",
			index: indexFor([3]string{"1.2.3", "a.tgz", digestOf(good)}), archive: good,
			want: ErrNotFound,
		},
		{
			name: "a chart the index does not list", version: "1.2.3",
			index: "apiVersion: v1\nentries: {}\n",
			want:  ErrNotFound, wantText: []string{"chart web not in"},
		},
		{
			name: "a plain http repository", version: "1.2.3",
			repoURL: func(s *repoServer) string { return strings.Replace(s.repoURL(), "https://", "http://", 1) },
			index:   indexFor([3]string{"1.2.3", "a.tgz", digestOf(good)}), archive: good,
			want: ErrInsecureURL, wantText: []string{"is plain http; want https"},
		},
		{
			name: "a repository URL with a password, without echoing it", version: "1.2.3",
			repoURL: func(s *repoServer) string { return strings.Replace(s.repoURL(), "https://", "https://me:hunter2@", 1) },
			index:   indexFor([3]string{"1.2.3", "a.tgz", digestOf(good)}), archive: good,
			want: ErrInsecureURL, wantText: []string{"carries credentials"},
		},
		{
			name: "an archive URL in the index with another scheme", version: "1.2.3",
			index: indexFor([3]string{"1.2.3", "ftp://example.org/a.tgz", digestOf(good)}), archive: good,
			want: ErrInsecureURL, wantText: []string{`scheme "ftp" is not https`},
		},
		{
			name: "an index over the cap", version: "1.2.3",
			index: indexFor([3]string{"1.2.3", "a.tgz", digestOf(good)}) + "# " + strings.Repeat("x", 2048) + "\n", archive: good,
			opts: Options{MaxIndex: 1 << 10},
			want: ErrTooLarge, wantText: []string{"index https://", "is larger than 1 KiB"},
		},
		{
			name: "path traversal in the archive", version: "1.2.3",
			index:   indexFor([3]string{"1.2.3", "a.tgz", digestOf(traversal)}),
			archive: traversal,
			want:    ErrUnsafeArchive, wantText: []string{`entry "web/../../etc/passwd" climbs out of the archive`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newRepoServer(t)
			s.set(tt.index, map[string][]byte{"/charts/a.tgz": tt.archive})
			r := newRepos(t, s, tt.opts)
			repo := s.repoURL()
			if tt.repoURL != nil {
				repo = tt.repoURL(s)
			}
			fsys, _, err := r.Fetch(t.Context(), repo, "web", tt.version)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Fetch = %v, want %v", err, tt.want)
			}
			if fsys != nil {
				t.Error("Fetch returned files with its error")
			}
			for _, w := range tt.wantText {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the password", err)
			}
			if entries, _ := os.ReadDir(r.dir); tt.want == ErrDigestMismatch && len(entries) > 0 {
				t.Errorf("cache holds %d files after a refused download", len(entries))
			}
		})
	}
}

func TestFetchFollowsNoRedirectToAnotherScheme(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("plain http server reached: %s", r.URL)
	}))
	defer plain.Close()
	s := newWrappedRepoServer(t, func(http.Handler) http.Handler {
		return http.RedirectHandler(plain.URL+"/charts/index.yaml", http.StatusFound)
	})
	r := newRepos(t, s, Options{AllowHTTP: true})
	_, _, err := r.Fetch(t.Context(), s.repoURL(), "web", "1.2.3")
	if !errors.Is(err, ErrInsecureURL) {
		t.Fatalf("Fetch = %v, want ErrInsecureURL", err)
	}
}

func TestNewRefusesBadCredentials(t *testing.T) {
	tests := []struct {
		name string
		cred Credential
	}{
		{"a plain http prefix", Credential{URLPrefix: "http://charts.example.org", Token: secret.Source{Env: "T"}}},
		{"a prefix with userinfo", Credential{URLPrefix: "https://u:p@charts.example.org", Token: secret.Source{Env: "T"}}},
		{"a token and a password", Credential{URLPrefix: "https://charts.example.org", Username: "u", Password: secret.Source{Env: "P"}, Token: secret.Source{Env: "T"}}},
		{"a username without a password", Credential{URLPrefix: "https://charts.example.org", Username: "u"}},
		{"no secret at all", Credential{URLPrefix: "https://charts.example.org"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Options{Dir: t.TempDir(), Credentials: []Credential{tt.cred}})
			if err == nil {
				t.Fatal("New accepted the credential")
			}
			if strings.Contains(err.Error(), ":p@") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

func TestMatchTakesTheLongestPrefixOnAPathBoundary(t *testing.T) {
	creds, err := checkCredentials([]Credential{
		{URLPrefix: "https://charts.example.org", Token: secret.Source{Env: "HOST"}},
		{URLPrefix: "https://charts.example.org/team", Token: secret.Source{Env: "TEAM"}},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ url, want string }{
		{"https://charts.example.org/index.yaml", "HOST"},
		{"https://charts.example.org/team/index.yaml", "TEAM"},
		{"https://charts.example.org/teamx/index.yaml", "HOST"},
		{"https://charts.example.org.evil.test/index.yaml", ""},
	}
	for _, tt := range tests {
		c, _ := match(creds, tt.url)
		if c.Token.Env != tt.want {
			t.Errorf("match(%s) = %q, want %q", tt.url, c.Token.Env, tt.want)
		}
	}
}

// Without a Client, every connection goes through Options.DialContext: a
// dialler that refuses stops the request before the server sees it, and
// one that dials lets the chart through.
func TestTheDefaultClientDialsThroughDialContext(t *testing.T) {
	tgz := buildArchive(t, webChart("1.2.3"))
	var hits atomic.Int64
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/charts/index.yaml":
			_, _ = io.WriteString(w, indexFor([3]string{"1.2.3", "web-1.2.3.tgz", digestOf(tgz)}))
		case "/charts/web-1.2.3.tgz":
			_, _ = w.Write(tgz)
		default:
			http.NotFound(w, r)
		}
	}))
	defer plain.Close()
	refusal := errors.New("refused by the test's policy")
	for _, tc := range []struct {
		name   string
		refuse bool
	}{{"a refusing dialler", true}, {"a dialler that dials", false}} {
		t.Run(tc.name, func(t *testing.T) {
			var dialled []string
			r, err := New(Options{Dir: filepath.Join(t.TempDir(), "charts"), AllowHTTP: true,
				DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
					dialled = append(dialled, address)
					if tc.refuse {
						return nil, refusal
					}
					var d net.Dialer
					return d.DialContext(ctx, network, address)
				}})
			if err != nil {
				t.Fatal(err)
			}
			before := hits.Load()
			_, _, err = r.Fetch(t.Context(), plain.URL+"/charts", "web", "1.2.3")
			if errors.Is(err, refusal) != tc.refuse || (err == nil) == tc.refuse {
				t.Errorf("Fetch = %v, want refused %v", err, tc.refuse)
			}
			if len(dialled) == 0 {
				t.Error("the default client did not dial through DialContext")
			}
			if got := hits.Load() - before; (got == 0) != tc.refuse {
				t.Errorf("the server saw %d requests; want none exactly when refused", got)
			}
		})
	}
}

// A chart repository on an address the egress policy allows that
// redirects, index or archive, to one it refuses gains nothing: the hop
// is dialled through the policy and refused, the error names the
// refusal, and the refused server is never asked.
func TestARedirectToAnAddressTheEgressPolicyRefusesIsNotFollowed(t *testing.T) {
	policy, err := egress.Parse("127.0.0.1/32")
	if err != nil {
		t.Fatal(err)
	}
	tgz := buildArchive(t, webChart("1.2.3"))
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.2 (all of 127.0.0.0/8 is loopback on Linux): %v", err)
	}
	var asked atomic.Int64
	internal := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		_, _ = w.Write(tgz)
	})}}
	internal.Start()
	defer internal.Close()
	for _, tc := range []struct {
		name     string
		redirect string // the path answered with a redirect to the refused address
	}{
		{"the index is redirected", "/charts/index.yaml"},
		{"the archive is redirected", "/charts/web-1.2.3.tgz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case tc.redirect:
					http.Redirect(w, r, internal.URL+r.URL.Path, http.StatusFound)
				case "/charts/index.yaml":
					_, _ = io.WriteString(w, indexFor([3]string{"1.2.3", "web-1.2.3.tgz", digestOf(tgz)}))
				default:
					http.NotFound(w, r)
				}
			}))
			defer allowed.Close()
			r, err := New(Options{Dir: filepath.Join(t.TempDir(), "charts"), AllowHTTP: true, DialContext: policy.Dialer().DialContext})
			if err != nil {
				t.Fatal(err)
			}
			before := asked.Load()
			_, _, err = r.Fetch(t.Context(), allowed.URL+"/charts", "web", "1.2.3")
			if !errors.Is(err, egress.ErrRefused) || !strings.Contains(err.Error(), "127.0.0.2 is an internal address") {
				t.Errorf("Fetch through a redirect to 127.0.0.2 = %v, want the egress refusal naming it", err)
			}
			if got := asked.Load() - before; got != 0 {
				t.Errorf("the refused address was asked %d times, want 0", got)
			}
		})
	}
}

package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// history is a repository with every kind of revision worth resolving:
//
//	root ── tagged (annotated tag v1) ── head (main, lightweight tag v2)
//	           └── feature (branch feature)
//
// Nothing points at root, so finding it needs a fetch.
type history struct {
	repo                        *testRepo
	root, tagged, head, feature string
}

func newHistory(t testing.TB, dir string) history {
	t.Helper()
	r := newTestRepo(t, dir)
	h := history{repo: r}
	h.root = r.commit("root", map[string]string{"README": "root\n"})
	h.tagged = r.commit("tagged", map[string]string{"app/compose.yaml": "services: {}\n", "README": "tagged\n"})
	r.git("tag", "-a", "v1", "-m", "release v1")
	r.git("checkout", "-q", "-b", "feature")
	h.feature = r.commit("feature", map[string]string{"README": "feature\n"})
	r.git("checkout", "-q", "main")
	h.head = r.commit("head", map[string]string{"README": "head\n"})
	r.git("tag", "v2")
	return h
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustCredentials(t *testing.T, doc string) *Credentials {
	t.Helper()
	c, err := ParseCredentials("credentials.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// remoteForm is one way of reaching a history: its URL and the cache
// options that reach it.
type remoteForm struct {
	name string
	url  string
	opts Options
}

func transports(t *testing.T) (history, []remoteForm) {
	t.Helper()
	root := t.TempDir()
	h := newHistory(t, filepath.Join(root, "team", "app"))
	bare := h.repo.bareCopy(filepath.Join(root, "team", "app-bare.git"))

	secrets := t.TempDir()
	passwordFile := writeFile(t, secrets, "password", "s3cret-pw\n")
	server := serveHTTP(t, root, "ci", "s3cret-pw", "")
	sshd := serveSSH(t)

	return h, []remoteForm{
		{name: "local path", url: h.repo.dir},
		{name: "local path of a bare repository", url: bare},
		{name: "file URL", url: "file://" + h.repo.dir},
		{name: "smart HTTP with basic auth", url: server.URL + "/team/app", opts: Options{Credentials: mustCredentials(t, fmt.Sprintf(`
credentials:
  - urlPrefix: %s/team/
    username: ci
    passwordFile: %s
`, server.URL, passwordFile))}},
		{name: "ssh with key and known_hosts", url: "ssh://git@" + sshd.Addr + h.repo.dir, opts: Options{Credentials: mustCredentials(t, fmt.Sprintf(`
credentials:
  - urlPrefix: ssh://%s/
    sshKeyFile: %s
    knownHostsFile: %s
`, sshd.Addr, sshd.ClientKey, sshd.KnownHosts))}},
	}
}

func TestResolveNamesEveryKindOfRevisionOverEveryTransport(t *testing.T) {
	h, trs := transports(t)
	cases := []struct {
		name, revision, want string
		wantErr              error
	}{
		{name: "branch", revision: "feature", want: h.feature},
		{name: "default branch by name", revision: "main", want: h.head},
		{name: "HEAD is the remote's default branch", revision: "HEAD", want: h.head},
		{name: "empty revision is HEAD", revision: "", want: h.head},
		{name: "full branch ref", revision: "refs/heads/feature", want: h.feature},
		{name: "annotated tag peeled to its commit", revision: "v1", want: h.tagged},
		{name: "lightweight tag", revision: "v2", want: h.head},
		{name: "full tag ref", revision: "refs/tags/v1", want: h.tagged},
		{name: "advertised short sha", revision: h.feature[:7], want: h.feature},
		{name: "unadvertised short sha is fetched", revision: h.root[:8], want: h.root},
		{name: "unadvertised full sha in upper case", revision: strings.ToUpper(h.root), want: h.root},
		{name: "missing branch", revision: "no-such-branch", wantErr: ErrRevisionNotFound},
		{name: "missing full ref", revision: "refs/heads/v1", wantErr: ErrRevisionNotFound},
		{name: "missing sha", revision: "0123456789abcdef", wantErr: ErrRevisionNotFound},
	}
	for _, tr := range trs {
		t.Run(tr.name, func(t *testing.T) {
			c := newCache(t, tr.opts)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					got, err := c.Resolve(t.Context(), tr.url, tc.revision)
					if !errors.Is(err, tc.wantErr) {
						t.Fatalf("Resolve(%q) error = %v, want %v", tc.revision, err, tc.wantErr)
					}
					if got != tc.want {
						t.Errorf("Resolve(%q) = %s, want %s", tc.revision, got, tc.want)
					}
				})
			}
			if got := c.Stats().ListRefs; got != 1 {
				t.Errorf("ls-remote calls = %d, want 1 for all revisions", got)
			}
			tree, err := c.Checkout(t.Context(), tr.url, h.tagged)
			if err != nil {
				t.Fatalf("Checkout: %v", err)
			}
			defer tree.Release()
			got, err := tree.ReadFile("README")
			if err != nil || string(got) != "tagged\n" {
				t.Errorf("README at tagged = %q, %v; want %q", got, err, "tagged\n")
			}
		})
	}
}

func TestOneListRefsServesManyApplicationsOfOneRepository(t *testing.T) {
	root := t.TempDir()
	h := newHistory(t, filepath.Join(root, "app"))
	server := serveHTTP(t, root, "", "", "")
	c := newCache(t, Options{})
	url := server.URL + "/app"

	revisions := []string{"main", "feature", "v1", "v2", "HEAD"}
	var wg sync.WaitGroup
	errs := make(chan error, 20*len(revisions))
	for range 20 {
		for _, rev := range revisions {
			wg.Go(func() {
				if _, err := c.Resolve(t.Context(), url, rev); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := c.Stats().ListRefs; got != 1 {
		t.Errorf("ls-remote calls for 100 resolutions = %d, want 1", got)
	}
	if got := server.count("/info/refs"); got != 1 {
		t.Errorf("server saw %d ref advertisements, want 1", got)
	}

	// The local path and file:// forms name the same repository.
	c2 := newCache(t, Options{})
	for _, url := range []string{h.repo.dir, "file://" + h.repo.dir + "/", h.repo.dir + "/./"} {
		if _, err := c2.Resolve(t.Context(), url, "main"); err != nil {
			t.Fatal(err)
		}
	}
	if got := c2.Stats().ListRefs; got != 1 {
		t.Errorf("ls-remote calls for three spellings of one path = %d, want 1", got)
	}
}

func TestResolveSeesANewCommitAndCheckoutFetchesOnlyWhenItMoved(t *testing.T) {
	h := newHistory(t, "")
	c := newCache(t, Options{})
	ctx := t.Context()

	check := func(step string, want Stats) {
		t.Helper()
		if diff := cmp.Diff(want, c.Stats()); diff != "" {
			t.Errorf("%s: stats (-want +got):\n%s", step, diff)
		}
	}
	first, err := c.Resolve(ctx, h.repo.dir, "main")
	if err != nil || first != h.head {
		t.Fatalf("Resolve(main) = %s, %v; want %s", first, err, h.head)
	}
	tree, err := c.Checkout(ctx, h.repo.dir, first)
	if err != nil {
		t.Fatal(err)
	}
	tree.Release()
	check("first checkout", Stats{ListRefs: 1, Fetches: 1, Exports: 1})

	// Unchanged remote: the cached answer serves, and nothing is fetched.
	again, err := c.Resolve(ctx, h.repo.dir, "main")
	if err != nil || again != first {
		t.Fatalf("Resolve(main) again = %s, %v; want %s", again, err, first)
	}
	c.Forget(h.repo.dir)
	again, err = c.Resolve(ctx, h.repo.dir, "main")
	if err != nil || again != first {
		t.Fatalf("Resolve(main) after Forget = %s, %v; want %s", again, err, first)
	}
	tree, err = c.Checkout(ctx, h.repo.dir, again)
	if err != nil {
		t.Fatal(err)
	}
	tree.Release()
	check("unchanged remote", Stats{ListRefs: 2, Fetches: 1, Exports: 1})

	// A new commit: seen once the cached answer is forgotten, then fetched.
	pushed := h.repo.commit("pushed", map[string]string{"README": "pushed\n"})
	stale, err := c.Resolve(ctx, h.repo.dir, "main")
	if err != nil || stale != first {
		t.Fatalf("Resolve(main) within RefsMaxAge = %s, %v; want the cached %s", stale, err, first)
	}
	c.Forget(h.repo.dir)
	moved, err := c.Resolve(ctx, h.repo.dir, "main")
	if err != nil || moved != pushed {
		t.Fatalf("Resolve(main) after push = %s, %v; want %s", moved, err, pushed)
	}
	tree, err = c.Checkout(ctx, h.repo.dir, moved)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tree.ReadFile("README")
	tree.Release()
	if err != nil || string(got) != "pushed\n" {
		t.Errorf("README after push = %q, %v; want %q", got, err, "pushed\n")
	}
	check("after push", Stats{ListRefs: 3, Fetches: 2, Exports: 2})

	// The old commit's tree is still there: no fetch, no export.
	tree, err = c.Checkout(ctx, h.repo.dir, first)
	if err != nil {
		t.Fatal(err)
	}
	tree.Release()
	check("old commit again", Stats{ListRefs: 3, Fetches: 2, Exports: 2})

	// A new Cache on the same directory reuses the clone and the trees.
	c = newCache(t, Options{Dir: filepath.Dir(filepath.Dir(filepath.Dir(tree.Dir())))})
	tree, err = c.Checkout(ctx, h.repo.dir, moved)
	if err != nil {
		t.Fatal(err)
	}
	tree.Release()
	check("restarted cache", Stats{})
}

func TestRefsMaxAgeBoundsHowLongAnAnswerServes(t *testing.T) {
	h := newHistory(t, "")
	c := newCache(t, Options{RefsMaxAge: 1}) // one nanosecond: every call asks
	for range 3 {
		if _, err := c.Resolve(t.Context(), h.repo.dir, "main"); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Stats().ListRefs; got != 3 {
		t.Errorf("ls-remote calls with a 1ns max age = %d, want 3", got)
	}
}

func TestCheckoutExportsExactlyTheCommit(t *testing.T) {
	r := newTestRepo(t, "")
	old := r.commit("old", map[string]string{"gone.txt": "bye\n", "keep.txt": "v1\n"})
	r.commit("new", map[string]string{"gone.txt": "", "keep.txt": "v2\n", "bin/run": "#!/bin/sh\n"})
	if err := os.Chmod(filepath.Join(r.dir, "bin", "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	cur := r.commit("make run executable", nil)
	c := newCache(t, Options{})

	tree, err := c.Checkout(t.Context(), r.dir, cur)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Release()
	if tree.Commit() != cur {
		t.Errorf("Commit() = %s, want %s", tree.Commit(), cur)
	}
	if _, err := os.Stat(filepath.Join(tree.Dir(), "gone.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("file deleted in the commit: stat error = %v, want not exist", err)
	}
	if _, err := os.Stat(filepath.Join(tree.Dir(), ".git")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("tree has a .git: stat error = %v, want not exist", err)
	}
	modes := map[string]fs.FileMode{}
	for _, name := range []string{"keep.txt", "bin/run"} {
		fi, err := os.Stat(filepath.Join(tree.Dir(), name))
		if err != nil {
			t.Fatal(err)
		}
		modes[name] = fi.Mode().Perm()
	}
	if diff := cmp.Diff(map[string]fs.FileMode{"keep.txt": 0o444, "bin/run": 0o555}, modes); diff != "" {
		t.Errorf("file modes (-want +got):\n%s", diff)
	}

	oldTree, err := c.Checkout(t.Context(), r.dir, old)
	if err != nil {
		t.Fatal(err)
	}
	defer oldTree.Release()
	got, err := oldTree.ReadFile("keep.txt")
	if err != nil || string(got) != "v1\n" {
		t.Errorf("keep.txt at old = %q, %v; want %q", got, err, "v1\n")
	}
}

func TestCheckoutRefusesMissingAndAbbreviatedCommits(t *testing.T) {
	h := newHistory(t, "")
	c := newCache(t, Options{})
	cases := []struct {
		name, commit string
		wantErr      error
	}{
		{name: "commit the remote does not have", commit: strings.Repeat("ab", 20), wantErr: ErrRevisionNotFound},
		{name: "abbreviated sha", commit: h.head[:12]},
		{name: "branch name", commit: "main"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tree, err := c.Checkout(t.Context(), h.repo.dir, tc.commit)
			if err == nil {
				tree.Release()
				t.Fatalf("Checkout(%q) succeeded, want an error", tc.commit)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("Checkout(%q) error = %v, want %v", tc.commit, err, tc.wantErr)
			}
		})
	}
}

func TestConcurrentCheckoutsOfTwoCommitsEachSeeTheirOwnFiles(t *testing.T) {
	r := newTestRepo(t, "")
	want := map[string]string{}
	a := r.commit("a", map[string]string{"app/compose.yaml": "image: a\n"})
	want[a] = "image: a\n"
	b := r.commit("b", map[string]string{"app/compose.yaml": "image: b\n"})
	want[b] = "image: b\n"
	c := newCache(t, Options{KeepTrees: 1})

	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		commit := []string{a, b}[i%2]
		wg.Go(func() {
			tree, err := c.Checkout(t.Context(), r.dir, commit)
			if err != nil {
				errs <- err
				return
			}
			defer tree.Release()
			got, err := tree.ReadFile("app/compose.yaml")
			if err != nil {
				errs <- err
				return
			}
			if string(got) != want[commit] {
				errs <- fmt.Errorf("compose at %s = %q, want %q", commit[:7], got, want[commit])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := c.Stats().Fetches; got != 1 {
		t.Errorf("fetches = %d, want 1", got)
	}
}

func TestIdleTreesBeyondKeepTreesAreRemovedHeldOnesNever(t *testing.T) {
	r := newTestRepo(t, "")
	var commits []string
	for i := range 4 {
		commits = append(commits, r.commit(fmt.Sprint(i), map[string]string{"n": fmt.Sprint(i)}))
	}
	c := newCache(t, Options{KeepTrees: 1})
	ctx := t.Context()

	held, err := c.Checkout(ctx, r.dir, commits[0])
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	var dirs []string
	for _, commit := range commits[1:] {
		tree, err := c.Checkout(ctx, r.dir, commit)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, tree.Dir())
		tree.Release()
	}
	exists := func(dir string) bool { _, err := os.Stat(dir); return err == nil }
	got := map[string]bool{"held": exists(held.Dir())}
	for i, d := range dirs {
		got[fmt.Sprint("released ", i+1)] = exists(d)
	}
	want := map[string]bool{"held": true, "released 1": false, "released 2": false, "released 3": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trees on disk (-want +got):\n%s", diff)
	}
	if data, err := held.ReadFile("n"); err != nil || string(data) != "0" {
		t.Errorf("held tree: ReadFile(n) = %q, %v; want %q", data, err, "0")
	}
}

func TestReadFileStaysInsideTheTree(t *testing.T) {
	r := newTestRepo(t, "")
	commit := r.commit("files", map[string]string{
		"app/compose.yaml":   "services: {}\n",
		"link-in":            "->app/compose.yaml",
		"dir-link":           "->app",
		"app/up-and-back":    "->../app/compose.yaml",
		"passwd":             "->/etc/passwd",
		"app/escape":         "->../../../../../../etc/passwd",
		"app/loop":           "->loop",
		"app/through-escape": "->../passwd",
	})
	c := newCache(t, Options{})
	cases := []struct {
		name, path, want string
		wantErr          error
	}{
		{name: "plain file", path: "app/compose.yaml", want: "services: {}\n"},
		{name: "dot elements are fine", path: "./app/./compose.yaml", want: "services: {}\n"},
		{name: "symlink inside the tree", path: "link-in", want: "services: {}\n"},
		{name: "through a directory symlink", path: "dir-link/compose.yaml", want: "services: {}\n"},
		{name: "relative symlink up and back in", path: "app/up-and-back", want: "services: {}\n"},
		{name: "dot-dot refused", path: "../x", wantErr: fs.ErrInvalid},
		{name: "inner dot-dot refused", path: "app/../app/compose.yaml", wantErr: fs.ErrInvalid},
		{name: "absolute path refused", path: "/etc/passwd", wantErr: fs.ErrInvalid},
		{name: "empty path refused", path: "", wantErr: fs.ErrInvalid},
		{name: "absolute symlink refused", path: "passwd", wantErr: ErrOutsideTree},
		{name: "relative symlink climbing out refused", path: "app/escape", wantErr: ErrOutsideTree},
		{name: "symlink to a refused symlink", path: "app/through-escape", wantErr: ErrOutsideTree},
		{name: "symlink loop", path: "app/loop", wantErr: errAny},
		{name: "missing file", path: "app/nope.yaml", wantErr: fs.ErrNotExist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.ReadFile(t.Context(), r.dir, commit, tc.path)
			if tc.wantErr == errAny {
				if err == nil {
					t.Fatalf("ReadFile(%q) succeeded, want an error", tc.path)
				}
			} else if !errors.Is(err, tc.wantErr) {
				t.Fatalf("ReadFile(%q) error = %v, want %v", tc.path, err, tc.wantErr)
			}
			if string(got) != tc.want {
				t.Errorf("ReadFile(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
	// Refused paths are refused before any remote is asked.
	c2 := newCache(t, Options{})
	if _, err := c2.ReadFile(t.Context(), r.dir, commit, "../x"); !errors.Is(err, fs.ErrInvalid) {
		t.Fatalf("ReadFile(../x) error = %v, want fs.ErrInvalid", err)
	}
	if diff := cmp.Diff(Stats{}, c2.Stats()); diff != "" {
		t.Errorf("a refused path reached the remote (-want +got):\n%s", diff)
	}
}

// errAny stands for "some error" in tables.
var errAny = errors.New("any error")

func TestHTTPCredentials(t *testing.T) {
	root := t.TempDir()
	h := newHistory(t, filepath.Join(root, "team", "app"))
	server := serveHTTP(t, root, "ci", "s3cret-pw", "t0ken-value")
	secrets := t.TempDir()
	good := writeFile(t, secrets, "good", "s3cret-pw\n")
	bad := writeFile(t, secrets, "bad", "wr0ng-pw\n")
	token := writeFile(t, secrets, "token", "t0ken-value\n")
	t.Setenv("SKEP_TEST_GIT_PASSWORD", "s3cret-pw")
	url := server.URL + "/team/app"
	secretsInPlay := []string{"s3cret-pw", "wr0ng-pw", "t0ken-value"}

	cases := []struct {
		name, credentials string
		wantErr           error
	}{
		{name: "basic auth from a file", credentials: "username: ci\n    passwordFile: " + good},
		{name: "basic auth from an environment variable", credentials: "username: ci\n    passwordEnv: SKEP_TEST_GIT_PASSWORD"},
		{name: "bearer token from a file", credentials: "tokenFile: " + token},
		{name: "wrong password", credentials: "username: ci\n    passwordFile: " + bad, wantErr: ErrAuth},
		{name: "unset environment variable", credentials: "username: ci\n    passwordEnv: SKEP_TEST_GIT_UNSET", wantErr: ErrAuth},
		{name: "missing password file", credentials: "username: ci\n    passwordFile: " + filepath.Join(secrets, "nope"), wantErr: ErrAuth},
		{name: "no credentials", wantErr: ErrAuth},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var creds *Credentials
			if tc.credentials != "" {
				creds = mustCredentials(t, fmt.Sprintf("credentials:\n  - urlPrefix: %s/team\n    %s\n", server.URL, tc.credentials))
			}
			c := newCache(t, Options{Credentials: creds})
			got, err := c.Resolve(t.Context(), url, "main")
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Resolve error = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && got != h.head {
				t.Errorf("Resolve(main) = %s, want %s", got, h.head)
			}
			if err != nil {
				var re *RemoteError
				if !errors.As(err, &re) || re.Transient() {
					t.Errorf("error %v: want a *RemoteError that is not transient", err)
				}
				for _, s := range secretsInPlay {
					if strings.Contains(err.Error(), s) {
						t.Errorf("error text %q contains a secret", err)
					}
				}
			}
		})
	}
}

func TestSSHChecksHostKeysAndClientKeys(t *testing.T) {
	h := newHistory(t, "")
	sshd := serveSSH(t)
	other := serveSSH(t) // its key and known_hosts belong to another server
	url := "ssh://git@" + sshd.Addr + h.repo.dir
	cases := []struct {
		name, key, knownHosts string
		wantErr               error
	}{
		{name: "accepted key and known host", key: sshd.ClientKey, knownHosts: sshd.KnownHosts},
		{name: "host key not in known_hosts", key: sshd.ClientKey, knownHosts: other.KnownHosts, wantErr: ErrAuth},
		{name: "client key the server refuses", key: other.ClientKey, knownHosts: sshd.KnownHosts, wantErr: ErrAuth},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			creds := mustCredentials(t, fmt.Sprintf("credentials:\n  - urlPrefix: ssh://%s\n    sshKeyFile: %s\n    knownHostsFile: %s\n", sshd.Addr, tc.key, tc.knownHosts))
			c := newCache(t, Options{Credentials: creds})
			got, err := c.Resolve(t.Context(), url, "main")
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Resolve error = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && got != h.head {
				t.Errorf("Resolve(main) = %s, want %s", got, h.head)
			}
		})
	}
}

func TestRemoteFailuresAreClassified(t *testing.T) {
	root := t.TempDir()
	newHistory(t, filepath.Join(root, "app"))
	server := serveHTTP(t, root, "", "", "")
	cases := []struct {
		name, url     string
		wantErr       error
		wantTransient bool
	}{
		{name: "missing repository over HTTP", url: server.URL + "/nope", wantErr: ErrRepositoryNotFound},
		{name: "missing local repository", url: filepath.Join(root, "nope"), wantErr: ErrRepositoryNotFound},
		{name: "nothing listening", url: "http://127.0.0.1:1/app", wantTransient: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(t, Options{})
			_, err := c.Resolve(t.Context(), tc.url, "main")
			var re *RemoteError
			if !errors.As(err, &re) {
				t.Fatalf("Resolve error = %v, want a *RemoteError", err)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("Resolve error = %v, want %v", err, tc.wantErr)
			}
			if re.Transient() != tc.wantTransient {
				t.Errorf("Transient() = %v, want %v (error %v)", re.Transient(), tc.wantTransient, err)
			}
		})
	}
}

func TestCallsGiveUpWhenTheContextEnds(t *testing.T) {
	h := newHistory(t, "")
	c := newCache(t, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Resolve(ctx, h.repo.dir, "main"); !errors.Is(err, context.Canceled) {
		t.Errorf("Resolve with a cancelled context: error = %v, want context.Canceled", err)
	}
	// The cancelled call is not remembered as the remote's answer.
	if got, err := c.Resolve(t.Context(), h.repo.dir, "main"); err != nil || got != h.head {
		t.Errorf("Resolve after a cancelled call = %s, %v; want %s", got, err, h.head)
	}
}

func TestARemoteThatNeverAnswersTimesOutAsTransient(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); hang.Close() })
	c := newCache(t, Options{Timeout: 200 * time.Millisecond})
	_, err := c.Resolve(t.Context(), hang.URL+"/app.git", "main")
	var re *RemoteError
	if !errors.As(err, &re) || !re.Transient() || !strings.Contains(err.Error(), "no answer within 200ms") {
		t.Fatalf("Resolve against a hung remote = %v, want a transient RemoteError saying it did not answer within 200ms", err)
	}
	if errors.Is(err, ErrRepositoryNotFound) || errors.Is(err, ErrAuth) {
		t.Errorf("a hung remote is classed %v", err)
	}
}

func TestListRefsNamesTheBranchesAndTheDefaultBranch(t *testing.T) {
	root := t.TempDir()
	h := newHistory(t, filepath.Join(root, "app"))
	h.repo.git("update-ref", "refs/pull/7/head", h.feature)
	h.repo.git("update-ref", "refs/merge-requests/3/head", h.root)
	server := serveHTTP(t, root, "", "", "")
	c := newCache(t, Options{})
	refs, err := c.ListRefs(t.Context(), server.URL+"/app")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"main": h.head, "feature": h.feature}
	if diff := cmp.Diff(want, refs.Branches()); diff != "" {
		t.Errorf("Branches (-want +got):\n%s", diff)
	}
	if got := refs.DefaultBranch(); got != "main" {
		t.Errorf("DefaultBranch = %q, want main", got)
	}
	wantPRs := map[string]string{"refs/pull/7/head": h.feature, "refs/merge-requests/3/head": h.root}
	if diff := cmp.Diff(wantPRs, refs.PullRequests()); diff != "" {
		t.Errorf("PullRequests (-want +got):\n%s", diff)
	}
}

// CheckHost is asked before every remote call with the bare host, and a
// refusal stops the call before any connection: the server sees nothing,
// and the error is final, not retried as a network failure.
func TestCheckHostRefusesARemoteBeforeAnyRequest(t *testing.T) {
	root := t.TempDir()
	h := newHistory(t, filepath.Join(root, "app"))
	server := serveHTTP(t, root, "", "", "")
	var refuse atomic.Bool
	var mu sync.Mutex
	var asked []string
	c := newCache(t, Options{RefsMaxAge: time.Nanosecond, CheckHost: func(_ context.Context, host string) error {
		mu.Lock()
		asked = append(asked, host)
		mu.Unlock()
		if refuse.Load() {
			return errors.New("an internal address")
		}
		return nil
	}})

	refuse.Store(true)
	_, err := c.Resolve(t.Context(), server.URL+"/app", "main")
	var re *RemoteError
	if !errors.As(err, &re) || !errors.Is(err, ErrHostRefused) || re.Transient() || !strings.Contains(err.Error(), "an internal address") {
		t.Fatalf("Resolve of a refused host = %v, want a final RemoteError wrapping ErrHostRefused and the reason", err)
	}
	if n := server.count("/info/refs"); n != 0 {
		t.Errorf("the server saw %d requests for a refused host, want none", n)
	}

	refuse.Store(false)
	if got, err := c.Resolve(t.Context(), server.URL+"/app", "main"); err != nil || got != h.head {
		t.Fatalf("Resolve of an allowed host = %s, %v; want %s", got, err, h.head)
	}
	// The fetch behind a checkout asks again.
	refuse.Store(true)
	if _, err := c.Checkout(t.Context(), server.URL+"/app", h.head); !errors.Is(err, ErrHostRefused) {
		t.Errorf("Checkout of a refused host = %v, want ErrHostRefused", err)
	}
	if n := server.count("/git-upload-pack"); n != 0 {
		t.Errorf("the server saw %d fetches for a refused host, want none", n)
	}
	// A local repository is not a network host and is not asked about.
	mu.Lock()
	before := len(asked)
	mu.Unlock()
	if _, err := c.Resolve(t.Context(), h.repo.dir, "main"); err != nil {
		t.Errorf("Resolve of a local repository while hosts are refused = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != before || asked[0] != "127.0.0.1" {
		t.Errorf("hosts asked = %q; want 127.0.0.1 for each remote call and nothing for a local path", asked)
	}
}

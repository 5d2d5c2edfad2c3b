package harness

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/skep-cd/skep/githttp"
)

// GitServer serves bare repositories over git's smart HTTP protocol (see
// package githttp) on a loopback port until the test ends. Every repository
// accepts pushes. With a username set, every request needs HTTP basic auth.
//
// Fail, Hang and Heal put the server in a fault mode for tests of what a
// client does when its git host misbehaves; they are safe to call while
// requests are served.
type GitServer struct {
	// URL is the base address, "http://127.0.0.1:<port>", without credentials.
	URL  string
	Root string // directory holding the bare repositories

	mu     sync.Mutex
	status int           // answered to every request when not 0
	hang   chan struct{} // requests wait on it while not nil; Heal closes it

	adverts atomic.Int64 // ref advertisements asked for (ls-remote, a fetch's first step)
}

// RefAdvertisements returns how many times a client asked the server for
// a repository's refs to read (GET .../info/refs?service=git-upload-pack):
// once per ls-remote, and at the start of a fetch that was not handed one.
func (s *GitServer) RefAdvertisements() int64 { return s.adverts.Load() }

// GitServerOptions configures StartGitServer; the zero value serves without auth.
// Username and Password are the basic-auth pair every request must carry
// when Username is set; tests of git credentials use them.
type GitServerOptions struct {
	Username string
	Password string
}

// StartGitServer serves an empty set of repositories until the test ends.
func StartGitServer(t testing.TB, opts GitServerOptions) *GitServer {
	t.Helper()
	root := t.TempDir()
	s := &GitServer{Root: root}
	srv, err := githttp.Start(githttp.Options{Root: root, Username: opts.Username, Password: opts.Password, Wrap: s.faults})
	if err != nil {
		t.Fatalf("git server: %v", err)
	}
	s.URL = srv.URL
	// A Close error at the test's end would not say anything about the test.
	// Heal first: a hung request would hold Close up.
	t.Cleanup(func() { s.Heal(); _ = srv.Close() })
	return s
}

// Fail makes the server answer every request with status (a 5xx, say)
// until Heal.
func (s *GitServer) Fail(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
}

// Hang makes every request wait, answering nothing, until Heal or until
// the client gives up.
func (s *GitServer) Hang() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hang == nil {
		s.hang = make(chan struct{})
	}
}

// Heal ends Fail and Hang: requests waiting go on, new ones are served.
func (s *GitServer) Heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = 0
	if s.hang != nil {
		close(s.hang)
		s.hang = nil
	}
}

// faults wraps the git handler with the mode Fail, Hang and Heal set.
func (s *GitServer) faults(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/info/refs") && r.URL.Query().Get("service") == "git-upload-pack" {
			s.adverts.Add(1)
		}
		s.mu.Lock()
		status, hang := s.status, s.hang
		s.mu.Unlock()
		if hang != nil {
			select {
			case <-hang:
			case <-r.Context().Done():
				return
			}
		}
		if status != 0 {
			http.Error(w, http.StatusText(status), status)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Repo is one bare repository on a GitServer, with a private work tree the
// helpers commit from.
// Its methods fail the test on error and are not safe for concurrent use
// (they share one work tree).
type Repo struct {
	// Name is the repository's name, without ".git".
	Name string
	URL  string // smart-HTTP address, without credentials
	Path string // the bare repository on disk, usable as a local-path remote

	repo *githttp.Repo
}

// CreateRepo makes an empty bare repository "<name>.git" whose default
// branch is main.
// Its work tree is a fresh t.TempDir, removed with the test.
func (s *GitServer) CreateRepo(t testing.TB, name string) *Repo {
	t.Helper()
	repo, err := githttp.CreateRepo(s.Root, name, t.TempDir())
	if err != nil {
		t.Fatalf("create repo %s: %v", name, err)
	}
	return &Repo{Name: name, URL: s.URL + "/" + name + ".git", Path: repo.Path, repo: repo}
}

// Commit writes files (path → content) and deletes paths in delete on
// branch (created from the current work tree head when new), commits and
// pushes. It returns the new commit's full hash.
func (r *Repo) Commit(t testing.TB, branch string, files map[string]string, delete ...string) string {
	t.Helper()
	sha, err := r.repo.Commit(branch, files, delete...)
	if err != nil {
		t.Fatalf("commit to %s: %v", branch, err)
	}
	return sha
}

// Head returns the commit branch points at in the served repository.
// It reads the bare repository, so it sees pushes from anywhere.
func (r *Repo) Head(t testing.TB, branch string) string {
	t.Helper()
	return runGit(t, r.Path, "rev-parse", "refs/heads/"+branch)
}

// CreateBranch points a new branch at the commit rev names.
// It works on the bare repository directly: no push, no work tree.
func (r *Repo) CreateBranch(t testing.TB, name, rev string) {
	t.Helper()
	runGit(t, r.Path, "branch", name, rev)
}

// MoveBranch points an existing branch at rev, as a force-push would.
func (r *Repo) MoveBranch(t testing.TB, name, rev string) {
	t.Helper()
	// update-ref takes any object; peel tags so the branch points at a commit.
	sha := runGit(t, r.Path, "rev-parse", rev+"^{commit}")
	runGit(t, r.Path, "update-ref", "refs/heads/"+name, sha)
}

// SetRef points ref, a full ref name outside the branches and tags (such
// as refs/pull/7/head, which a forge keeps of a pull request's head), at
// the commit rev names in the served repository.
func (r *Repo) SetRef(t testing.TB, ref, rev string) {
	t.Helper()
	sha := runGit(t, r.Path, "rev-parse", rev+"^{commit}")
	runGit(t, r.Path, "update-ref", ref, sha)
}

// DeleteBranch removes a branch from the served repository.
// -D, not -d: whether the branch was merged does not matter to a test.
func (r *Repo) DeleteBranch(t testing.TB, name string) {
	t.Helper()
	runGit(t, r.Path, "branch", "-D", name)
}

// Tag creates a lightweight tag, or an annotated one when message is set.
// An annotated tag is a tag object pointing at the commit, as release
// tooling makes them; code that resolves tags must peel it.
func (r *Repo) Tag(t testing.TB, name, rev, message string) {
	t.Helper()
	if message == "" {
		runGit(t, r.Path, "tag", name, rev)
		return
	}
	runGit(t, r.Path, "tag", "-a", "-m", message, name, rev)
}

// runGit runs git in dir and returns trimmed stdout, failing the test on error.
func runGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := githttp.Git(dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

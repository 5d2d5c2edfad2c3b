package harness

import (
	"fmt"
	"strings"
	"testing"

	"github.com/skep-cd/skep/githttp"
)

// GitServer serves bare repositories over git's smart HTTP protocol (see
// package githttp) on a loopback port until the test ends. Every repository
// accepts pushes. With a username set, every request needs HTTP basic auth.
type GitServer struct {
	// URL is the base address, "http://127.0.0.1:<port>", without credentials.
	URL  string
	Root string // directory holding the bare repositories

	username, password string
}

// GitServerOptions configures StartGitServer; the zero value serves without auth.
type GitServerOptions struct {
	Username string
	Password string
}

// StartGitServer serves an empty set of repositories until the test ends.
func StartGitServer(t testing.TB, opts GitServerOptions) *GitServer {
	t.Helper()
	root := t.TempDir()
	srv, err := githttp.Start(githttp.Options{Root: root, Username: opts.Username, Password: opts.Password})
	if err != nil {
		t.Fatalf("git server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return &GitServer{URL: srv.URL, Root: root, username: opts.Username, password: opts.Password}
}

// Repo is one bare repository on a GitServer, with a private work tree the
// helpers commit from.
type Repo struct {
	Name string
	URL  string // smart-HTTP address, without credentials
	Path string // the bare repository on disk, usable as a local-path remote

	server *GitServer
	repo   *githttp.Repo
}

// CreateRepo makes an empty bare repository "<name>.git" whose default
// branch is main.
func (s *GitServer) CreateRepo(t testing.TB, name string) *Repo {
	t.Helper()
	repo, err := githttp.CreateRepo(s.Root, name, t.TempDir())
	if err != nil {
		t.Fatalf("create repo %s: %v", name, err)
	}
	return &Repo{Name: name, URL: s.URL + "/" + name + ".git", Path: repo.Path, server: s, repo: repo}
}

// AuthURL is URL with the server's basic-auth credentials embedded, for
// clients that take them that way (the git CLI in tests).
func (r *Repo) AuthURL() string {
	if r.server.username == "" {
		return r.URL
	}
	return strings.Replace(r.URL, "http://", fmt.Sprintf("http://%s:%s@", r.server.username, r.server.password), 1)
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
func (r *Repo) Head(t testing.TB, branch string) string {
	t.Helper()
	return runGit(t, r.Path, "rev-parse", "refs/heads/"+branch)
}

// CreateBranch points a new branch at the commit rev names.
func (r *Repo) CreateBranch(t testing.TB, name, rev string) {
	t.Helper()
	runGit(t, r.Path, "branch", name, rev)
}

// MoveBranch points an existing branch at rev, as a force-push would.
func (r *Repo) MoveBranch(t testing.TB, name, rev string) {
	t.Helper()
	sha := runGit(t, r.Path, "rev-parse", rev+"^{commit}")
	runGit(t, r.Path, "update-ref", "refs/heads/"+name, sha)
}

// DeleteBranch removes a branch from the served repository.
func (r *Repo) DeleteBranch(t testing.TB, name string) {
	t.Helper()
	runGit(t, r.Path, "branch", "-D", name)
}

// Tag creates a lightweight tag, or an annotated one when message is set.
func (r *Repo) Tag(t testing.TB, name, rev, message string) {
	t.Helper()
	if message == "" {
		runGit(t, r.Path, "tag", name, rev)
		return
	}
	runGit(t, r.Path, "tag", "-a", "-m", message, name, rev)
}

// DeleteTag removes a tag from the served repository.
func (r *Repo) DeleteTag(t testing.TB, name string) {
	t.Helper()
	runGit(t, r.Path, "tag", "-d", name)
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

package harness

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// GitServer serves bare repositories over git's smart HTTP protocol, with
// `git http-backend` behind net/http/cgi, on a loopback port. Every
// repository accepts pushes. With a username set, every request needs HTTP
// basic auth.
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
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	root := t.TempDir()
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Root: "/",
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	s := &GitServer{Root: root, username: opts.Username, password: opts.Password}
	var handler http.Handler = backend
	if opts.Username != "" {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user, pass, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(user), []byte(s.username)) != 1 ||
				subtle.ConstantTimeCompare([]byte(pass), []byte(s.password)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="skep-test"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			backend.ServeHTTP(w, r)
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("git server listen: %v", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	s.URL = "http://" + ln.Addr().String()
	return s
}

// Repo is one bare repository on a GitServer, with a private work tree the
// helpers commit from.
type Repo struct {
	Name string
	URL  string // smart-HTTP address, without credentials
	Path string // the bare repository on disk, usable as a local-path remote

	server *GitServer
	work   string
}

// CreateRepo makes an empty bare repository "<name>.git" whose default
// branch is main.
func (s *GitServer) CreateRepo(t testing.TB, name string) *Repo {
	t.Helper()
	bare := filepath.Join(s.Root, name+".git")
	runGit(t, "", "init", "--quiet", "--bare", "--initial-branch=main", bare)
	runGit(t, bare, "config", "http.receivepack", "true")
	work := t.TempDir()
	runGit(t, work, "init", "--quiet", "--initial-branch=main")
	runGit(t, work, "remote", "add", "origin", bare)
	return &Repo{Name: name, URL: s.URL + "/" + name + ".git", Path: bare, server: s, work: work}
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
	runGit(t, r.work, "fetch", "--quiet", "origin")
	if r.bareHas(t, "refs/heads/"+branch) {
		runGit(t, r.work, "checkout", "--quiet", "-B", branch, "origin/"+branch)
	} else if r.workHasCommits(t) {
		runGit(t, r.work, "checkout", "--quiet", "-B", branch)
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(r.work, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatalf("commit: %v", err)
		}
		if err := os.WriteFile(full, []byte(files[p]), 0o644); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	for _, p := range delete {
		if err := os.RemoveAll(filepath.Join(r.work, filepath.FromSlash(p))); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	runGit(t, r.work, "add", "--all")
	runGit(t, r.work, "commit", "--quiet", "--allow-empty", "-m", fmt.Sprintf("test commit on %s: %s", branch, strings.Join(paths, ", ")))
	runGit(t, r.work, "push", "--quiet", "--force", "origin", "HEAD:refs/heads/"+branch)
	return r.Head(t, branch)
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

func (r *Repo) bareHas(t testing.TB, ref string) bool {
	t.Helper()
	return exec.Command("git", "-C", r.Path, "rev-parse", "--verify", "--quiet", ref).Run() == nil
}

func (r *Repo) workHasCommits(t testing.TB) bool {
	t.Helper()
	return exec.Command("git", "-C", r.work, "rev-parse", "--verify", "--quiet", "HEAD").Run() == nil
}

// runGit runs git in dir with a fixed identity and returns trimmed stdout.
func runGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=Skep Test", "GIT_AUTHOR_EMAIL=test@skep.invalid",
		"GIT_COMMITTER_NAME=Skep Test", "GIT_COMMITTER_EMAIL=test@skep.invalid",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
	)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

package githttp

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Repo is a bare repository under a server's root with a private work tree
// that commits are made from. Its methods run the git executable with a
// fixed identity; they are not safe for concurrent use.
type Repo struct {
	// Name is the repository's name, without ".git".
	Name string
	Path string // the bare repository
	// work is the private work tree; only Commit uses it.
	work string
}

// CreateRepo makes the empty bare repository root/<name>.git (default
// branch main, pushes accepted) and a work tree for it in workDir.
func CreateRepo(root, name, workDir string) (*Repo, error) {
	bare := filepath.Join(root, name+".git")
	if _, err := Git("", "init", "--quiet", "--bare", "--initial-branch=main", bare); err != nil {
		return nil, err
	}
	// git-http-backend refuses pushes from unauthenticated clients unless
	// told otherwise; tests push over HTTP without a REMOTE_USER.
	if _, err := Git(bare, "config", "http.receivepack", "true"); err != nil {
		return nil, err
	}
	if _, err := Git(workDir, "init", "--quiet", "--initial-branch=main"); err != nil {
		return nil, err
	}
	// The work tree pushes to the bare path directly, not over HTTP: a
	// commit then needs no running server.
	if _, err := Git(workDir, "remote", "add", "origin", bare); err != nil {
		return nil, err
	}
	return &Repo{Name: name, Path: bare, work: workDir}, nil
}

// Commit writes files (slash path → content) and removes paths in remove on
// branch, commits, pushes, and returns the new commit's hash. A new branch
// starts from the work tree's current commit.
func (r *Repo) Commit(branch string, files map[string]string, remove ...string) (string, error) {
	// Another Repo value (or a test's own git) may have pushed since.
	if _, err := Git(r.work, "fetch", "--quiet", "origin"); err != nil {
		return "", err
	}
	// An existing branch is checked out as the server has it, so commits
	// build on what was pushed and not on this work tree's last state.
	if r.has(r.Path, "refs/heads/"+branch) {
		if _, err := Git(r.work, "checkout", "--quiet", "-B", branch, "origin/"+branch); err != nil {
			return "", err
		}
	} else if r.has(r.work, "HEAD") {
		if _, err := Git(r.work, "checkout", "--quiet", "-B", branch); err != nil {
			return "", err
		}
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	// Sorted: map order is random, and the message should not be.
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(r.work, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(full, []byte(files[p]), 0o644); err != nil {
			return "", err
		}
	}
	for _, p := range remove {
		if err := os.RemoveAll(filepath.Join(r.work, filepath.FromSlash(p))); err != nil {
			return "", err
		}
	}
	msg := fmt.Sprintf("update %s on %s", strings.Join(append(paths, remove...), ", "), branch)
	for _, args := range [][]string{
		{"add", "--all"},
		// --allow-empty: a Commit that changes nothing still makes a new
		// commit, so callers always get a fresh hash.
		{"commit", "--quiet", "--allow-empty", "-m", msg},
		// --force, since a test may have moved the branch behind this work
		// tree's back (harness.Repo.MoveBranch).
		{"push", "--quiet", "--force", "origin", "HEAD:refs/heads/" + branch},
	} {
		if _, err := Git(r.work, args...); err != nil {
			return "", err
		}
	}
	return r.Head(branch)
}

// Head returns the commit branch points at in the bare repository.
func (r *Repo) Head(branch string) (string, error) {
	return Git(r.Path, "rev-parse", "refs/heads/"+branch)
}

// has reports whether ref resolves in the repository at dir.
func (r *Repo) has(dir, ref string) bool {
	return exec.Command("git", "-C", dir, "rev-parse", "--verify", "--quiet", ref).Run() == nil
}

// Git runs git with args in dir (none when empty) under a fixed identity and
// returns its trimmed standard output, or an error carrying its stderr.
func Git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=Skep", "GIT_AUTHOR_EMAIL=skep@localhost.invalid",
		"GIT_COMMITTER_NAME=Skep", "GIT_COMMITTER_EMAIL=skep@localhost.invalid",
		// No system config, so a machine's settings cannot change results; no
		// prompt, so a missing credential fails instead of hanging the test.
		"GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
	)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

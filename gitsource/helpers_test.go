package gitsource

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// This file is a small git test rig: repositories made with the real git
// command line, served over local paths, smart HTTP (git http-backend
// behind net/http/cgi) and ssh (golang.org/x/crypto/ssh running
// git-upload-pack).

// testRepo is a non-bare repository in a temporary directory.
type testRepo struct {
	t   testing.TB
	dir string
}

func gitEnv() []string {
	return append(os.Environ(),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.org",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.org",
	)
}

func runGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// newTestRepo makes a repository at dir (a new temporary one when "")
// whose default branch is main.
func newTestRepo(t testing.TB, dir string) *testRepo {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	runGit(t, dir, "init", "-q", "-b", "main")
	return &testRepo{t: t, dir: dir}
}

// commit writes files (path → content; "" deletes; "->target" makes a
// symlink) and commits them, returning the new sha.
func (r *testRepo) commit(msg string, files map[string]string) string {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.dir, filepath.FromSlash(name))
		_ = os.Remove(p)
		switch {
		case content == "":
			continue
		case strings.HasPrefix(content, "->"):
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				r.t.Fatal(err)
			}
			if err := os.Symlink(strings.TrimPrefix(content, "->"), p); err != nil {
				r.t.Fatal(err)
			}
		default:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				r.t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				r.t.Fatal(err)
			}
		}
	}
	runGit(r.t, r.dir, "add", "-A")
	runGit(r.t, r.dir, "commit", "-q", "--allow-empty", "-m", msg)
	return r.head()
}

func (r *testRepo) head() string {
	r.t.Helper()
	return runGit(r.t, r.dir, "rev-parse", "HEAD")
}

func (r *testRepo) git(args ...string) string {
	r.t.Helper()
	return runGit(r.t, r.dir, args...)
}

// bareCopy clones r into a bare repository at dir.
func (r *testRepo) bareCopy(dir string) string {
	r.t.Helper()
	runGit(r.t, filepath.Dir(dir), "clone", "-q", "--bare", r.dir, dir)
	return dir
}

// gitServer serves every repository under root over smart HTTP. When
// user is set it demands basic auth with user and password, or a bearer
// token equal to token. It counts requests by URL path suffix.
type gitServer struct {
	URL      string
	requests sync.Map // suffix → *atomic.Int64
	// conns counts the connections clients opened.
	conns atomic.Int64
	// before, when set before the first request, runs at the start of
	// each request.
	before func(*http.Request)
	srv    *httptest.Server
}

func serveHTTP(t testing.TB, root, user, password, token string) *gitServer {
	t.Helper()
	s := newGitServer(t, root, user, password, token)
	s.srv.Start()
	s.URL = s.srv.URL
	return s
}

// newGitServer is serveHTTP's server, not started yet.
func newGitServer(t testing.TB, root, user, password, token string) *gitServer {
	t.Helper()
	execPath := runGit(t, root, "--exec-path")
	backend := &cgi.Handler{
		Path:       filepath.Join(execPath, "git-http-backend"),
		Env:        []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"},
		InheritEnv: []string{"PATH"},
		Stderr:     io.Discard, // "Not a git repository" for the missing-repository tests
	}
	s := &gitServer{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if s.before != nil {
			s.before(req)
		}
		if user != "" {
			u, p, basic := req.BasicAuth()
			bearer := token != "" && req.Header.Get("Authorization") == "Bearer "+token
			if !bearer && (!basic || u != user || p != password) {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "who are you", http.StatusUnauthorized)
				return
			}
		}
		for _, suffix := range []string{"/info/refs", "/git-upload-pack"} {
			if strings.HasSuffix(req.URL.Path, suffix) {
				n, _ := s.requests.LoadOrStore(suffix, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}
		}
		backend.ServeHTTP(w, req)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	t.Cleanup(srv.Close)
	s.srv = srv
	return s
}

// serveRedirect answers every request with a redirect to the same path
// under to, "/old" renamed "/app", as a forge does for a renamed
// repository; seen, when set, sees each request first.
func serveRedirect(t testing.TB, to string, status int, seen func(*http.Request)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen != nil {
			seen(r)
		}
		u := to + strings.Replace(r.URL.Path, "/old", "/app", 1)
		if r.URL.RawQuery != "" {
			u += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, u, status)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (s *gitServer) count(suffix string) int64 {
	n, ok := s.requests.Load(suffix)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// sshServer serves repositories over ssh: it accepts one client key and
// runs git-upload-pack for "exec" requests.
type sshServer struct {
	Addr       string // host:port
	KnownHosts string // a known_hosts file naming the server's key
	ClientKey  string // a private key file the server accepts
}

func serveSSH(t *testing.T) *sshServer {
	t.Helper()
	dir := t.TempDir()
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	clientPub, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(clientPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	s := &sshServer{ClientKey: filepath.Join(dir, "id_ed25519"), KnownHosts: filepath.Join(dir, "known_hosts")}
	if err := os.WriteFile(s.ClientKey, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	allowed, err := ssh.NewPublicKey(clientPub)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), allowed.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("unknown key")
		},
	}
	cfg.AddHostKey(hostSigner)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = ln.Addr().String()
	line := knownhosts.Line([]string{knownhosts.Normalize(s.Addr)}, hostSigner.PublicKey())
	if err := os.WriteFile(s.KnownHosts, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serveSSHConn(conn, cfg) })
		}
	})
	return s
}

func serveSSHConn(conn net.Conn, cfg *ssh.ServerConfig) {
	defer conn.Close()
	_, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			return
		}
		go serveSSHSession(ch, chReqs)
	}
}

func serveSSHSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			_ = req.Reply(false, nil)
			continue
		}
		var payload struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
			_ = req.Reply(false, nil)
			return
		}
		service, repoPath, ok := strings.Cut(payload.Command, " ")
		if !ok || service != "git-upload-pack" {
			_ = req.Reply(false, nil)
			return
		}
		_ = req.Reply(true, nil)
		cmd := exec.Command("git", "upload-pack", strings.Trim(repoPath, "'"))
		cmd.Env = gitEnv()
		cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return
		}
		status := uint32(0)
		if err := cmd.Start(); err != nil {
			return
		}
		// Not cmd.Stdin = ch: Wait would then wait for the client to close
		// its side, which it does only after the exit status arrives.
		go func() { _, _ = io.Copy(stdin, ch); _ = stdin.Close() }()
		if err := cmd.Wait(); err != nil {
			status = 1
		}
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
		return
	}
}

// newCache returns a Cache in a temporary directory, logging to the test.
func newCache(t testing.TB, o Options) *Cache {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Package githttp serves bare git repositories over git's smart HTTP
// protocol by running `git http-backend` behind net/http/cgi.
//
// It is what the tests and `skep demo` use as a real git server, so that
// gitsource is exercised against git's own protocol code and not a fake.
// It never serves a repository outside its root, never listens beyond the
// loopback interface, and with credentials set it refuses every request
// without them (HTTP basic auth, compared in constant time). It is not
// meant for production: no TLS, no rate limits, no access log.
//
// It needs the git executable; Repo and Git run it with a fixed identity
// and without the system git config, so results do not depend on the
// machine's settings.
package githttp

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Options configure a Server. The zero value serves Root without auth.
type Options struct {
	// Root holds the bare repositories, served as /<name>.git.
	Root string
	// Username and Password, when Username is set, are required on every
	// request.
	Username string
	Password string
	// Wrap, when set, wraps the handler that serves every request (after
	// auth); tests use it to make the server fail or stall.
	Wrap func(http.Handler) http.Handler
}

// Server is a running smart-HTTP git server on a loopback port.
type Server struct {
	// URL is "http://127.0.0.1:<port>", without credentials.
	URL string

	// srv and done are set by Start; done receives Serve's result once.
	srv  *http.Server
	done chan error
}

// Start listens on 127.0.0.1 and serves opts.Root until Close.
// It does not block; the caller must Close the server.
func Start(opts Options) (*Server, error) {
	// git-http-backend is not on PATH in most installs; git knows where its
	// helpers live.
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("find git-http-backend: git --exec-path: %w", err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		// The CGI handler's Root is the URL prefix it strips; every path is
		// passed through, and git-http-backend confines it to GIT_PROJECT_ROOT.
		Root: "/",
		// EXPORT_ALL serves every repository without a git-daemon-export-ok
		// file in each.
		Env: []string{"GIT_PROJECT_ROOT=" + opts.Root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	var handler http.Handler = backend
	if opts.Wrap != nil {
		handler = opts.Wrap(handler)
	}
	if opts.Username != "" {
		handler = basicAuth(opts.Username, opts.Password, handler)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("git server listen: %w", err)
	}
	s := &Server{
		URL:  "http://" + ln.Addr().String(),
		srv:  &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second},
		done: make(chan error, 1),
	}
	// Buffered done: Serve's goroutine ends even if Close is never called.
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server and waits for it to return.
// It is not safe to call twice: the second call would wait forever for
// Serve's result, which the first one took.
func (s *Server) Close() error {
	// Close takes no context (io.Closer); a bounded one of its own keeps a
	// hung fetch from hanging the caller's cleanup.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serveErr := <-s.done; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	return err
}

// basicAuth lets a request through to next only with user and pass.
func basicAuth(user, pass string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		// Both compared in constant time, and both always compared, so timing
		// does not tell which one was wrong.
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user)) != 1 ||
			subtle.ConstantTimeCompare([]byte(p), []byte(pass)) != 1 {
			// git sends credentials only after a 401 with this challenge.
			w.Header().Set("WWW-Authenticate", `Basic realm="skep"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

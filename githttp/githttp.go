// Package githttp serves bare git repositories over git's smart HTTP
// protocol by running `git http-backend` behind net/http/cgi.
//
// It is what the tests and `skep demo` use as a real git server. It never
// serves a repository outside its root, and with credentials set it refuses
// every request without them (HTTP basic auth, compared in constant time).
// It needs the git executable.
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
}

// Server is a running smart-HTTP git server on a loopback port.
type Server struct {
	// URL is "http://127.0.0.1:<port>", without credentials.
	URL string

	srv  *http.Server
	done chan error
}

// Start listens on 127.0.0.1 and serves opts.Root until Close.
func Start(opts Options) (*Server, error) {
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("find git-http-backend: git --exec-path: %w", err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Root: "/",
		Env:  []string{"GIT_PROJECT_ROOT=" + opts.Root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	var handler http.Handler = backend
	if opts.Username != "" {
		handler = basicAuth(opts.Username, opts.Password, backend)
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
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server and waits for it to return.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serveErr := <-s.done; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	return err
}

func basicAuth(user, pass string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user)) != 1 ||
			subtle.ConstantTimeCompare([]byte(p), []byte(pass)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="skep"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

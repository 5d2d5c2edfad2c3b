package harness

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/google/go-containerregistry/pkg/registry"
)

// Registry is a real OCI registry (go-containerregistry's) served over plain
// HTTP on a loopback port. The Docker Engine treats 127.0.0.0/8 registries
// as insecure by default, so it pulls from it without configuration.
type Registry struct {
	// Host is "127.0.0.1:<port>", the prefix of every reference in it.
	Host string

	mu     sync.Mutex
	status int // what Fail set; 0 serves
}

// Fail makes the registry answer every request with status (a 503, say)
// until Heal: a registry gone down for whoever pulls or asks.
func (r *Registry) Fail(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = status
}

// Heal ends Fail.
func (r *Registry) Heal() { r.Fail(0) }

// faults wraps the registry with the failure Fail sets.
func (r *Registry) faults(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		status := r.status
		r.mu.Unlock()
		if status != 0 {
			http.Error(w, http.StatusText(status), status)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// StartRegistry serves an empty in-memory registry until the test ends.
func StartRegistry(t testing.TB) *Registry {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("registry listen: %v", err)
	}
	reg := &Registry{Host: ln.Addr().String()}
	srv := &http.Server{
		// The registry logs every request; test output needs none of it.
		Handler:           reg.faults(registry.New(registry.Logger(log.New(io.Discard, "", 0)))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Serve returns ErrServerClosed after Close; any other error shows as
		// failed pushes in the test itself.
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		// Close, not Shutdown: nothing in flight at the test's end matters.
		_ = srv.Close()
		<-done
	})
	return reg
}

// Ref returns the registry reference for repo:tag.
// Ref only formats: the image need not exist.
func (r *Registry) Ref(repo, tag string) string {
	return fmt.Sprintf("%s/%s:%s", r.Host, repo, tag)
}

// Push tags the local image localRef as repo:tag in the registry and pushes
// it through the Engine API. It returns the registry reference.
func (r *Registry) Push(t testing.TB, cli *client.Client, localRef, repo, tag string) string {
	t.Helper()
	ref := r.Ref(repo, tag)
	if err := PushImage(t.Context(), cli, localRef, ref); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	t.Cleanup(func() {
		// Only the registry tag goes; the local image stays cached.
		// A failed untag leaves a tag in the local image store, which harms
		// no later test: tags name a fresh registry port each time.
		_, _ = cli.ImageRemove(context.WithoutCancel(t.Context()), ref, image.RemoveOptions{})
	})
	return ref
}

// PushImage tags localRef as ref and pushes it with the Engine API.
// It blocks until the push ended, at most two minutes.
func PushImage(ctx context.Context, cli *client.Client, localRef, ref string) error {
	if err := cli.ImageTag(ctx, localRef, ref); err != nil {
		return fmt.Errorf("tag %s as %s: %w", localRef, ref, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	rc, err := cli.ImagePush(ctx, ref, image.PushOptions{
		// The Engine requires an auth header even for an open registry.
		RegistryAuth: base64.URLEncoding.EncodeToString([]byte("{}")),
	})
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	defer rc.Close()
	// The push's outcome is in the stream: the Engine answers 200 first.
	return readJSONStream(rc)
}

package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// AppPort is the port the demo application listens on in its container.
// The image's ENV sets DEMO_ADDR to it; the host port is Options.AppPort.
const AppPort = 8080

// AppReply is what the demo application answers on GET /.
// The showcase reads Version to see which image is running.
type AppReply struct {
	// Version is the image's DEMO_VERSION: "v1" or "v2".
	Version string `json:"version"`
	// Hostname is the container's, telling replicas apart.
	Hostname string `json:"hostname"`
}

// ServeApp runs the demo application on addr until ctx ends: GET / answers
// its version ($DEMO_VERSION) and hostname, GET /healthz answers ok.
// It blocks, and returns nil after a clean shutdown.
func ServeApp(ctx context.Context, addr string) error {
	// Without a hostname the reply just leaves it empty; that is no reason
	// to fail the app.
	host, _ := os.Hostname()
	reply := AppReply{Version: os.Getenv("DEMO_VERSION"), Hostname: host}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		// An encode error here is a write to a client that went away; there is
		// nobody left to tell.
		_ = json.NewEncoder(w).Encode(reply)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	// Buffered: the serving goroutine must be able to exit even when ctx
	// ended first and nobody reads its error until after Shutdown.
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return fmt.Errorf("demo app on %s: %w", addr, err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// CheckApp asks the demo application on addr whether it is healthy: the
// image's HEALTHCHECK runs this.
func CheckApp(ctx context.Context, addr string) error {
	// ":8080" means every interface to a listener, but a client needs a
	// host; inside the container loopback reaches the app.
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	// As the image's HEALTHCHECK --timeout=2s: a hung app fails the check
	// rather than hanging it.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("demo app health: status %d", resp.StatusCode)
	}
	return nil
}

package cli

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/skep-cd/skep/client"
)

// TestWaitSyncWaitsUntilTheLiveViewShowsTheWrite pins what --wait means:
// a sync that ended is not done while the controller says its live view
// does not show the write yet, even though the counts it reports (of the
// swarm before the write: none, for an install) look converged.
func TestWaitSyncWaitsUntilTheLiveViewShowsTheWrite(t *testing.T) {
	const stale = "the live snapshot does not show the last write yet"
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/applications/web" {
			http.NotFound(w, r)
			return
		}
		running, desired, converging := 0, 0, stale
		switch n := polls.Add(1); {
		case n == 2:
			running, desired, converging = 0, 1, "release web: service web_web still runs task t1 of an earlier spec"
		case n >= 3:
			running, desired, converging = 1, 1, ""
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"application":{"name":"web","repo":"r","targetRevision":"main","path":".","swarm":"","releases":["web"],
			"automated":false,"sync":"synced","health":"healthy","drift":[],"phase":"idle","services":{"services":1,"running":%d,"desired":%d},
			"lastSync":{"id":1,"revision":"0123456789abcdef","outcome":"succeeded","startedAt":"2026-12-04T18:30:00Z"}},
			"releases":[],"converging":%q}`, running, desired, converging)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(client.Options{Server: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := waitSync(t.Context(), c, &out, "web", 1); err != nil {
		t.Fatalf("waitSync: %v\n%s", err, &out)
	}
	if n := polls.Load(); n < 3 {
		t.Errorf("waitSync returned after %d polls, while the controller still said the live view does not show the write:\n%s", n, &out)
	}
	if !strings.Contains(out.String(), stale) || !strings.HasSuffix(out.String(), "web: converging, services 1/1 converged\n") {
		t.Errorf("waitSync output does not say what it waited for, then the converged services:\n%s", &out)
	}
}

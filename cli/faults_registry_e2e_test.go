package cli_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/wire"
)

func TestFaultRegistryFailingWhileAnArtifactWaitsKeepsWhatRuns(t *testing.T) {
	slowFault(t)
	docker := harness.RequireSwarm(t)
	e := newFaultEnv(t, docker, mainSocket(t))
	reg := startRegistryProxy(t, harness.StartRegistry(t).Host)
	// Everything names the registry through the proxy: the gate's HEAD
	// requests, the pushes and the Engine's pulls.
	viaProxy := &harness.Registry{Host: reg.host}
	image := reg.host + "/team/web"
	viaProxy.Push(t, docker, e.v1, "team/web", "v1")
	viaProxy.Push(t, docker, e.v2, "team/web", "v2")
	source := e.git.CreateRepo(t, "web-source")
	source.Commit(t, "main", map[string]string{"README": "web\n"})
	source.Tag(t, "v1", "main", "v1")
	source.Tag(t, "v2", "main", "v2")
	pin := func(version string) map[string]string {
		return map[string]string{"releases/testing/web.yaml": fmt.Sprintf(
			"- kind: service\n  name: web\n  image: %s\n  source: %s\n  deploy:\n    release: %s\n", image, source.URL, version)}
	}
	files := pin("v1")
	files["compose.yaml"] = faultCompose("WEB_IMAGE")
	first := e.repo.Commit(t, "main", files)
	e.artifacts = "    artifacts: {path: releases, environment: testing}\n"
	e.writeApps(t, "main")

	e.startController(t, filepath.Join(e.dir, "data"))
	e.waitConverged(t, first, image+":v1@sha256:", 2*time.Minute)
	handMade := e.handMade(t, e.ns, "handmade")
	running, err := listObjects(t.Context(), docker, e.ns)
	if err != nil {
		t.Fatal(err)
	}
	before := versions(running)

	events := e.followEvents(t)
	reg.fail(http.StatusServiceUnavailable)
	moved := e.repo.Commit(t, "main", pin("v2"))
	e.cli.ok(t, "app", "refresh", "stack")
	// waitArtifact waits until the artifact web waits for v2 and its
	// reason names why.
	waitArtifact := func(t *testing.T, why string) {
		t.Helper()
		harness.Eventually(t, 2*time.Minute, func(context.Context) (bool, string) {
			d := e.app(t)
			a, ok := artifactNamed(d, "web")
			return ok && d.Application.Revision == moved && a.Desired == "v2" && a.Drift == "waiting" &&
					strings.Contains(a.Reason, why) && d.Application.DriftReason == "artifact",
				fmt.Sprintf("at %.12s, drift %q, artifact %+v", d.Application.Revision, d.Application.DriftReason, a)
		})
	}
	// unmoved fails t when a service was written since the wait began.
	unmoved := func(t *testing.T) {
		t.Helper()
		now, err := listObjects(t.Context(), docker, e.ns)
		if err != nil {
			t.Fatal(err)
		}
		e.checkObjects(t, now, 1, handMade)
		if a := versions(now); !maps.Equal(before, a) {
			t.Errorf("services written while the registry failed: before %v, after %v", before, a)
		}
	}
	for _, tc := range []struct {
		name, why string
		fault     func()
	}{
		{"503: the artifact waits and says the registry answered 503", "503", func() {}},
		{"429: the artifact waits and says it was throttled", "429", func() { reg.fail(http.StatusTooManyRequests) }},
		{"down: the artifact waits and says the connection closed", "EOF", func() { reg.fail(-1) }},
		{"hanging: the check gives up after its timeout and says so", "no answer within 30s", func() { reg.fail(-2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fault()
			waitArtifact(t, tc.why)
			unmoved(t)
			if a := e.app(t).Application; a.Health != "healthy" || a.Sync != "out-of-sync" {
				t.Errorf("application %s, %s while v2 waits; want healthy and out-of-sync", a.Health, a.Sync)
			}
		})
	}
	for _, ev := range events.events() {
		if ev["type"] == "sync-started" || ev["type"] == "sync-failed" {
			t.Errorf("%s while the registry failed: %v", ev["type"], ev["message"])
		}
	}

	t.Run("once the registry answers, v2 deploys", func(t *testing.T) {
		reg.fail(0)
		objs := e.waitConverged(t, moved, image+":v2@sha256:", 6*time.Minute)
		e.checkObjects(t, objs, 2, handMade)
		var waiting int
		for _, ev := range events.events() {
			if ev["type"] == "drift-detected" && strings.Contains(fmt.Sprint(ev["message"]), "waiting for their image") {
				waiting++
			}
		}
		// One per reason the registry gave, not one per tick.
		if waiting == 0 || waiting > 4 {
			t.Errorf("%d drift-detected events for the waiting artifact, want one per reason (4)", waiting)
		}
	})
}

func artifactNamed(d wire.ApplicationDetail, name string) (wire.Artifact, bool) {
	for _, a := range d.Application.Artifacts {
		if a.Name == name {
			return a, true
		}
	}
	return wire.Artifact{}, false
}

// registryProxy forwards to a registry until told to fail: answer a status
// (with Retry-After on 429 and 503), for -1 close the connection without an
// answer, for -2 answer nothing until the client gives up.
type registryProxy struct {
	host string
	mu   sync.Mutex
	mode int
}

func startRegistryProxy(t *testing.T, target string) *registryProxy {
	t.Helper()
	p := &registryProxy{}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.host = ln.Addr().String()
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		mode := p.mode
		p.mu.Unlock()
		switch {
		case mode == -1:
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
		case mode == -2:
			<-r.Context().Done() // the client gives up, or the server closes
		case mode > 0:
			w.Header().Set("Retry-After", "1")
			http.Error(w, http.StatusText(mode), mode)
		default:
			rp.ServeHTTP(w, r)
		}
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return p
}

// fail sets the proxy's mode: 0 forwards, a status answers it, -1 drops
// the connection, -2 hangs.
func (p *registryProxy) fail(mode int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
}

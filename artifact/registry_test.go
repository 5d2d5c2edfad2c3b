package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/skep-cd/skep/egress"
)

// countingRegistry serves a real OCI registry on loopback and counts the
// manifest requests it answers; fail makes it answer 503 instead.
type countingRegistry struct {
	host  string
	heads atomic.Int64
	gets  atomic.Int64
	fail  atomic.Bool
}

func startRegistry(t *testing.T) *countingRegistry {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	c := &countingRegistry{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/manifests/") {
			if r.Method == http.MethodHead {
				c.heads.Add(1)
			} else {
				c.gets.Add(1)
			}
			if c.fail.Load() {
				http.Error(w, "unavailable", http.StatusServiceUnavailable)
				return
			}
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.host = strings.TrimPrefix(srv.URL, "http://")
	return c
}

// push writes a random image as repo:tag and returns its digest.
func (c *countingRegistry) push(t *testing.T, repo, tag string) string {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(fmt.Sprintf("%s/%s:%s", c.host, repo, tag))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// clock is a settable test clock.
type clock struct{ now atomic.Pointer[time.Time] }

func newClock() *clock {
	c := &clock{}
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.now.Store(&t)
	return c
}
func (c *clock) Now() time.Time { return *c.now.Load() }
func (c *clock) advance(d time.Duration) {
	t := c.Now().Add(d)
	c.now.Store(&t)
}

func TestRegistrySaysPushedWithTheDigestAndWaitingForAMissingTag(t *testing.T) {
	reg := startRegistry(t)
	digest := reg.push(t, "team/web", "v1")
	gate := NewRegistry(RegistryOptions{})
	image := reg.host + "/team/web"

	if got := gate.Check(t.Context(), image, "v1"); got.Condition != Pushed || got.Digest != digest {
		t.Errorf("Check(v1) = %+v, want pushed with digest %s", got, digest)
	}
	got := gate.Check(t.Context(), image, "v2")
	if got.Condition != Waiting || !strings.Contains(got.Reason, "not in the registry") {
		t.Errorf("Check(v2) = %+v, want waiting with a reason", got)
	}
	if got := gate.Check(t.Context(), reg.host+"/team/never", "v1"); got.Condition != Waiting {
		t.Errorf("Check(unknown repository) = %+v, want waiting", got)
	}
}

func TestRegistryCachesAnswersAndSeesAPushAfterTheMissingTTL(t *testing.T) {
	reg := startRegistry(t)
	clk := newClock()
	gate := NewRegistry(RegistryOptions{Now: clk.Now, MissingFor: 10 * time.Second, PushedFor: time.Minute})
	image := reg.host + "/team/web"

	for range 3 {
		if got := gate.Check(t.Context(), image, "v2"); got.Condition != Waiting {
			t.Fatalf("Check(v2) = %+v, want waiting", got)
		}
	}
	if n := reg.heads.Load(); n != 1 {
		t.Errorf("three checks within the missing TTL made %d requests, want 1", n)
	}
	digest := reg.push(t, "team/web", "v2")
	if got := gate.Check(t.Context(), image, "v2"); got.Condition != Waiting {
		t.Errorf("Check(v2) within the TTL = %+v, want the cached waiting", got)
	}
	clk.advance(11 * time.Second)
	if got := gate.Check(t.Context(), image, "v2"); got.Condition != Pushed || got.Digest != digest {
		t.Errorf("Check(v2) after the TTL = %+v, want pushed %s", got, digest)
	}
	before := reg.heads.Load()
	clk.advance(30 * time.Second)
	gate.Check(t.Context(), image, "v2")
	if n := reg.heads.Load() - before; n != 0 {
		t.Errorf("a check within the pushed TTL made %d requests, want 0", n)
	}
}

func TestRegistryBacksOffAFailingHost(t *testing.T) {
	reg := startRegistry(t)
	reg.push(t, "team/web", "v1")
	reg.fail.Store(true)
	clk := newClock()
	gate := NewRegistry(RegistryOptions{Now: clk.Now, Backoff: 5 * time.Second, MaxBackoff: time.Minute})
	image := reg.host + "/team/web"

	got := gate.Check(t.Context(), image, "v1")
	if got.Condition != Failed || got.Reason == "" {
		t.Fatalf("Check on a 503 registry = %+v, want failed with a reason", got)
	}
	before := reg.heads.Load()
	if got := gate.Check(t.Context(), image, "v9"); got.Condition != Failed {
		t.Errorf("Check during backoff = %+v, want failed", got)
	}
	if n := reg.heads.Load() - before; n != 0 {
		t.Errorf("a check during the backoff made %d requests, want 0", n)
	}
	reg.fail.Store(false)
	clk.advance(6 * time.Second)
	if got := gate.Check(t.Context(), image, "v1"); got.Condition != Pushed {
		t.Errorf("Check after the backoff on a healthy registry = %+v, want pushed", got)
	}
}

func TestRegistryThatNeverAnswersFailsWithinTheTimeout(t *testing.T) {
	release := make(chan struct{})
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	gate := NewRegistry(RegistryOptions{Timeout: 300 * time.Millisecond})
	image := strings.TrimPrefix(srv.URL, "http://") + "/team/web"
	got := gate.Check(t.Context(), image, "v1")
	if got.Condition != Failed || !strings.Contains(got.Reason, "no answer within 300ms") {
		t.Errorf("Check on a registry that never answers = %+v, want failed, saying it did not answer within 300ms", got)
	}
	// A failed host is backed off like one answering 5xx: not asked again.
	before := requests.Load()
	if got := gate.Check(t.Context(), image, "v2"); got.Condition != Failed {
		t.Errorf("Check during the backoff = %+v, want failed", got)
	}
	if n := requests.Load() - before; n != 0 {
		t.Errorf("a check during the backoff made %d requests, want 0", n)
	}
}

func TestRegistryRefusesAnInvalidReference(t *testing.T) {
	gate := NewRegistry(RegistryOptions{})
	if got := gate.Check(t.Context(), "Not A/Valid Image", "v1"); got.Condition != Failed || got.Reason == "" {
		t.Errorf("Check(invalid) = %+v, want failed with a reason", got)
	}
}

// fakeGit resolves from a fixed table; a real git server backs the
// controller's tests.
type fakeGit map[string]string

func (g fakeGit) Resolve(_ context.Context, repo, revision string) (string, error) {
	if c, ok := g[repo+"@"+revision]; ok {
		return c, nil
	}
	return "", errors.New("revision not found")
}

func TestResolveFillsDesiredCurrentAndCondition(t *testing.T) {
	reg := startRegistry(t)
	head := "aaaaaaaaaaaabbbbbbbbbbbbccccccccccccdddd"
	reg.push(t, "team/web", "v2")
	reg.push(t, "team/worker", head[:12])
	git := fakeGit{"https://git/web@v2": "1111111111111111111111111111111111111111", "https://git/worker@main": head,
		"https://git/infra@main": "2222222222222222222222222222222222222222", "https://git/api@v3": "3333333333333333333333333333333333333333"}
	entries := []Entry{
		{Kind: Infrastructure, Name: "infrastructure", Source: "https://git/infra", Deploy: Deploy{Branch: "main"}},
		{Kind: Service, Name: "web", Image: reg.host + "/team/web", Source: "https://git/web", Deploy: Deploy{Release: "v2"}},
		{Kind: Service, Name: "worker", Image: reg.host + "/team/worker", Source: "https://git/worker", Deploy: Deploy{Branch: "main"}},
		{Kind: Service, Name: "api", Image: reg.host + "/team/api", Source: "https://git/api", Deploy: Deploy{Release: "v3"}},
		{Kind: Service, Name: "cron", Image: reg.host + "/team/cron", Source: "https://git/cron", Deploy: Deploy{Suspend: true}},
		{Kind: Service, Name: "gone", Image: reg.host + "/team/gone", Source: "https://git/gone", Deploy: Deploy{Release: "v1"}},
	}
	objs := Resolve(t.Context(), entries, ResolveOptions{Git: git, Images: NewRegistry(RegistryOptions{}), TagTemplate: "{short}",
		Current: map[string]string{"web": "v1", "api": "v2", "cron": "v7", "gone": "v0", "infrastructure": "9999"}})
	got := map[string]string{}
	for _, o := range objs {
		got[o.Entry.Name] = fmt.Sprintf("%s %s %s", o.Desired, o.Condition, o.Version())
	}
	want := map[string]string{
		"infrastructure": "2222222222222222222222222222222222222222 pushed 2222222222222222222222222222222222222222",
		"web":            "v2 pushed v2",
		"worker":         head[:12] + " pushed " + head[:12],
		"api":            "v3 waiting v2",
		"cron":           "  v7",
		"gone":           " error v0",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: desired condition version = %q, want %q", k, got[k], w)
		}
	}
	vars := Variables(objs)
	if vars["WEB_VERSION"] != "v2" || !strings.HasPrefix(vars["WEB_IMAGE"], reg.host+"/team/web:v2@sha256:") || vars["WebVersion"] != "v2" {
		t.Errorf("web variables = %q %q %q", vars["WEB_VERSION"], vars["WEB_IMAGE"], vars["WebVersion"])
	}
	if vars["API_IMAGE"] != reg.host+"/team/api:v2" || vars["API_DIGEST"] != "" {
		t.Errorf("api variables while waiting = %q %q, want the running tag and no digest", vars["API_IMAGE"], vars["API_DIGEST"])
	}
	pinned := Resolve(t.Context(), entries[3:4], ResolveOptions{Git: git, Images: NewRegistry(RegistryOptions{}),
		Current: map[string]string{"api": "v2@sha256:0000000000000000000000000000000000000000000000000000000000000000"}})
	if got, want := pinned[0].Reference(), reg.host+"/team/api:v2@sha256:0000000000000000000000000000000000000000000000000000000000000000"; got != want {
		t.Errorf("api reference while waiting on a pinned running image = %q, want %q (exactly what runs)", got, want)
	}
	if vars["InfrastructureVersion"] != "2222222222222222222222222222222222222222" {
		t.Errorf("InfrastructureVersion = %q", vars["InfrastructureVersion"])
	}
}

// A registry on an address the egress policy allows gains nothing by
// sending the check to one it refuses, by a redirect or as the realm its
// bearer tokens come from: the registry client dials through the policy,
// the check fails naming the refusal, and the refused server is never
// asked.
func TestRegistryRedirectToAnAddressTheEgressPolicyRefusesIsNotFollowed(t *testing.T) {
	policy, err := egress.Parse("127.0.0.1/32")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.2 (all of 127.0.0.0/8 is loopback on Linux): %v", err)
	}
	var asked atomic.Int64
	internal := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		_, _ = io.WriteString(w, `{"token":"t"}`)
	})}}
	internal.Start()
	defer internal.Close()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	for _, tc := range []struct {
		name  string
		serve func(w http.ResponseWriter, r *http.Request)
	}{
		{"the manifest is redirected", func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/manifests/") {
				http.Redirect(w, r, internal.URL+r.URL.Path, http.StatusFound)
				return
			}
			reg.ServeHTTP(w, r)
		}},
		{"the token realm is the refused address", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="`+internal.URL+`/token",service="registry"`)
				http.Error(w, "who are you", http.StatusUnauthorized)
				return
			}
			reg.ServeHTTP(w, r)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			allowed := httptest.NewServer(http.HandlerFunc(tc.serve))
			defer allowed.Close()
			before := asked.Load()
			r := NewRegistry(RegistryOptions{Transport: policy.Transport()})
			got := r.Check(t.Context(), strings.TrimPrefix(allowed.URL, "http://")+"/app", "v1")
			if got.Condition != Failed || !strings.Contains(got.Reason, "address refused: 127.0.0.2 is an internal address") {
				t.Errorf("Check through a registry sending it to 127.0.0.2 = %+v, want failed naming the egress refusal", got)
			}
			if n := asked.Load() - before; n != 0 {
				t.Errorf("the refused address was asked %d times, want 0", n)
			}
		})
	}
}

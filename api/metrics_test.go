package api_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/wire"
)

func TestMetricsExposeTheKeySeries(t *testing.T) {
	hooks, _ := api.NewWebhooks([]api.WebhookSpec{{Provider: "generic", Secret: wire.NewToken("k")}}, api.WebhooksOptions{})
	s := newTestServer(t, api.Options{Webhooks: hooks})
	var served float64 = 7
	if err := s.metrics.AddCounters(api.Counter{Name: "skep_git_fetches_total", Help: "fetches", Read: func() float64 { return served }}); err != nil {
		t.Fatal(err)
	}
	s.metrics.ObserveReconcile(reconcile.Observation{Application: "web", Outcome: outcome.OK, Duration: time.Second,
		Sync: true, ApplyDuration: 500 * time.Millisecond, GitDuration: 100 * time.Millisecond})
	s.metrics.ObserveReconcile(reconcile.Observation{Application: "web", Outcome: outcome.Transient, Duration: time.Second, GitFailed: true})
	s.metrics.ObserveReconcile(reconcile.Observation{Application: "edge", Swarm: "prod", Outcome: outcome.Waiting, Duration: time.Second})
	s.metrics.ObserveReconcile(reconcile.Observation{Application: "edge", Swarm: "prod", Outcome: outcome.OK, Duration: time.Millisecond, Quiet: true})
	s.call(t, "GET", "/api/v1/applications", viewerToken, nil)
	post(t, s, "/api/v1/webhooks/generic", []byte(`{}`), map[string]string{"X-Skep-Signature": "sha256=00"})

	status, _, body := s.call(t, "GET", "/metrics", adminToken, nil)
	if status != 200 {
		t.Fatalf("/metrics = %d", status)
	}
	text := string(body)
	for _, want := range []string{
		`skep_reconcile_total{application="web",outcome="ok",swarm=""} 1`,
		`skep_reconcile_total{application="web",outcome="transient",swarm=""} 1`,
		`skep_reconcile_total{application="edge",outcome="waiting",swarm="prod"} 1`,
		`skep_reconcile_total{application="edge",outcome="ok",swarm="prod"} 1`,
		`skep_reconcile_quiet_total 1`,
		`skep_reconcile_duration_seconds_count{outcome="ok",swarm=""} 1`,
		`skep_reconcile_duration_seconds_count{outcome="ok",swarm="prod"} 1`,
		`skep_sync_total{application="web",outcome="succeeded",swarm=""} 1`,
		`skep_apply_duration_seconds_count{swarm=""} 1`,
		`skep_git_fetch_duration_seconds_count 1`,
		`skep_git_fetch_failures_total 1`,
		`skep_git_fetches_total 7`,
		`skep_application_sync_state{application="web",state="synced",swarm=""} 1`,
		`skep_application_sync_state{application="web",state="out-of-sync",swarm=""} 0`,
		`skep_application_health_state{application="web",state="unknown",swarm=""} 1`,
		`skep_application_health_state{application="edge",state="unknown",swarm="prod"} 1`,
		`skep_application_drift_findings{application="web",swarm=""} 0`,
		`skep_artifact_state{application="web",artifact="web",state="waiting",swarm=""} 1`,
		`skep_artifact_state{application="web",artifact="web",state="ready",swarm=""} 0`,
		`skep_swarm_up{swarm=""} 1`,
		`skep_swarm_up{swarm="prod"} 0`,
		`skep_webhook_deliveries_total{provider="generic",result="invalid_signature"} 1`,
		`skep_api_requests_total{code="200",route="GET /api/v1/applications"} 1`,
		`skep_sse_subscribers 0`,
		`skep_build_info{commit="abc",version="test"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", text)
	}
}

// TestDurationSeriesDoNotGrowWithApplications: the duration histograms
// are per swarm and outcome. Per application they made 13 series per
// outcome each, and held several KB per application in the controller.
func TestDurationSeriesDoNotGrowWithApplications(t *testing.T) {
	s := newTestServer(t, api.Options{})
	for i := range 50 {
		s.metrics.ObserveReconcile(reconcile.Observation{Application: fmt.Sprintf("app%d", i), Outcome: outcome.OK,
			Duration: time.Second, Sync: true, ApplyDuration: time.Second})
	}
	_, _, body := s.call(t, "GET", "/metrics", adminToken, nil)
	for _, name := range []string{"skep_reconcile_duration_seconds_count", "skep_apply_duration_seconds_count", "skep_reconcile_total"} {
		n := strings.Count(string(body), "\n"+name+"{")
		want := 1
		if name == "skep_reconcile_total" {
			want = 50 // the counters name the application
		}
		if n != want {
			t.Errorf("%d series of %s after 50 applications, want %d", n, name, want)
		}
	}
	if !strings.Contains(string(body), `skep_reconcile_duration_seconds_count{outcome="ok",swarm=""} 50`) {
		t.Error("the 50 reconciles are not counted in one series")
	}
}

// EnvRequirePromtool makes a missing promtool a failure, for CI that
// installs Debian's prometheus package.
const EnvRequirePromtool = "SKEP_REQUIRE_PROMTOOL"

func TestPromtoolAcceptsTheMetrics(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv(EnvRequirePromtool) == "1" {
			t.Fatalf("%s=1 but promtool is not installed (apt-get install prometheus)", EnvRequirePromtool)
		}
		t.Skipf("promtool not installed; set %s=1 to make this a failure", EnvRequirePromtool)
	}
	s := newTestServer(t, api.Options{})
	s.metrics.ObserveReconcile(reconcile.Observation{Application: "web", Outcome: outcome.OK, Duration: time.Second, Sync: true})
	_, _, body := s.call(t, "GET", "/metrics", adminToken, nil)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// writeCert writes a self-signed certificate for cn into dir.
func writeCert(t *testing.T, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{cn},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	// Write to temporaries and rename, as cert managers do.
	for name, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: kb}} {
		if err := os.WriteFile(name+".tmp", pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(name+".tmp", name); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

func TestCertReloaderServesARenewedCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeCert(t, dir, "first.example")
	reloader, err := api.NewCertReloader(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.TLS = reloader.TLSConfig()
	srv.StartTLS()
	defer srv.Close()
	served := func() string {
		conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true, ServerName: "skep.test"}) //nolint:gosec // reading the served certificate
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "first.example" {
		t.Fatalf("served %q, want first.example", got)
	}
	later := time.Now().Add(2 * time.Second)
	writeCert(t, dir, "second.example")
	for _, f := range []string{certFile, keyFile} {
		if err := os.Chtimes(f, later, later); err != nil {
			t.Fatal(err)
		}
	}
	deadline, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for served() != "second.example" {
		select {
		case <-deadline.Done():
			t.Fatal("the renewed certificate was not served within 10s")
		case <-time.After(200 * time.Millisecond):
		}
	}
	if _, err := api.NewCertReloader(filepath.Join(dir, "nope.crt"), keyFile); err == nil {
		t.Error("NewCertReloader accepted a missing certificate file")
	}
}

func TestWebhookMetricsBoundTheProviderLabel(t *testing.T) {
	s := newTestServer(t, api.Options{})
	for i := range 5 {
		post(t, s, fmt.Sprintf("/api/v1/webhooks/made-up-%d", i), []byte(`{}`), nil)
	}
	for _, p := range api.Providers() {
		post(t, s, "/api/v1/webhooks/"+p, []byte(`{}`), nil)
	}
	_, _, body := s.call(t, "GET", "/metrics", adminToken, nil)
	text := string(body)
	if strings.Contains(text, "made-up-") {
		t.Errorf("an unknown provider became a label value:\n%s", text)
	}
	if !strings.Contains(text, `skep_webhook_deliveries_total{provider="other",result="unknown_provider"} 5`) {
		t.Errorf("/metrics lacks the five unknown deliveries under provider=\"other\":\n%s", text)
	}
	// Every label value is a known provider or "other", and each known
	// one, the self-hosted Bitbucket and Gogs included, keeps its own.
	labels := map[string]bool{}
	for _, m := range regexp.MustCompile(`skep_webhook_deliveries_total\{provider="([^"]*)"`).FindAllStringSubmatch(text, -1) {
		labels[m[1]] = true
	}
	want := map[string]bool{"other": true}
	for _, p := range api.Providers() {
		want[p] = true
	}
	if d := cmp.Diff(want, labels); d != "" {
		t.Errorf("provider label values (-want +got):\n%s", d)
	}
}

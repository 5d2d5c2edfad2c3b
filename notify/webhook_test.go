package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// received is one request a test receiver got.
type received struct {
	path   string
	header http.Header
	body   []byte
}

// receiver is a local HTTP endpoint that records what it is sent and
// answers with status.
type receiver struct {
	*httptest.Server
	got    chan received
	mu     sync.Mutex
	status int
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{got: make(chan received, 100), status: http.StatusNoContent}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.got <- received{path: req.URL.Path, header: req.Header.Clone(), body: body}
		r.mu.Lock()
		status := r.status
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) answer(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = status
}

// next waits for the next request, failing the test at its deadline.
func (r *receiver) next(t *testing.T) received {
	t.Helper()
	select {
	case got := <-r.got:
		return got
	case <-t.Context().Done():
		t.Fatal("no request arrived")
		return received{}
	}
}

// pending is how many requests arrived that the test has not read.
func (r *receiver) pending() int { return len(r.got) }

// run runs n's delivery loop until the test ends.
func run(t *testing.T, ns ...Notifier) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunAll(ctx, ns) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunAll = %v", err)
		}
	})
}

func TestWebhookPostsTheWireBodySigned(t *testing.T) {
	rcv := newReceiver(t)
	secret := []byte("shared-hmac-key")
	w, err := NewWebhook(WebhookOptions{Name: "hook", URL: rcv.URL + "/skep", Secret: secret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, w)
	w.Notify(t.Context(), Event{Application: "web", Type: SyncFailed, Revision: "abc123", Message: "apply web: image missing",
		At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Actor: "alice"})
	got := rcv.next(t)
	wantBody := `{"application":"web","swarm":"","type":"sync-failed","revision":"abc123","message":"apply web: image missing","actor":"alice","at":"2026-01-02T03:04:05Z"}`
	if string(got.body) != wantBody {
		t.Errorf("body =\n%s\nwant\n%s", got.body, wantBody)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(got.body)
	if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); got.header.Get("X-Skep-Signature") != want {
		t.Errorf("X-Skep-Signature = %q, want %q", got.header.Get("X-Skep-Signature"), want)
	}
	for k, want := range map[string]string{"Content-Type": "application/json", "X-Skep-Event": "sync-failed"} {
		if got.header.Get(k) != want {
			t.Errorf("%s = %q, want %q", k, got.header.Get(k), want)
		}
	}
	if got.path != "/skep" {
		t.Errorf("path = %q", got.path)
	}
}

func TestWebhookWithoutSecretSendsNoSignature(t *testing.T) {
	rcv := newReceiver(t)
	w, err := NewWebhook(WebhookOptions{Name: "hook", URL: rcv.URL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, w)
	w.Notify(t.Context(), Event{Application: "web", Type: SyncStarted})
	if got := rcv.next(t); got.header.Get(SignatureHeader) != "" {
		t.Errorf("unsigned webhook sent %s: %q", SignatureHeader, got.header.Get(SignatureHeader))
	}
}

// roundTripFunc fakes a transport inside a synctest bubble.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func answer(status int) *http.Response {
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Body: io.NopCloser(strings.NewReader(""))}
}

func TestWebhookRetriesWithDoublingBackoff(t *testing.T) {
	for _, tc := range []struct {
		name          string
		answers       []int
		retries       int
		wantGaps      []time.Duration
		wantDelivered uint64
		wantFailed    uint64
	}{
		{name: "server errors are retried until one succeeds", answers: []int{503, 500, 200}, retries: 3,
			wantGaps: []time.Duration{time.Second, 2 * time.Second}, wantDelivered: 1},
		{name: "retries stop at the limit and count one failure", answers: []int{503, 503, 503, 503, 503}, retries: 3,
			wantGaps: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, wantFailed: 1},
		{name: "too many requests is retried", answers: []int{429, 204}, retries: 3,
			wantGaps: []time.Duration{time.Second}, wantDelivered: 1},
		{name: "a refusal is not retried", answers: []int{400, 200}, retries: 3, wantFailed: 1},
		{name: "negative retries mean one attempt", answers: []int{503, 200}, retries: -1, wantFailed: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var attempts []time.Time
				client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
					attempts = append(attempts, time.Now())
					return answer(tc.answers[len(attempts)-1]), nil
				})}
				w, err := NewWebhook(WebhookOptions{Name: "hook", URL: "https://hooks.example/x", Client: client,
					Delivery: Delivery{Retries: tc.retries}, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error)
				go func() { done <- w.Run(ctx) }()
				w.Notify(ctx, Event{Application: "web", Type: SyncFailed})
				time.Sleep(time.Hour)
				synctest.Wait()
				cancel()
				<-done
				var gaps []time.Duration
				for i := 1; i < len(attempts); i++ {
					gaps = append(gaps, attempts[i].Sub(attempts[i-1]))
				}
				if d := cmp.Diff(tc.wantGaps, gaps); d != "" {
					t.Errorf("waits between attempts (-want +got):\n%s", d)
				}
				if got := w.Stats(); got.Delivered != tc.wantDelivered || got.Failed != tc.wantFailed {
					t.Errorf("Stats() = %+v, want delivered %d failed %d", got, tc.wantDelivered, tc.wantFailed)
				}
			})
		})
	}
}

func TestWebhookBackoffIsCappedAtAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var attempts []time.Time
		client := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			attempts = append(attempts, time.Now())
			return answer(503), nil
		})}
		w, _ := NewWebhook(WebhookOptions{Name: "hook", URL: "https://hooks.example/x", Client: client,
			Delivery: Delivery{Retries: 5, Backoff: 20 * time.Second}, Logger: slog.New(slog.DiscardHandler)})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- w.Run(ctx) }()
		w.Notify(ctx, Event{Application: "web", Type: SyncFailed})
		time.Sleep(time.Hour)
		synctest.Wait()
		cancel()
		<-done
		last := attempts[len(attempts)-1].Sub(attempts[len(attempts)-2])
		if len(attempts) != 6 || last != time.Minute {
			t.Errorf("%d attempts, last wait %s; want 6 and 1m0s", len(attempts), last)
		}
	})
}

func TestWebhookLogsFailuresWithoutItsURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	var logs syncLog
	token := "T000/B000/XXXXsecrettoken"
	w, err := NewWebhook(WebhookOptions{Name: "hook", URL: "http://user:pass@" + addr + "/services/" + token,
		Delivery: Delivery{Retries: -1}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	run(t, w)
	w.Notify(t.Context(), Event{Application: "web", Type: SyncFailed})
	waitFor(t, func() bool { return w.Stats().Failed == 1 })
	out := logs.String()
	if !strings.Contains(out, "notification not delivered") || !strings.Contains(out, "refused") {
		t.Errorf("failure not logged with its cause:\n%s", out)
	}
	for _, secret := range []string{token, "pass", "/services/"} {
		if strings.Contains(out, secret) {
			t.Errorf("log names %q:\n%s", secret, out)
		}
	}
	if _, err := NewWebhook(WebhookOptions{Name: "hook", URL: "ftp://" + token}); err == nil || strings.Contains(err.Error(), token) {
		t.Errorf("NewWebhook(ftp URL) = %v, want an error without the URL", err)
	}
}

func TestDeadReceiverBlocksNothing(t *testing.T) {
	release := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release // a receiver that accepts and never answers
	}))
	t.Cleanup(func() { close(release); stuck.Close() })
	w, err := NewWebhook(WebhookOptions{Name: "stuck", URL: stuck.URL, Delivery: Delivery{Queue: 4, Timeout: time.Hour},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, w)
	returned := make(chan struct{})
	go func() {
		for range 100 {
			w.Notify(t.Context(), Event{Application: "web", Type: SyncStarted})
		}
		close(returned)
	}()
	select {
	case <-returned:
	case <-t.Context().Done():
		t.Fatal("Notify blocked on a receiver that never answers")
	}
	waitFor(t, func() bool { return w.Stats().Dropped > 0 })
	if got := w.Stats(); got.Dropped+uint64(len(w.out.queue)) > 100 || got.Delivered != 0 {
		t.Errorf("Stats() = %+v", got)
	}
}

// syncLog is a log destination safe for concurrent writes.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor polls cond until it holds or the test's deadline passes.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-t.Context().Done():
			t.Fatal("condition never held")
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func TestRoutingSendsProductionAndStagingToDifferentReceivers(t *testing.T) {
	prod, staging := newReceiver(t), newReceiver(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "staging-url"), []byte(staging.URL+"/staging\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SKEP_TEST_PROD_HOOK", prod.URL+"/prod")
	cfgPath := filepath.Join(dir, "notifications.yaml")
	if err := os.WriteFile(cfgPath, []byte(`apiVersion: skep/v1
kind: Notifications
notifiers:
  - name: production
    webhook:
      url: {env: SKEP_TEST_PROD_HOOK}
    match: {swarms: ["prod-*"], types: [sync-failed, resources-pruned]}
  - name: staging
    webhook:
      url: {file: staging-url}
    match: {swarms: [staging], applications: ["web*"]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := Build(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var reg Registry
	for _, n := range ns {
		reg.Register(n)
	}
	run(t, ns...)
	for _, e := range []Event{
		{Application: "web", Type: SyncFailed, Swarm: "prod-eu", Message: "to production"},
		{Application: "web", Type: SyncSucceeded, Swarm: "prod-eu", Message: "type not routed"},
		{Application: "web", Type: SyncFailed, Swarm: "staging", Message: "to staging"},
		{Application: "api", Type: SyncFailed, Swarm: "staging", Message: "application not routed"},
		{Application: "web", Type: SyncFailed, Message: "local swarm routed nowhere"},
		{Application: "db", Type: ResourcesPruned, Swarm: "prod-us", Message: "to production too"},
	} {
		reg.Dispatch(t.Context(), e)
	}
	messages := func(r *receiver, n int) []string {
		var out []string
		for range n {
			got := r.next(t)
			_, rest, _ := strings.Cut(string(got.body), `"message":"`)
			msg, _, _ := strings.Cut(rest, `"`)
			out = append(out, got.path+" "+msg)
		}
		return out
	}
	if d := cmp.Diff([]string{"/prod to production", "/prod to production too"}, messages(prod, 2)); d != "" {
		t.Errorf("production receiver (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"/staging to staging"}, messages(staging, 1)); d != "" {
		t.Errorf("staging receiver (-want +got):\n%s", d)
	}
	// Every event was either sent or counted as not routed.
	waitFor(t, func() bool {
		s0, s1 := ns[0].(Counted).Stats(), ns[1].(Counted).Stats()
		return s0.Delivered+s0.Suppressed == 6 && s1.Delivered+s1.Suppressed == 6
	})
	if n := prod.pending() + staging.pending(); n != 0 {
		t.Errorf("%d unrouted events reached a receiver", n)
	}
}

func TestSuppressionDropsRepeatsWithinTheWindow(t *testing.T) {
	rcv := newReceiver(t)
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	w, err := NewWebhook(WebhookOptions{Name: "hook", URL: rcv.URL, Delivery: Delivery{Suppress: 10 * time.Minute, Now: clock},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, w)
	failed := Event{Application: "web", Type: SyncFailed, Revision: "abc", Message: "image missing"}
	steps := []struct {
		after time.Duration
		event Event
		sent  bool
	}{
		{event: failed, sent: true},
		{after: time.Minute, event: failed, sent: false},
		{event: Event{Application: "web", Type: SyncFailed, Revision: "abc", Message: "other error"}, sent: true},
		{event: Event{Application: "web", Type: SyncFailed, Revision: "def", Message: "image missing"}, sent: true},
		{event: Event{Application: "api", Type: SyncFailed, Revision: "abc", Message: "image missing"}, sent: true},
		{after: 8 * time.Minute, event: failed, sent: false},
		{after: time.Minute, event: failed, sent: true}, // 10 minutes after the first send
		{event: failed, sent: false},
	}
	var wantSent int
	for _, st := range steps {
		advance(st.after)
		w.Notify(t.Context(), st.event)
		if st.sent {
			wantSent++
		}
	}
	for range wantSent {
		rcv.next(t)
	}
	waitFor(t, func() bool { return w.Stats().Delivered == uint64(wantSent) })
	if got := w.Stats().Suppressed; got != uint64(len(steps)-wantSent) {
		t.Errorf("Suppressed = %d, want %d", got, len(steps)-wantSent)
	}
	if rcv.pending() != 0 {
		t.Error("a suppressed repeat reached the receiver")
	}
}

func TestSignMatchesAnIndependentHMAC(t *testing.T) {
	body := []byte(`{"application":"web"}`)
	mac := hmac.New(sha256.New, []byte("k"))
	mac.Write(body)
	if got, want := Sign([]byte("k"), body), "sha256="+hex.EncodeToString(mac.Sum(nil)); got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
	if Sign([]byte("k"), body) == Sign([]byte("other"), body) {
		t.Error("signature does not depend on the key")
	}
}

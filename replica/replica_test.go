package replica

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/lease"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/wire"
)

// leaseStore is a lease.Store in memory that enforces versions.
type leaseStore struct {
	mu      sync.Mutex
	rec     lease.Record
	version uint64
	found   bool
}

func (s *leaseStore) Get(context.Context) (lease.Record, uint64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec, s.version, s.found, nil
}

func (s *leaseStore) Create(_ context.Context, rec lease.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.found {
		return lease.ErrConflict
	}
	s.rec, s.found, s.version = rec, true, s.version+1
	return nil
}

func (s *leaseStore) Update(_ context.Context, v uint64, rec lease.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.found || v != s.version {
		return lease.ErrConflict
	}
	s.rec, s.version = rec, s.version+1
	return nil
}

// events is a Store and a Publisher in memory.
type events struct {
	mu        sync.Mutex
	recs      []notify.Record
	published []int64
}

func (e *events) Insert(_ context.Context, rec notify.Record) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := len(e.recs); n > 0 && rec.ID <= e.recs[n-1].ID {
		return errors.New("id not above the last")
	}
	e.recs = append(e.recs, rec)
	return nil
}

func (e *events) LastID(context.Context) (int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.recs) == 0 {
		return 0, nil
	}
	return e.recs[len(e.recs)-1].ID, nil
}

func (e *events) Publish(rec notify.Record) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.published = append(e.published, rec.ID)
}

func (e *events) ids() (kept, published []int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.recs {
		kept = append(kept, r.ID)
	}
	return kept, append([]int64(nil), e.published...)
}

// recorder is a Recorder that notes what it was told.
type recorder struct {
	mu      sync.Mutex
	term    int64
	floor   int64
	flushed bool
}

func (r *recorder) BeginTerm(term, floor int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.term, r.floor = term, floor
}

func (r *recorder) Flush(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushed = true
	return nil
}

func (r *recorder) Recorded() int64 { return 0 }

// replicaAt runs a replica named self on a lease that held (nil: nobody)
// holds, leading with lead (nil: until its term ends), until the test
// ends; it waits until the replica read the lease.
func replicaAt(t *testing.T, self string, held *lease.Record, opts Options) *Replica {
	t.Helper()
	store := &leaseStore{}
	if held != nil {
		store.rec, store.found, store.version = *held, true, 1
	}
	e, err := lease.New(lease.Options{Store: store, Self: lease.Candidate{ID: self + "/1", Name: self, Addr: self, Version: "v1.0.0"}})
	if err != nil {
		t.Fatal(err)
	}
	opts.Elector = e
	if opts.Lead == nil {
		opts.Lead = func(ctx context.Context, _ lease.Term) error { <-ctx.Done(); return nil }
	}
	if opts.Recorder == nil {
		opts.Recorder = &recorder{}
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for !e.Observed().Known || held == nil && !e.Observed().Leading {
		if time.Now().After(deadline) {
			t.Fatalf("replica did not read the lease: %+v", e.Observed())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return r
}

// heldBy is a lease held by the replica at addr.
func heldBy(addr string) *lease.Record {
	return &lease.Record{Holder: addr + "/9", Name: addr, Addr: addr, Version: "v1.0.0", Term: 4, Duration: time.Hour, Events: 0}
}

// hits is a handler that notes each request it gets.
type hits struct {
	mu   sync.Mutex
	reqs []*http.Request
	code int
}

func (h *hits) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.reqs = append(h.reqs, r.Clone(context.Background()))
	code := h.code
	h.mu.Unlock()
	w.WriteHeader(max(code, http.StatusOK))
}

func (h *hits) paths() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.reqs {
		out = append(out, r.Method+" "+r.URL.Path)
	}
	return out
}

func TestStandbyServesWhatItHoldsAndForwardsTheRestToTheLeader(t *testing.T) {
	leaderAPI := &hits{}
	leaderSrv := httptest.NewServer(leaderAPI)
	defer leaderSrv.Close()
	leaderAddr := strings.TrimPrefix(leaderSrv.URL, "http://")
	local := &hits{}
	r := replicaAt(t, "127.0.0.1:1", heldBy(leaderAddr), Options{})
	front := r.Front(local)
	for _, tc := range []struct {
		method, path string
		bearer       bool
		here         bool
	}{
		{method: "GET", path: "/healthz", here: true},
		{method: "GET", path: "/readyz", here: true},
		{method: "GET", path: "/metrics", bearer: true, here: true},
		{method: "GET", path: "/api/v1/version", here: true},
		{method: "GET", path: "/ui/app.js", here: true},
		{method: "GET", path: "/api/v1/events", bearer: true, here: true},
		{method: "GET", path: "/api/v1/events"}, // a session's: the leader made it
		{method: "GET", path: "/api/v1/status", bearer: true},
		{method: "GET", path: "/api/v1/applications", bearer: true},
		{method: "POST", path: "/api/v1/applications/web/sync", bearer: true},
		{method: "POST", path: "/api/v1/webhooks/github"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader("{}"))
			if tc.bearer {
				req.Header.Set("Authorization", "Bearer caller-token")
			}
			w := httptest.NewRecorder()
			before := len(leaderAPI.paths())
			front.ServeHTTP(w, req)
			forwarded := len(leaderAPI.paths()) > before
			if forwarded == tc.here || w.Code != http.StatusOK {
				t.Errorf("%s %s: forwarded %v (%d), want served here %v", tc.method, tc.path, forwarded, w.Code, tc.here)
			}
		})
	}
	// What was forwarded carries the caller's own credential and says who
	// forwarded it.
	leaderAPI.mu.Lock()
	defer leaderAPI.mu.Unlock()
	for _, req := range leaderAPI.reqs {
		if req.URL.Path == "/api/v1/applications/web/sync" {
			if req.Header.Get("Authorization") != "Bearer caller-token" || req.Header.Get(HeaderForwarded) != "127.0.0.1:1" {
				t.Errorf("forwarded sync headers %v, want the caller's token and %s", req.Header, HeaderForwarded)
			}
		}
	}
}

func TestStandbyAnswersRetryLaterWhenNoLeaderCanTakeTheRequest(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	downAddr := strings.TrimPrefix(down.URL, "http://")
	down.Close()
	// Released by a newer version: the downgrade guard keeps this one
	// from taking it for two lease durations.
	released := heldBy("10.0.0.9:8080")
	released.Holder, released.Version = "", "v9.0.0"
	for _, tc := range []struct {
		name   string
		held   *lease.Record
		method string
		header string
		local  bool // a GET falls back to what the standby holds
	}{
		{name: "the lease released, nobody leads yet", held: released, method: "POST"},
		{name: "a request another standby forwarded already", held: heldBy(downAddr), method: "POST", header: "other:8080"},
		{name: "a write to a leader that does not answer", held: heldBy(downAddr), method: "POST"},
		{name: "a read from a leader that does not answer falls back here", held: heldBy(downAddr), method: "GET", local: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := &hits{}
			r := replicaAt(t, "127.0.0.1:2", tc.held, Options{})
			req := httptest.NewRequest(tc.method, "/api/v1/status", nil)
			req.Header.Set("Authorization", "Bearer x")
			if tc.header != "" {
				req.Header.Set(HeaderForwarded, tc.header)
			}
			w := httptest.NewRecorder()
			r.Front(local).ServeHTTP(w, req)
			if tc.local {
				if len(local.paths()) != 1 {
					t.Errorf("answered %d, local served %v; want the standby's own answer", w.Code, local.paths())
				}
				return
			}
			if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), `"unavailable"`) {
				t.Errorf("answered %d %v %s, want 503 with Retry-After in the API's error shape", w.Code, w.Header(), w.Body)
			}
		})
	}
}

func TestLeaderServesEverythingAndListsTheStandbysFollowingIt(t *testing.T) {
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/events" {
			<-r.Context().Done() // a stream lasts as long as its client
		}
	})
	r := replicaAt(t, "127.0.0.1:3", nil, Options{Peer: Peer{Token: wire.NewToken("shared")}})
	front := r.Front(local)
	follow := func(token string) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		req := httptest.NewRequestWithContext(ctx, "GET", "/api/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set(HeaderReplica, "127.0.0.1:4")
		req.Header.Set(HeaderReplicaVersion, "v1.0.0")
		done := make(chan struct{})
		go func() { defer close(done); front.ServeHTTP(httptest.NewRecorder(), req) }()
		return func() { cancel(); <-done }
	}
	waitReplicas := func(want int, within time.Duration) []wire.Replica {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			got := r.Status().Replicas
			if len(got) == want || time.Now().After(deadline) {
				return got
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	stopImpostor := follow("not-the-token")
	// Not listed, however long one waits: half a second does.
	if got := waitReplicas(2, 500*time.Millisecond); len(got) != 1 {
		t.Errorf("a stream without the replicas' token is listed: %+v", got)
	}
	stopImpostor()
	stop := follow("shared")
	got := waitReplicas(2, 5*time.Second)
	want := []wire.Replica{{Name: "127.0.0.1:3", Role: wire.RoleLeader, Addr: "127.0.0.1:3", Version: "v1.0.0"},
		{Name: "127.0.0.1:4", Role: wire.RoleStandby, Version: "v1.0.0"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("replicas while a standby follows (-want +got):\n%s", d)
	}
	stop()
	if got := waitReplicas(1, 5*time.Second); len(got) != 1 {
		t.Errorf("replicas after the standby left: %+v", got)
	}
	st := r.Status()
	if st.Role != wire.RoleLeader || st.Term != 1 || st.Leader == nil || st.Leader.Name != "127.0.0.1:3" {
		t.Errorf("status %+v, want this replica leading term 1", st)
	}
}

func TestStandbyCopiesTheLeadersEventsAfterItsLastOnce(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	leaderRecs := []notify.Record{}
	for id := int64(10); id <= 14; id++ {
		leaderRecs = append(leaderRecs, notify.Record{ID: id, Term: 4, Event: notify.Event{Application: "web", Type: notify.SyncStarted, At: at}})
	}
	var mu sync.Mutex
	var lastIDs, replicas, tokens []string
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		replicas = append(replicas, r.Header.Get(HeaderReplica))
		tokens = append(tokens, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, rec := range leaderRecs {
			// The leader replays from its store: ids the standby has come too.
			if err := notify.WriteSSE(w, rec); err != nil {
				return
			}
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(leader.Close) // after the replica stopped following it
	kept := &events{}
	_ = kept.Insert(context.Background(), notify.Record{ID: 11})
	r := replicaAt(t, "127.0.0.1:5", heldBy(strings.TrimPrefix(leader.URL, "http://")),
		Options{Store: kept, Publish: kept, Peer: Peer{Token: wire.NewToken("shared")}})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if got, _ := kept.ids(); len(got) == 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	got, published := kept.ids()
	if d := cmp.Diff([]int64{11, 12, 13, 14}, got); d != "" {
		t.Errorf("ids kept (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]int64{12, 13, 14}, published); d != "" {
		t.Errorf("ids published to the standby's own subscribers (-want +got):\n%s", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lastIDs) == 0 || lastIDs[0] != "11" || replicas[0] != "127.0.0.1:5" || tokens[0] != "Bearer shared" {
		t.Errorf("stream asked with Last-Event-ID %q, replica %q, auth %q; want 11, the replica's name and the shared token", lastIDs, replicas, tokens)
	}
	_ = r
}

func TestTakingOverWaitsForThePredecessorsLastEventThenStartsTheTermAboveIt(t *testing.T) {
	kept := &events{}
	rec := &recorder{}
	prev := heldBy("10.0.0.9:8080")
	prev.Holder, prev.Events = "", 42 // released, its last event 42
	// The copy reaches 42 a little after the take-over.
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = kept.Insert(context.Background(), notify.Record{ID: 42})
	}()
	var started time.Time
	leading := make(chan lease.Term, 1)
	begin := time.Now()
	replicaAt(t, "127.0.0.1:6", prev, Options{Store: kept, Recorder: rec, Lead: func(ctx context.Context, tm lease.Term) error {
		started = time.Now()
		leading <- tm
		<-ctx.Done()
		return nil
	}})
	tm := <-leading
	if tm.Number != 5 || tm.Previous.Events != 42 {
		t.Errorf("term %+v, want 5 after the release of term 4 at event 42", tm)
	}
	if waited := started.Sub(begin); waited < 250*time.Millisecond {
		t.Errorf("the term started %s after the take-over, before the copy held event 42", waited)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.term != 5 || rec.floor != 42 {
		t.Errorf("recorder began term %d above %d, want 5 above 42", rec.term, rec.floor)
	}
}

func TestCurrentAnswersForTheTermsControllerOrAsAStandby(t *testing.T) {
	c := NewCurrent("prod", func() error { return nil })
	if _, err := c.ListApplications(context.Background()); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("ListApplications on a standby = %v, want ErrUnavailable", err)
	}
	st, err := c.Status(context.Background())
	if err != nil || st.ControllerID != "prod" || !st.Ready || st.Orphaned == nil {
		t.Errorf("Status on a standby = %+v, %v; want the id, ready, empty lists", st, err)
	}
	if err := c.Ready(context.Background()); err != nil {
		t.Errorf("Ready on a standby that read the lease = %v", err)
	}
	notReady := NewCurrent("prod", func() error { return fmt.Errorf("leader lease not read yet") })
	if err := notReady.Ready(context.Background()); err == nil {
		t.Error("a standby that never read the lease is ready")
	}
}

func TestFencedNotifierDropsWhatALapsedLeaderRaises(t *testing.T) {
	var got []notify.EventType
	n := notifyFunc(func(e notify.Event) { got = append(got, e.Type) })
	var lapsed bool
	f := Fenced(n, func() error {
		if lapsed {
			return lease.ErrExpired
		}
		return nil
	})
	f.Notify(context.Background(), notify.Event{Type: notify.SyncStarted})
	lapsed = true
	f.Notify(context.Background(), notify.Event{Type: notify.SyncFailed})
	if d := cmp.Diff([]notify.EventType{notify.SyncStarted}, got); d != "" {
		t.Errorf("events delivered (-want +got):\n%s", d)
	}
}

type notifyFunc func(notify.Event)

func (f notifyFunc) Notify(_ context.Context, e notify.Event) { f(e) }

package notify

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func quietBroker(buffer int) *Broker {
	return NewBroker(BrokerOptions{Buffer: buffer, Logger: slog.New(slog.DiscardHandler)})
}

func rec(id int64, app string, t EventType) Record {
	return Record{ID: id, Event: Event{Application: app, Type: t, At: time.Unix(id, 0).UTC()}}
}

// drain reads what is buffered on s without waiting.
func drain(s *Subscription) []int64 {
	var ids []int64
	for {
		select {
		case r, ok := <-s.C():
			if !ok {
				return ids
			}
			ids = append(ids, r.ID)
		default:
			return ids
		}
	}
}

func TestBrokerFiltersByApplicationTypeAndAllow(t *testing.T) {
	b := quietBroker(16)
	for _, tc := range []struct {
		name   string
		filter Filter
		want   []int64
	}{
		{name: "the zero filter receives everything", want: []int64{1, 2, 3, 4}},
		{name: "an application list receives only those", filter: Filter{Applications: []string{"web"}}, want: []int64{1, 2}},
		{name: "a type list receives only those", filter: Filter{Types: []EventType{SyncFailed}}, want: []int64{2, 4}},
		{name: "allow hides the applications a token may not see",
			filter: Filter{Allow: func(app string) bool { return app != "web" }}, want: []int64{3, 4}},
		{name: "all three combine", filter: Filter{Applications: []string{"web", "api"}, Types: []EventType{SyncFailed},
			Allow: func(app string) bool { return app == "api" }}, want: []int64{4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := b.Subscribe(tc.filter)
			defer s.Close()
			base := s.Start()
			for _, r := range []Record{rec(1, "web", SyncStarted), rec(2, "web", SyncFailed), rec(3, "api", SyncStarted), rec(4, "api", SyncFailed)} {
				r.ID += base
				b.Publish(r)
			}
			var got []int64
			for _, id := range drain(s) {
				got = append(got, id-base)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("delivered (-want +got):\n%s", d)
			}
		})
	}
}

func TestBrokerSlowSubscriberLagsWithoutHoldingUpOthers(t *testing.T) {
	var logs bytes.Buffer
	b := NewBroker(BrokerOptions{Buffer: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	slow := b.Subscribe(Filter{})
	defer slow.Close()
	fast := b.Subscribe(Filter{})
	defer fast.Close()
	var fastGot []int64
	for id := int64(1); id <= 10; id++ {
		b.Publish(rec(id, "web", SyncStarted)) // returns although slow reads nothing
		fastGot = append(fastGot, drain(fast)...)
	}
	if d := cmp.Diff([]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, fastGot); d != "" {
		t.Errorf("fast subscriber (-want +got):\n%s", d)
	}
	select {
	case <-slow.Lagged():
	default:
		t.Fatal("slow subscriber was not signalled as lagging")
	}
	if !slow.Lagging() {
		t.Error("Lagging() = false for a full buffer")
	}
	if got := slow.Dropped(); got != 8 {
		t.Errorf("slow.Dropped() = %d, want 8", got)
	}
	if got := b.Dropped(); got != 8 {
		t.Errorf("broker Dropped() = %d, want 8", got)
	}
	if n := strings.Count(logs.String(), "event subscriber lagging"); n != 1 {
		t.Errorf("lagging logged %d times, want once:\n%s", n, logs.String())
	}
	if got := drain(slow); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("slow kept %v buffered, want [1 2]", got)
	}
	slow.Resume()
	b.Publish(rec(11, "web", SyncStarted))
	if got := drain(slow); !slices.Equal(got, []int64{11}) {
		t.Errorf("after Resume slow got %v, want [11]", got)
	}
}

func TestBrokerCountsSubscribersAndClosesStreams(t *testing.T) {
	b := quietBroker(4)
	a, c := b.Subscribe(Filter{}), b.Subscribe(Filter{})
	if got := b.Subscribers(); got != 2 {
		t.Errorf("Subscribers() = %d, want 2", got)
	}
	a.Close()
	a.Close() // idempotent
	if got := b.Subscribers(); got != 1 {
		t.Errorf("Subscribers() after Close = %d, want 1", got)
	}
	b.Close()
	if _, ok := <-c.C(); ok {
		t.Error("subscription channel open after the broker closed")
	}
	c.Close() // after the broker closed it: no double close
	late := b.Subscribe(Filter{})
	if _, ok := <-late.C(); ok {
		t.Error("subscription to a closed broker is open")
	}
	b.Publish(rec(1, "web", SyncStarted)) // no panic on a closed broker
	if got := b.Subscribers(); got != 0 {
		t.Errorf("Subscribers() after broker Close = %d, want 0", got)
	}
}

func TestBrokerNotifyNumbersAfterTheLastPublishedID(t *testing.T) {
	b := quietBroker(4)
	s := b.Subscribe(Filter{})
	defer s.Close()
	b.Publish(rec(41, "web", SyncStarted))
	b.Notify(context.Background(), Event{Application: "web", Type: SyncSucceeded})
	if got := drain(s); !slices.Equal(got, []int64{41, 42}) {
		t.Errorf("ids %v, want [41 42]", got)
	}
}

func TestSubscribeCopiesTheFilter(t *testing.T) {
	b := quietBroker(4)
	apps := []string{"web"}
	s := b.Subscribe(Filter{Applications: apps})
	defer s.Close()
	apps[0] = "api"
	b.Publish(rec(1, "web", SyncStarted))
	if got := drain(s); !slices.Equal(got, []int64{1}) {
		t.Errorf("got %v: the caller's slice reached the subscription", got)
	}
}

// memStore is a replay source over a slice, standing in for the store.
type memStore struct {
	mu    sync.Mutex
	recs  []Record
	calls int
}

func (m *memStore) add(r Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, r)
}

func (m *memStore) replay(_ context.Context, after int64, limit int) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	var out []Record
	for _, r := range m.recs {
		if r.ID > after && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

// syncBuffer is a writer safe to read while Stream writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// frameIDs lists the ids of the event frames in an SSE stream, in order.
func frameIDs(s string) []int64 {
	var ids []int64
	for line := range strings.SplitSeq(s, "\n") {
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id, _ := strconv.ParseInt(v, 10, 64)
			ids = append(ids, id)
		}
	}
	return ids
}

// stream runs Stream in the background of a synctest bubble and returns a
// stop function that ends it and reports its error.
func stream(t *testing.T, w io.Writer, sub *Subscription, opts StreamOptions) (stop func() error) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Stream(ctx, w, sub, opts) }()
	return func() error {
		cancel()
		return <-done
	}
}

// streamOf keeps and publishes records 1..held of web, connects a client
// with opts (its Replay the store's), keeps and publishes held+1..upTo,
// and returns the ids the client was written. It runs in a synctest
// bubble.
func streamOf(t *testing.T, held, upTo int64, opts StreamOptions) []int64 {
	t.Helper()
	b, store := quietBroker(8), &memStore{}
	keep := func(from, to int64) {
		for id := from; id <= to; id++ {
			store.add(rec(id, "web", SyncStarted))
			b.Publish(rec(id, "web", SyncStarted))
		}
	}
	keep(1, held)
	sub := b.Subscribe(Filter{})
	defer sub.Close()
	var out syncBuffer
	opts.Replay = store.replay
	stop := stream(t, &out, sub, opts)
	synctest.Wait()
	keep(held+1, upTo)
	synctest.Wait()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	return frameIDs(out.String())
}

func TestStreamReplaysAfterLastEventIDThenGoesLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if d := cmp.Diff([]int64{3, 4, 5, 6, 7}, streamOf(t, 5, 7, StreamOptions{AfterID: 2})); d != "" {
			t.Errorf("ids written (-want +got):\n%s", d)
		}
	})
}

func TestStreamWritesARecordPublishedDuringReplayOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, store := quietBroker(8), &memStore{}
		store.add(rec(1, "web", SyncStarted))
		sub := b.Subscribe(Filter{})
		defer sub.Close()
		// Record 2 is stored and published after Subscribe but before the
		// replay reads: it reaches both the replay and the channel.
		store.add(rec(2, "web", SyncStarted))
		b.Publish(rec(2, "web", SyncStarted))
		var out syncBuffer
		stop := stream(t, &out, sub, StreamOptions{Replay: store.replay})
		synctest.Wait()
		_ = stop()
		// AfterID 0 replays nothing; the live copy of 2 is written once.
		if d := cmp.Diff([]int64{2}, frameIDs(out.String())); d != "" {
			t.Errorf("ids (-want +got):\n%s", d)
		}

		sub2 := b.Subscribe(Filter{})
		defer sub2.Close()
		store.add(rec(3, "web", SyncStarted))
		b.Publish(rec(3, "web", SyncStarted))
		var out2 syncBuffer
		stop2 := stream(t, &out2, sub2, StreamOptions{AfterID: 1, Replay: store.replay})
		synctest.Wait()
		_ = stop2()
		if d := cmp.Diff([]int64{2, 3}, frameIDs(out2.String())); d != "" {
			t.Errorf("replay overlapping live (-want +got):\n%s", d)
		}
	})
}

func TestStreamReplaysWhatALaggingSubscriberMissed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, store := quietBroker(2), &memStore{}
		sub := b.Subscribe(Filter{Types: []EventType{SyncFailed}})
		defer sub.Close()
		// Nobody reads yet: the subscription lags after two records.
		var want []int64
		for id := int64(1); id <= 1200; id++ {
			ty := SyncStarted
			if id%2 == 0 {
				ty, want = SyncFailed, append(want, id)
			}
			store.add(rec(id, "web", ty))
			b.Publish(rec(id, "web", ty))
		}
		if !sub.Lagging() {
			t.Fatal("subscription not lagging")
		}
		var out syncBuffer
		stop := stream(t, &out, sub, StreamOptions{Replay: store.replay})
		synctest.Wait()
		store.add(rec(1201, "web", SyncFailed))
		b.Publish(rec(1201, "web", SyncFailed))
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		want = append(want, 1201)
		if d := cmp.Diff(want, frameIDs(out.String())); d != "" {
			t.Errorf("ids (-want +got):\n%s", d)
		}
		if store.calls < 3 {
			t.Errorf("replay called %d times; 1200 records need pages", store.calls)
		}
	})
}

func TestStreamSendsHeartbeatsAndEndsWithTheBroker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := quietBroker(2)
		sub := b.Subscribe(Filter{})
		var out syncBuffer
		flushes := 0
		done := make(chan error, 1)
		go func() {
			done <- Stream(t.Context(), &out, sub, StreamOptions{Heartbeat: 10 * time.Second, Flush: func() { flushes++ }})
		}()
		time.Sleep(25 * time.Second)
		synctest.Wait()
		if got := strings.Count(out.String(), Heartbeat); got != 2 {
			t.Errorf("%d heartbeats in 25s at 10s, want 2: %q", got, out.String())
		}
		b.Close()
		if err := <-done; err != nil {
			t.Errorf("Stream after broker Close = %v, want nil", err)
		}
		if flushes != 2 {
			t.Errorf("flushed %d times, want once per frame (2)", flushes)
		}
	})
}

func TestStreamStopsOnAFailedWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := quietBroker(2)
		sub := b.Subscribe(Filter{})
		defer sub.Close()
		done := make(chan error, 1)
		go func() { done <- Stream(t.Context(), failingWriter{}, sub, StreamOptions{}) }()
		b.Publish(rec(1, "web", SyncStarted))
		if err := <-done; err == nil {
			t.Error("Stream returned nil after its writer failed")
		}
	})
}

func TestFilterMatchesSwarmsWithTheLocalOneAsEmpty(t *testing.T) {
	local, prod := Event{Application: "web", Type: SyncStarted}, Event{Application: "web", Type: SyncStarted, Swarm: "prod"}
	for _, tc := range []struct {
		swarms      []string
		local, prod bool
	}{
		{nil, true, true},
		{[]string{""}, true, false},
		{[]string{"prod"}, false, true},
		{[]string{}, false, false},
	} {
		f := Filter{Swarms: tc.swarms}
		if f.Match(local) != tc.local || f.Match(prod) != tc.prod {
			t.Errorf("Swarms %q: local %v prod %v, want %v %v", tc.swarms, f.Match(local), f.Match(prod), tc.local, tc.prod)
		}
	}
}

// TestStreamSkipsWhatTheClientSawAlready: a client that saw events up to
// 5 from the leader reconnects to a replica whose copy of the history has
// only reached 3; what the replica copies next up to 5 is not sent again.
func TestStreamSkipsWhatTheClientSawAlready(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if d := cmp.Diff([]int64{6, 7}, streamOf(t, 3, 7, StreamOptions{AfterID: 5})); d != "" {
			t.Errorf("ids written (-want +got):\n%s", d)
		}
	})
}

// TestStreamReplaysEverythingKeptAfterAnExplicitZero: a replica whose
// store is empty asks with Last-Event-ID 0 and gets the whole history;
// a client naming no id gets live events only.
func TestStreamReplaysEverythingKeptAfterAnExplicitZero(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resume bool
		want   []int64
	}{
		{name: "Last-Event-ID: 0", resume: true, want: []int64{1, 2, 3}},
		{name: "no Last-Event-ID", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if d := cmp.Diff(tc.want, streamOf(t, 3, 3, StreamOptions{Resume: tc.resume})); d != "" {
					t.Errorf("ids written (-want +got):\n%s", d)
				}
			})
		})
	}
}

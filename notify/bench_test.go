package notify

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkEventFanOut measures the API's event stream fan-out: one
// record published to a Broker with 1,000 subscribers, each served by
// Stream as the SSE handler serves it, until every stream has written its
// frame. ns/op is that whole fan-out; p50-ms and p99-ms are the delays
// from Publish to each stream's write. Readers keep up (the next record is
// published once all wrote the last), so nothing may be dropped.
//
//	go test -run '^$' -bench EventFanOut -benchmem ./notify/
func BenchmarkEventFanOut(b *testing.B) {
	const subscribers = 1000
	broker := quietBroker(256)
	lat := &latencies{}
	ctx, cancel := context.WithCancel(context.Background())
	var streams sync.WaitGroup
	var written sync.WaitGroup
	subs := make([]*Subscription, subscribers)
	for i := range subs {
		subs[i] = broker.Subscribe(Filter{})
		w := &frameWriter{lat: lat, written: &written}
		streams.Go(func() {
			// Heartbeats would only add frames the latencies do not track.
			if err := Stream(ctx, w, subs[i], StreamOptions{Heartbeat: time.Hour}); err != nil {
				b.Error(err)
			}
		})
	}
	ev := Event{Application: "web", Type: SyncSucceeded, Revision: "0123456789abcdef0123456789abcdef01234567", Message: "synced web to 0123456"}
	var id int64
	b.ReportAllocs()
	for b.Loop() {
		id++
		written.Add(subscribers)
		// Publish happens before each stream reads the record (the
		// channel send), so the streams see this store.
		lat.sent.Store(time.Now().UnixNano())
		ev.At = time.Now()
		broker.Publish(Record{ID: id, Event: ev})
		written.Wait()
	}
	cancel()
	streams.Wait()
	for _, s := range subs {
		s.Close()
	}
	if n := broker.Dropped(); n != 0 {
		b.Errorf("%d records dropped for readers that keep up", n)
	}
	b.ReportMetric(lat.quantile(0.50), "p50-ms")
	b.ReportMetric(lat.quantile(0.99), "p99-ms")
}

// frameWriter is one SSE client: every frame it is handed counts as
// delivered at that moment.
type frameWriter struct {
	lat     *latencies
	written *sync.WaitGroup
}

func (w *frameWriter) Write(p []byte) (int, error) {
	w.lat.observe(time.Now().UnixNano() - w.lat.sent.Load())
	w.written.Done()
	return len(p), nil
}

// latencies is a histogram of delivery delays in microsecond buckets up to
// latencyBuckets µs (later ones land in the last): fixed memory, no
// allocation per delivery, safe for concurrent use.
type latencies struct {
	sent    atomic.Int64 // UnixNano of the record being fanned out
	buckets [latencyBuckets]atomic.Int64
}

const latencyBuckets = 1_000_000 // 1 s

func (l *latencies) observe(ns int64) {
	us := min(max(ns/1000, 0), latencyBuckets-1)
	l.buckets[us].Add(1)
}

// quantile returns the q-quantile in milliseconds, 0 with no observation.
func (l *latencies) quantile(q float64) float64 {
	var total int64
	for i := range l.buckets {
		total += l.buckets[i].Load()
	}
	if total == 0 {
		return 0
	}
	rank := int64(q * float64(total))
	var seen int64
	for i := range l.buckets {
		seen += l.buckets[i].Load()
		if seen > rank {
			return float64(i+1) / 1000
		}
	}
	return float64(latencyBuckets) / 1000
}

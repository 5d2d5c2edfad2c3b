package store_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/store"
)

// Example shows how a controller wires events: the store first, a recorder
// that numbers, keeps and then publishes every event to the broker the SSE
// handler subscribes to, and the outbound notifiers beside them.
func Example() {
	dataDir, _ := os.MkdirTemp("", "skep")
	defer os.RemoveAll(dataDir)
	logger := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())

	// A store that cannot be opened is reported and left out: events still
	// reach the broker, with ids from the recorder's own counter.
	var (
		appender notify.Appender
		lastID   int64
	)
	st, err := store.Open(ctx, filepath.Join(dataDir, store.FileName), store.Options{Logger: logger})
	if err != nil {
		logger.Error("event store unavailable", "err", err)
	} else {
		defer st.Close()
		if lastID, err = st.LastID(ctx); err == nil {
			appender = st // never a nil *Store: leave the interface nil instead
		}
	}
	broker := notify.NewBroker(notify.BrokerOptions{Logger: logger})
	recorder := notify.NewRecorder(notify.RecorderOptions{Store: appender, Publish: broker, LastID: lastID, Logger: logger})

	var reg notify.Registry
	reg.Register(notify.NewLog(logger))
	reg.Register(recorder) // and not the broker: the recorder feeds it
	// for _, n := range notify.Build(cfg, logger) { reg.Register(n) }
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = notify.RunAll(ctx, reg.Notifiers())
	}()
	if st != nil {
		go func() { _ = st.RunRetention(ctx, time.Hour) }()
	}

	// The SSE handler subscribes, then hands the subscription to
	// notify.Stream with the client's Last-Event-ID and st.Replay(filter);
	// here one record is read and framed by hand.
	sub := broker.Subscribe(notify.Filter{Types: []notify.EventType{notify.SyncStarted}})
	reg.Dispatch(ctx, notify.Event{Application: "web", Type: notify.SyncStarted, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	rec := <-sub.C()
	var frame strings.Builder
	_ = notify.WriteSSE(&frame, rec)
	_, body, _ := strings.Cut(frame.String(), "\n") // the id line varies
	fmt.Print(body)

	kept, _ := st.Events(ctx, store.Query{AfterID: rec.ID - 1})
	fmt.Println(len(kept) == 1 && kept[0].ID == rec.ID)
	sub.Close()
	cancel()
	<-done
	// Output:
	// event: sync-started
	// data: {"application":"web","swarm":"","type":"sync-started","at":"2026-01-02T03:04:05Z"}
	//
	// true
}

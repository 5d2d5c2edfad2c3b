package notify

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// ReplayFunc returns up to limit stored records with ids above afterID, in
// increasing id order. A store's Events query adapts to it; it may filter,
// and Stream filters again with the subscription's Filter.
type ReplayFunc func(ctx context.Context, afterID int64, limit int) ([]Record, error)

// StreamOptions configures Stream. The zero value streams live records only,
// with the default heartbeat.
type StreamOptions struct {
	// AfterID is the client's Last-Event-ID. When above zero, or when
	// Resume is set, records after it are replayed before live ones.
	AfterID int64
	// Resume says the client named a Last-Event-ID, 0 included: with 0,
	// every kept record is replayed (a replica copying the history whole).
	Resume bool
	// Replay reads the store. Nil means no store: nothing is replayed and a
	// lagging subscriber loses what it missed.
	Replay ReplayFunc
	// Heartbeat is the interval of heartbeat comments. Default 15s.
	Heartbeat time.Duration
	// Flush is called after each frame (an http.Flusher's Flush). Optional.
	Flush func()
	// Logger receives a Warn line when a replay fails; the stream then goes
	// on live. Default slog.Default().
	Logger *slog.Logger
}

// replayPage is how many records one Replay call asks for.
const replayPage = 500

// Stream writes sub's records to w as server-sent events until ctx is done
// (it then returns nil), the subscription or its broker closes (nil), or a
// write fails (the error). It does not close sub.
//
// Every record is written once, in increasing id order: first the replay
// after opts.AfterID, then live records, skipping those the replay already
// wrote. When sub lags, Stream resumes it and replays from the last id it
// wrote, so a slow client misses nothing the store kept.
func Stream(ctx context.Context, w io.Writer, sub *Subscription, opts StreamOptions) error {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := streamer{w: w, sub: sub, opts: opts, cursor: sub.Start()}
	if opts.AfterID > 0 || opts.Resume {
		s.cursor = opts.AfterID
		if err := s.replay(ctx); err != nil {
			return err
		}
	}
	heartbeat := time.NewTicker(opts.Heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case rec, ok := <-sub.C():
			if !ok {
				return nil
			}
			if err := s.live(rec); err != nil {
				return err
			}
		case <-sub.Lagged():
			sub.Resume()
			if err := s.replay(ctx); err != nil {
				return err
			}
		case <-heartbeat.C:
			if err := WriteHeartbeat(w); err != nil {
				return err
			}
			s.flush()
		}
	}
}

type streamer struct {
	w    io.Writer
	sub  *Subscription
	opts StreamOptions
	// cursor is the id a replay starts after: the last id written, or the
	// client's Last-Event-ID, or the subscription's start.
	cursor int64
}

// live writes a record from the subscription unless its id is not above
// the cursor: replay already wrote it (the store and the broker both
// carry records published after the subscription started), or the client
// named a later id, as one does that saw the record from another replica
// before this one copied it (see TestStreamSkipsWhatTheClientSawAlready).
func (s *streamer) live(rec Record) error {
	if rec.ID <= s.cursor {
		return nil
	}
	return s.write(rec)
}

// write sends rec as one SSE frame and advances the cursor, so a later
// replay (after lagging) starts after it.
func (s *streamer) write(rec Record) error {
	if err := WriteSSE(s.w, rec); err != nil {
		return err
	}
	s.cursor = rec.ID
	s.flush()
	return nil
}

// flush pushes what was written to the client; without it net/http would
// buffer the frame until the buffer fills.
func (s *streamer) flush() {
	if s.opts.Flush != nil {
		s.opts.Flush()
	}
}

// replay writes every stored record after the cursor. A failing store is
// logged and skipped: the stream goes on live rather than ending, since a
// reconnecting client would only meet the same failure.
func (s *streamer) replay(ctx context.Context) error {
	if s.opts.Replay == nil {
		return nil
	}
	filter := s.sub.Filter()
	for {
		recs, err := s.opts.Replay(ctx, s.cursor, replayPage)
		if err != nil {
			if ctx.Err() == nil {
				s.opts.Logger.Warn("event replay failed", "after_id", s.cursor, "err", err)
			}
			return nil
		}
		for _, rec := range recs {
			if rec.ID <= s.cursor {
				return fmt.Errorf("replay after %d returned id %d: ids out of order", s.cursor, rec.ID)
			}
			if !filter.Match(rec.Event) {
				s.cursor = rec.ID
				continue
			}
			if err := s.write(rec); err != nil {
				return err
			}
		}
		if len(recs) < replayPage {
			return nil
		}
	}
}

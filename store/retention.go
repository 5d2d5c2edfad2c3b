package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Pruned counts what one retention pass deleted.
type Pruned struct {
	Events   int64 // events deleted
	Syncs    int64 // syncs deleted
	Sessions int64 // expired sign-in sessions deleted
}

// Prune applies retention once: events older than MaxAge and beyond the
// MaxEvents newest, syncs finished (or, if still open, started) before
// MaxAge and beyond the MaxSyncs newest of their application, and
// sign-in sessions past their end. Deleting never lowers LastID.
func (s *Store) Prune(ctx context.Context) (Pruned, error) {
	var p Pruned
	cutoff := s.opts.Now().Add(-s.opts.MaxAge).UnixNano()
	err := s.write(ctx, func(tx *sql.Tx) error {
		steps := []struct {
			n     *int64
			query string
			args  []any
			on    bool
		}{
			{&p.Events, "DELETE FROM events WHERE at < ?", []any{cutoff}, s.opts.MaxAge > 0},
			// The subquery finds the MaxEvents-th newest id; with fewer
			// events it is NULL and the comparison deletes nothing.
			{&p.Events, "DELETE FROM events WHERE id < (SELECT id FROM events ORDER BY id DESC LIMIT 1 OFFSET ?)",
				[]any{s.opts.MaxEvents - 1}, s.opts.MaxEvents > 0},
			{&p.Syncs, "DELETE FROM syncs WHERE COALESCE(finished, started) < ?", []any{cutoff}, s.opts.MaxAge > 0},
			// Numbered per application, newest first: the count limit is
			// per application, so a busy one cannot push out a quiet one.
			{&p.Syncs, `DELETE FROM syncs WHERE id IN (SELECT id FROM (
				SELECT id, ROW_NUMBER() OVER (PARTITION BY application ORDER BY id DESC) AS n FROM syncs) WHERE n > ?)`,
				[]any{s.opts.MaxSyncs}, s.opts.MaxSyncs > 0},
			// Session expires with no retention setting: Session already
			// refuses an expired one, and this only frees its row.
			{&p.Sessions, "DELETE FROM sessions WHERE expires <= ?", []any{s.opts.Now().UnixNano()}, true},
		}
		for _, st := range steps {
			if !st.on {
				continue
			}
			res, err := tx.ExecContext(ctx, st.query, st.args...)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			*st.n += n
		}
		return nil
	})
	if err != nil {
		return Pruned{}, fmt.Errorf("prune store %s: %w", s.path, err)
	}
	return p, nil
}

// RunRetention prunes at once and then every interval until ctx is done,
// when it returns nil. A failed pass is logged at Warn and retried at the
// next interval. The caller owns the goroutine it runs in. An interval of
// zero or less means one hour.
func (s *Store) RunRetention(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = time.Hour
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		p, err := s.Prune(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.opts.Logger.Warn("store retention failed", "err", err)
		case p.Events > 0 || p.Syncs > 0 || p.Sessions > 0:
			s.opts.Logger.Info("store retention", "events_deleted", p.Events, "syncs_deleted", p.Syncs, "sessions_deleted", p.Sessions)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

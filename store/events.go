package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/skep-cd/skep/notify"
)

// Append keeps e under the next id after every id handed out so far and
// returns that id, updating the sync history in the same transaction. A
// zero At is stamped with the store's clock. The controller's Recorder uses
// Insert instead, because it chooses ids itself.
func (s *Store) Append(ctx context.Context, e notify.Event) (int64, error) {
	var id int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		e = s.stamp(e)
		res, err := tx.ExecContext(ctx, "INSERT INTO events (application, type, swarm, revision, message, actor, cause, shared, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			e.Application, string(e.Type), e.Swarm, e.Revision, e.Message, e.Actor, e.Cause, e.Shared, e.At.UnixNano())
		if err != nil {
			return err
		}
		if id, err = res.LastInsertId(); err != nil {
			return err
		}
		return recordSync(ctx, tx, e)
	})
	if err != nil {
		return 0, fmt.Errorf("append %s event of %s: %w", e.Type, e.Application, err)
	}
	return id, nil
}

// Insert keeps rec under rec.ID, with its term, updating the sync history
// in the same transaction. The id must be above LastID; otherwise it returns an error
// wrapping ErrIDNotAbove and keeps nothing. A zero At is stamped with the
// store's clock. It implements notify.Appender.
func (s *Store) Insert(ctx context.Context, rec notify.Record) error {
	if s == nil {
		return fmt.Errorf("insert event %d: %w", rec.ID, ErrNoStore)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		last, err := lastID(ctx, tx)
		if err != nil {
			return err
		}
		if rec.ID <= last {
			return fmt.Errorf("id %d, last %d: %w", rec.ID, last, ErrIDNotAbove)
		}
		e := s.stamp(rec.Event)
		if _, err := tx.ExecContext(ctx, "INSERT INTO events (id, application, type, swarm, revision, message, actor, cause, shared, at, term) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			rec.ID, e.Application, string(e.Type), e.Swarm, e.Revision, e.Message, e.Actor, e.Cause, e.Shared, e.At.UnixNano(), rec.Term); err != nil {
			return err
		}
		return recordSync(ctx, tx, e)
	})
	if err != nil {
		return fmt.Errorf("insert event %d (%s of %s): %w", rec.ID, rec.Type, rec.Application, err)
	}
	return nil
}

// stamp sets a zero At to the store's clock.
func (s *Store) stamp(e notify.Event) notify.Event {
	if e.At.IsZero() {
		e.At = s.opts.Now()
	}
	return e
}

// LastID is the highest event id the store ever handed out or was given,
// including ids of events retention has since deleted; 0 for a new store.
// A Recorder continues above it (notify.RecorderOptions.LastID).
func (s *Store) LastID(ctx context.Context) (int64, error) {
	id, err := lastID(ctx, s.db)
	if err != nil {
		return 0, fmt.Errorf("read last event id: %w", err)
	}
	return id, nil
}

// lastID reads the AUTOINCREMENT counter rather than MAX(id): the counter
// keeps the highest id ever used, even after retention deleted that row,
// so an id is never handed out twice.
func lastID(ctx context.Context, q querier) (int64, error) {
	var id int64
	err := q.QueryRowContext(ctx, "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)").Scan(&id)
	return id, err
}

// write runs fn in a write transaction and commits it when fn returns nil.
// The DSN's _txlock=immediate makes BEGIN wait for the write lock, so a
// concurrent writer queues rather than failing mid-transaction. The
// deferred Rollback is a no-op after Commit.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// Query selects events. The zero value asks for the oldest DefaultLimit
// events kept.
type Query struct {
	// AfterID, when above zero, selects only events with a higher id: what
	// a client whose Last-Event-ID is AfterID missed.
	AfterID int64
	// Applications, when not empty, selects only these applications.
	Applications []string
	// Types, when not empty, selects only these types.
	Types []notify.EventType
	// Swarms, when not nil, selects only these destinations ("" is the
	// local swarm).
	Swarms []string
	// Limit caps the number of records. Zero or less means DefaultLimit;
	// above MaxLimit means MaxLimit.
	Limit int
	// Newest selects the Limit newest matching events instead of the
	// oldest. Records are still returned in increasing id order.
	Newest bool
}

// DefaultLimit and MaxLimit bound Query.Limit.
const (
	DefaultLimit = 100
	MaxLimit     = 10_000
)

// eventColumns are the columns scanRecords reads, in its order.
const eventColumns = "id, application, type, swarm, revision, message, actor, cause, shared, at, term"

// eventColumnsV1 are eventColumns as schema v1 has them, for the
// migrations that read events before v4 added a failure's cause and v5
// the leader term: the columns they add read as empty.
const eventColumnsV1 = "id, application, type, swarm, revision, message, actor, '', '', at, 0"

// Events returns the records q selects, in increasing id order. The slice
// is the caller's.
func (s *Store) Events(ctx context.Context, q Query) ([]notify.Record, error) {
	var (
		where []string
		args  []any
	)
	if q.AfterID > 0 {
		where = append(where, "id > ?")
		args = append(args, q.AfterID)
	}
	if len(q.Applications) > 0 {
		where = append(where, "application IN ("+placeholders(len(q.Applications))+")")
		for _, a := range q.Applications {
			args = append(args, a)
		}
	}
	if len(q.Types) > 0 {
		where = append(where, "type IN ("+placeholders(len(q.Types))+")")
		for _, t := range q.Types {
			args = append(args, string(t))
		}
	}
	if q.Swarms != nil {
		if len(q.Swarms) == 0 {
			return nil, nil
		}
		where = append(where, "swarm IN ("+placeholders(len(q.Swarms))+")")
		for _, w := range q.Swarms {
			args = append(args, w)
		}
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	query := "SELECT " + eventColumns + " FROM events"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	order := "ASC"
	if q.Newest {
		order = "DESC"
	}
	query += " ORDER BY id " + order + " LIMIT ?"
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	// The newest were read newest first, to take the limit from that end;
	// callers get increasing ids either way.
	if q.Newest {
		for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
			recs[i], recs[j] = recs[j], recs[i]
		}
	}
	return recs, nil
}

// Replay adapts Events to notify.ReplayFunc for the given filter's
// applications and types. (Filter.Allow is applied by notify.Stream.)
func (s *Store) Replay(f notify.Filter) notify.ReplayFunc {
	apps, types, swarms := f.Applications, f.Types, f.Swarms
	return func(ctx context.Context, afterID int64, limit int) ([]notify.Record, error) {
		return s.Events(ctx, Query{AfterID: afterID, Applications: apps, Types: types, Swarms: swarms, Limit: limit})
	}
}

// placeholders is "?, ?, ..." for n bound values of an IN list.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// scanRecords reads and closes rows of eventColumns.
func scanRecords(rows *sql.Rows) ([]notify.Record, error) {
	defer rows.Close()
	var recs []notify.Record
	for rows.Next() {
		var (
			rec notify.Record
			typ string
			at  int64
		)
		if err := rows.Scan(&rec.ID, &rec.Application, &typ, &rec.Swarm, &rec.Revision, &rec.Message, &rec.Actor, &rec.Cause, &rec.Shared, &at, &rec.Term); err != nil {
			return nil, err
		}
		rec.Type = notify.EventType(typ)
		rec.At = time.Unix(0, at).UTC()
		recs = append(recs, rec)
	}
	return recs, rows.Err()
}

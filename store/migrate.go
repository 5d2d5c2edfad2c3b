package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/skep-cd/skep/notify"
)

// migration moves the schema from version-1 to version. Migrations run in
// order inside one transaction, so an upgrade applies whole or not at all.
// They are forward only: there is no down.
type migration struct {
	version int
	name    string
	up      func(ctx context.Context, tx *sql.Tx) error
}

// migrations is the schema's history. Append only: an applied migration is
// never edited, since databases in the field already ran it.
var migrations = []migration{
	{version: 1, name: "events", up: migrateEvents},
	{version: 2, name: "sync history", up: migrateSyncs},
	{version: 3, name: "sign-in sessions", up: migrateSessions},
	{version: 4, name: "causes of failures", up: migrateCauses},
	{version: 5, name: "event terms", up: migrateTerms},
}

// SchemaVersion is the schema version this build migrates to.
func SchemaVersion() int { return migrations[len(migrations)-1].version }

// Version reports the schema version of the open database.
func (s *Store) Version(ctx context.Context) (int, error) {
	v, err := schemaVersion(ctx, s.db)
	if err != nil {
		return 0, fmt.Errorf("read schema version of %s: %w", s.path, err)
	}
	return v, nil
}

// querier is what *sql.DB and *sql.Tx share, so version and id reads work
// inside and outside a transaction.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaVersion is the highest migration applied; 0 for a new database.
func schemaVersion(ctx context.Context, q querier) (int, error) {
	var v int
	err := q.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&v)
	return v, err
}

// migrate brings db to the last version in ms.
func migrate(ctx context.Context, db *sql.DB, ms []migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		name    TEXT    NOT NULL,
		applied INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	current, err := schemaVersion(ctx, tx)
	if err != nil {
		return fmt.Errorf("migrate: read version: %w", err)
	}
	target := ms[len(ms)-1].version
	if current > target {
		return fmt.Errorf("migrate: schema v%d, this build knows up to v%d: %w", current, target, ErrSchemaTooNew)
	}
	for _, m := range ms {
		if m.version <= current {
			continue
		}
		if err := m.up(ctx, tx); err != nil {
			return fmt.Errorf("migrate to v%d (%s): %w", m.version, m.name, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied) VALUES (?, ?, ?)",
			m.version, m.name, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("migrate to v%d (%s): %w", m.version, m.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// migrateEvents creates the event log. AUTOINCREMENT keeps the highest id
// ever used in sqlite_sequence, so ids are never reused, even after
// retention deleted every row: a client replaying from Last-Event-ID must
// never see an old id name a new event.
func migrateEvents(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `
CREATE TABLE events (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	application TEXT    NOT NULL,
	type        TEXT    NOT NULL,
	swarm       TEXT    NOT NULL DEFAULT '',
	revision    TEXT    NOT NULL DEFAULT '',
	message     TEXT    NOT NULL DEFAULT '',
	actor       TEXT    NOT NULL DEFAULT '',
	at          INTEGER NOT NULL -- Unix nanoseconds
);
CREATE INDEX events_at ON events (at);
CREATE INDEX events_application ON events (application, id);
`)
	return err
}

// migrateCauses keeps each event's root cause of a failure and the
// dependency several applications share whose failure it is
// (notify.Event.Cause, Shared); events kept before have neither.
func migrateCauses(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `
ALTER TABLE events ADD COLUMN cause  TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN shared TEXT NOT NULL DEFAULT '';
`)
	return err
}

// migrateSyncs creates the sync history and derives it from the events
// already kept, so a database upgraded from v1 has history for them.
func migrateSyncs(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `
CREATE TABLE syncs (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	application TEXT    NOT NULL,
	swarm       TEXT    NOT NULL DEFAULT '',
	revision    TEXT    NOT NULL DEFAULT '',
	actor       TEXT    NOT NULL DEFAULT '',
	started     INTEGER NOT NULL, -- Unix nanoseconds
	finished    INTEGER,          -- NULL while running
	outcome     TEXT    NOT NULL,
	summary     TEXT    NOT NULL DEFAULT '',
	result      TEXT    NOT NULL DEFAULT '',
	error       TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX syncs_application ON syncs (application, id);
`); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, "SELECT "+eventColumnsV1+" FROM events WHERE type IN (?, ?, ?) ORDER BY id",
		notify.SyncStarted, notify.SyncSucceeded, notify.SyncFailed)
	if err != nil {
		return err
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if err := recordSync(ctx, tx, rec.Event); err != nil {
			return err
		}
	}
	return nil
}

// migrateTerms adds the leader term of a replicated controller to each
// event; 0 is an event raised without leader election.
func migrateTerms(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, "ALTER TABLE events ADD COLUMN term INTEGER NOT NULL DEFAULT 0")
	return err
}

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/skep-cd/skep/notify"
)

// Outcome is how a sync ended. The zero value is not an outcome.
type Outcome string

// The outcomes. Their strings are stored and shown by the API.
const (
	// Running: sync-started was seen and nothing closed it yet.
	Running Outcome = "running"
	// Succeeded: closed by sync-succeeded.
	Succeeded Outcome = "succeeded"
	// Failed: closed by sync-failed, or a sync-failed with nothing open
	// (a commit that could not be rendered never starts a sync).
	Failed Outcome = "failed"
	// Interrupted: a new sync of the application started while this one
	// was still open, which means the controller stopped mid-sync.
	Interrupted Outcome = "interrupted"
)

// Sync is one sync of one application, as its events told it.
type Sync struct {
	ID          int64
	Application string
	Swarm       string
	Revision    string // the commit synced
	Actor       string // who asked; empty when the controller acted on its own
	Started     time.Time
	Finished    time.Time // zero while Running
	Outcome     Outcome
	Summary     string // the plan summary sync-started carried
	Result      string // what sync-succeeded reported was applied
	Error       string // what sync-failed reported
}

// History returns the newest limit syncs of app, newest first. A limit of
// zero or less means DefaultLimit; above MaxLimit means MaxLimit.
func (s *Store) History(ctx context.Context, app string, limit int) ([]Sync, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	syncs, err := s.syncs(ctx, `SELECT `+syncColumns+` FROM syncs WHERE application = ? ORDER BY id DESC LIMIT ?`, app, limit)
	if err != nil {
		return nil, fmt.Errorf("read sync history of %s: %w", app, err)
	}
	return syncs, nil
}

// LastSucceeded returns the newest succeeded sync of every application
// the history holds, by application name: what a controller that starts
// on this store last wrote of each (see
// TestLastSucceededIsTheNewestSuccessOfEachApplication).
func (s *Store) LastSucceeded(ctx context.Context) ([]Sync, error) {
	syncs, err := s.syncs(ctx, `SELECT `+syncColumns+` FROM syncs WHERE id IN
		(SELECT MAX(id) FROM syncs WHERE outcome = ? GROUP BY application) ORDER BY application`, Succeeded)
	if err != nil {
		return nil, fmt.Errorf("read last succeeded syncs: %w", err)
	}
	return syncs, nil
}

// syncColumns are the columns syncs scans, in its order.
const syncColumns = "id, application, swarm, revision, actor, started, finished, outcome, summary, result, error"

// syncs runs query, which selects syncColumns, and scans its rows.
func (s *Store) syncs(ctx context.Context, query string, args ...any) ([]Sync, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var syncs []Sync
	for rows.Next() {
		var (
			sy       Sync
			started  int64
			finished sql.NullInt64
			outcome  string
		)
		if err := rows.Scan(&sy.ID, &sy.Application, &sy.Swarm, &sy.Revision, &sy.Actor, &started, &finished,
			&outcome, &sy.Summary, &sy.Result, &sy.Error); err != nil {
			return nil, err
		}
		sy.Started = time.Unix(0, started).UTC()
		if finished.Valid {
			sy.Finished = time.Unix(0, finished.Int64).UTC()
		}
		sy.Outcome = Outcome(outcome)
		syncs = append(syncs, sy)
	}
	return syncs, rows.Err()
}

// CloseRunning marks every sync still running as interrupted at at, with
// why as its error, and returns how many it closed. The controller calls
// it once at start, before it records anything: one controller owns a
// data directory, so a sync left running was cut short when the previous
// process died, and no later event would ever close it (see
// TestCloseRunningEndsWhatTheLastProcessLeftOpen).
func (s *Store) CloseRunning(ctx context.Context, at time.Time, why string) (int64, error) {
	res, err := s.db.ExecContext(ctx, "UPDATE syncs SET outcome = ?, finished = ?, error = ? WHERE outcome = ?",
		Interrupted, at.UnixNano(), why, Running)
	if err != nil {
		return 0, fmt.Errorf("close running syncs: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("close running syncs: %w", err)
	}
	return n, nil
}

// recordSync folds one event into the sync history: sync-started opens a
// row, sync-succeeded and sync-failed close the application's open one.
// Other types leave the history alone. Migration v2 replays kept events
// through it; if the syncs table ever changes shape, v2 must keep a frozen
// copy of this function.
func recordSync(ctx context.Context, tx *sql.Tx, e notify.Event) error {
	at := e.At.UnixNano()
	switch e.Type {
	case notify.SyncStarted:
		if _, err := tx.ExecContext(ctx, "UPDATE syncs SET outcome = ?, finished = ? WHERE application = ? AND outcome = ?",
			Interrupted, at, e.Application, Running); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO syncs (application, swarm, revision, actor, started, outcome, summary) VALUES (?, ?, ?, ?, ?, ?, ?)",
			e.Application, e.Swarm, e.Revision, e.Actor, at, Running, e.Message)
		return err
	case notify.SyncSucceeded, notify.SyncFailed:
		outcome, result, msg := Succeeded, e.Message, ""
		if e.Type == notify.SyncFailed {
			outcome, result, msg = Failed, "", e.Message
		}
		var id int64
		err := tx.QueryRowContext(ctx, "SELECT id FROM syncs WHERE application = ? AND outcome = ? ORDER BY id DESC LIMIT 1",
			e.Application, Running).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			_, err = tx.ExecContext(ctx, "INSERT INTO syncs (application, swarm, revision, actor, started, finished, outcome, result, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
				e.Application, e.Swarm, e.Revision, e.Actor, at, at, outcome, result, msg)
			return err
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE syncs SET finished = ?, outcome = ?, result = ?, error = ?, revision = CASE WHEN revision = '' THEN ? ELSE revision END WHERE id = ?",
			at, outcome, result, msg, e.Revision, id)
		return err
	default:
		return nil
	}
}

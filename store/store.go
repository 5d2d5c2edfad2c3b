// Package store keeps what people look back at in an embedded SQLite
// database in the data directory: every event, and a sync history per
// application derived from them. It also keeps the sessions of people
// signed in through an OpenID provider (package identity decides what
// they mean); losing them signs those people out, nothing more.
//
// It is history, never safety: nothing in the reconcile reads it to decide
// what to deploy or delete (the controller reads only each application's
// last sync from it at start, to show), and a store that cannot be opened or written is
// reported while the controller goes on reconciling (see notify.Recorder,
// which writes to it off the reconcile path). The schema is versioned and
// migrated forward only when the database is opened; a database written by
// a newer Skep is refused rather than guessed at. Retention by age and count
// runs when the caller runs RunRetention. The store never deletes an event
// because it was read: replay (Events with AfterID) reads only.
//
// A Store is safe for concurrent use. It uses modernc.org/sqlite (pure Go)
// in WAL mode, so readers do not wait for the writer.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

// FileName is the database's name inside the data directory.
const FileName = "skep.db"

// Options configures a Store. The zero value means all defaults; a negative
// limit turns that limit off.
type Options struct {
	// MaxAge is how long events and finished syncs are kept. Default 30 days.
	MaxAge time.Duration
	// MaxEvents is how many of the newest events are kept. Default 100000.
	MaxEvents int
	// MaxSyncs is how many of the newest syncs are kept per application.
	// Default 1000.
	MaxSyncs int
	// Logger receives a line per retention pass that deleted something and
	// a Warn line per failed pass. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock retention measures age with. Default time.Now.
	Now func() time.Time
}

// withDefaults fills in every zero field; negative limits stay negative
// (off).
func (o Options) withDefaults() Options {
	if o.MaxAge == 0 {
		o.MaxAge = 30 * 24 * time.Hour
	}
	if o.MaxEvents == 0 {
		o.MaxEvents = 100_000
	}
	if o.MaxSyncs == 0 {
		o.MaxSyncs = 1000
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Store is an open database. Build it with Open and Close it when done; the
// zero value is not usable. A nil *Store is allowed only as the receiver of
// Insert, which then returns ErrNoStore.
type Store struct {
	db   *sql.DB
	path string
	opts Options
}

// ErrSchemaTooNew is returned by Open for a database migrated by a newer
// Skep than this one: its schema is not guessed at.
var ErrSchemaTooNew = errors.New("database schema is newer than this skep")

// ErrCorrupt is returned (wrapped) by Open for a file that is not an
// SQLite database or fails its integrity check: opening it again will not
// help, and MoveAside keeps it for inspection.
var ErrCorrupt = errors.New("database file is corrupt")

// ErrNoStore is returned by Insert on a nil *Store, which a caller may have
// put in a notify.Appender after Open failed.
var ErrNoStore = errors.New("no event store")

// ErrIDNotAbove is returned by Insert for a record whose id is not above
// every id the store has handed out.
var ErrIDNotAbove = errors.New("event id not above the last stored id")

// Open opens or creates the database at path (normally
// filepath.Join(dataDir, FileName)), creating its directory, switches it to
// WAL, checks its integrity and migrates its schema to the current version.
// An unreadable, corrupt, unwritable or too-new database is an error; the
// caller reports it and runs without a store. A corrupt one's error is
// ErrCorrupt: the caller may MoveAside the file and Open a new one.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	// The path becomes a DSN: '?' or '#' would start its query part.
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open store %s: path must not contain '?' or '#'", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	// _txlock=immediate takes the write lock at BEGIN, so two writers queue
	// on busy_timeout instead of one failing with SQLITE_BUSY on upgrade.
	dsn := path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{db: db, path: path, opts: opts.withDefaults()}
	// The DSN carries the pragmas to every pooled connection. SQLite answers
	// a WAL switch it cannot make with the old mode, not an error, so check
	// reads the mode back.
	if err := s.check(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, corrupt(err))
	}
	if err := migrate(ctx, db, migrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, corrupt(err))
	}
	return s, nil
}

// integrityError is what quick_check found wrong in a database SQLite
// could read.
type integrityError struct{ problems []string }

func (e *integrityError) Error() string {
	return "integrity check: " + strings.Join(e.problems, "; ")
}

// corrupt adds ErrCorrupt to err when SQLite says the file is not a
// database or is damaged, and returns any other error as it is.
func corrupt(err error) error {
	var se *sqlite.Error
	var ie *integrityError
	if errors.As(err, &ie) ||
		errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_NOTADB || se.Code()&0xff == sqlite3.SQLITE_CORRUPT) {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return err
}

// MoveAside renames the database at path, with its WAL and shared-memory
// files, to path.corrupt-<at in UTC>, so that Open can start a new one and
// the old one stays for inspection or repair. It returns the new name of
// the database file. It must not be called on a database that is open.
func MoveAside(path string, at time.Time) (string, error) {
	to := path + ".corrupt-" + at.UTC().Format("20060102T150405Z")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		err := os.Rename(path+suffix, to+suffix)
		if err != nil && !(suffix != "" && errors.Is(err, os.ErrNotExist)) {
			return "", fmt.Errorf("move store %s aside: %w", path, err)
		}
	}
	return to, nil
}

// check fails on a file that is not a database, is corrupt, or cannot be
// switched to WAL (which needs a writable directory).
func (s *Store) check(ctx context.Context) error {
	var mode string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, want wal", mode)
	}
	rows, err := s.db.QueryContext(ctx, "PRAGMA quick_check")
	if err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("integrity check: %w", err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	if len(problems) > 0 {
		return &integrityError{problems: problems}
	}
	return nil
}

// Path is the database file the store was opened on.
func (s *Store) Path() string { return s.path }

// Close closes the database. Calls after Close fail.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store %s: %w", s.path, err)
	}
	return nil
}

package store

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/notify"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func open(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	s, err := Open(t.Context(), path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newStore(t *testing.T) *Store {
	t.Helper()
	return open(t, filepath.Join(t.TempDir(), FileName), Options{})
}

func ev(app string, ty notify.EventType, at time.Time) notify.Event {
	return notify.Event{Application: app, Type: ty, At: at}
}

func TestOpenCreatesAWALDatabaseAtTheCurrentSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", "data", FileName)
	s := open(t, path, Options{})
	v, err := s.Version(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if v != SchemaVersion() {
		t.Errorf("Version = %d, want %d", v, SchemaVersion())
	}
	var mode string
	if err := s.db.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q (%v), want wal", mode, err)
	}
	if s.Path() != path {
		t.Errorf("Path() = %q", s.Path())
	}
}

func TestOpenRefusesWhatItCannotUse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, dir string) string
		is      error
		corrupt bool // the error is ErrCorrupt, and only then
	}{
		{name: "a file that is not a database", corrupt: true, prepare: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, FileName)
			if err := os.WriteFile(p, []byte("this is not an sqlite file, just text that is long enough to matter............................................................"), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{name: "a corrupt database", corrupt: true, prepare: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, FileName)
			s := open(t, p, Options{})
			for i := range 300 {
				if _, err := s.Append(t.Context(), notify.Event{Application: "web", Type: notify.SyncStarted, Message: string(make([]byte, 200)), At: t0.Add(time.Duration(i))}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.db.ExecContext(t.Context(), "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
				t.Fatal(err)
			}
			s.Close()
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			// Overwrite the pages after the first with junk: the header
			// survives, the b-trees do not.
			junk := make([]byte, 4096*8)
			for i := range junk {
				junk[i] = byte(i * 7)
			}
			if _, err := f.WriteAt(junk, 4096); err != nil {
				t.Fatal(err)
			}
			f.Close()
			return p
		}},
		{name: "a directory that cannot be created", prepare: func(t *testing.T, dir string) string {
			blocker := filepath.Join(dir, "file")
			if err := os.WriteFile(blocker, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(blocker, "data", FileName)
		}},
		{name: "a schema from a newer skep", is: ErrSchemaTooNew, prepare: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, FileName)
			s := open(t, p, Options{})
			if _, err := s.db.ExecContext(t.Context(), "INSERT INTO schema_migrations (version, name, applied) VALUES (99, 'future', 0)"); err != nil {
				t.Fatal(err)
			}
			s.Close()
			return p
		}},
		{name: "a path the driver would cut", prepare: func(t *testing.T, dir string) string {
			return filepath.Join(dir, "skep.db?mode=ro")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.prepare(t, t.TempDir())
			s, err := Open(t.Context(), path, Options{Logger: quiet()})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			t.Logf("Open = %v", err)
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Open = %v, want %v", err, tc.is)
			}
			if errors.Is(err, ErrCorrupt) != tc.corrupt {
				t.Errorf("Open = %v: corrupt %t, want %t", err, errors.Is(err, ErrCorrupt), tc.corrupt)
			}
		})
	}
}

func TestMoveAsideKeepsTheCorruptFilesAndLetsANewStoreOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	for suffix, content := range map[string]string{"": "not a database", "-wal": "wal", "-shm": "shm"} {
		if err := os.WriteFile(path+suffix, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	moved, err := MoveAside(path, t0)
	if err != nil {
		t.Fatal(err)
	}
	if want := path + ".corrupt-20260501T120000Z"; moved != want {
		t.Errorf("MoveAside = %s, want %s", moved, want)
	}
	for suffix, content := range map[string]string{"": "not a database", "-wal": "wal", "-shm": "shm"} {
		if b, err := os.ReadFile(moved + suffix); err != nil || string(b) != content {
			t.Errorf("%s%s = %q, %v; want %q", moved, suffix, b, err, content)
		}
	}
	s := open(t, path, Options{})
	if _, err := s.Append(t.Context(), ev("web", notify.SyncStarted, t0)); err != nil {
		t.Errorf("the new store does not keep events: %v", err)
	}
	s.Close()
	if _, err := MoveAside(filepath.Join(dir, "missing.db"), t0); err == nil {
		t.Error("MoveAside of a file that is not there succeeded")
	}
}

func TestAppendAndInsertReportAClosedStore(t *testing.T) {
	s := newStore(t)
	s.Close()
	if _, err := s.Append(t.Context(), ev("web", notify.SyncStarted, t0)); err == nil {
		t.Error("Append on a closed store returned no error")
	}
	if err := s.Insert(t.Context(), notify.Record{ID: 9, Event: ev("web", notify.SyncStarted, t0)}); err == nil {
		t.Error("Insert on a closed store returned no error")
	}
}

func TestAppendReportsAStoreLockedByAnotherWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s := open(t, path, Options{})
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.WithoutCancel(t.Context()), "ROLLBACK")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := s.Append(ctx, ev("web", notify.SyncStarted, t0)); err == nil {
		t.Error("Append succeeded while another writer held the database")
	}
}

func TestInsertKeepsGivenIDsAndRefusesOnesNotAbove(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	if err := s.Insert(ctx, notify.Record{ID: 100, Event: ev("web", notify.SyncStarted, t0)}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{100, 99, 0} {
		err := s.Insert(ctx, notify.Record{ID: id, Event: ev("web", notify.SyncStarted, t0)})
		if !errors.Is(err, ErrIDNotAbove) {
			t.Errorf("Insert id %d after 100 = %v, want ErrIDNotAbove", id, err)
		}
	}
	id, err := s.Append(ctx, ev("web", notify.SyncSucceeded, t0))
	if err != nil || id != 101 {
		t.Errorf("Append after Insert 100 = %d, %v; want 101", id, err)
	}
}

func TestInsertKeepsTheTermOfEachRecord(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	for i, term := range []int64{0, 3, 4} {
		if err := s.Insert(ctx, notify.Record{ID: int64(10 + i), Term: term, Event: ev("web", notify.DriftDetected, t0)}); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := s.Events(ctx, Query{})
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, r := range recs {
		got = append(got, r.Term)
	}
	if d := cmp.Diff([]int64{0, 3, 4}, got); d != "" {
		t.Errorf("terms read back (-want +got):\n%s", d)
	}
}

func TestLastIDSurvivesRetentionAndRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s := open(t, path, Options{MaxAge: time.Hour, Now: func() time.Time { return t0.Add(48 * time.Hour) }})
	ctx := t.Context()
	if err := s.Insert(ctx, notify.Record{ID: 5000, Event: ev("web", notify.SyncStarted, t0)}); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Prune(ctx); err != nil || p.Events != 1 {
		t.Fatalf("Prune = %+v, %v; want the one event deleted", p, err)
	}
	s.Close()
	s = open(t, path, Options{})
	last, err := s.LastID(ctx)
	if err != nil || last != 5000 {
		t.Errorf("LastID after pruning every event and reopening = %d, %v; want 5000", last, err)
	}
}

func TestEventsSelectsByQuery(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	all := []notify.Event{
		{Application: "web", Type: notify.SyncStarted, Revision: "abc", Message: "plan", Actor: "alice", Swarm: "prod"},
		{Application: "api", Type: notify.SyncStarted},
		{Application: "web", Type: notify.SyncFailed, Message: "boom", Cause: "web_api: exit code 1", Shared: "registry r.example:5000"},
		{Application: "db", Type: notify.DriftDetected},
		{Application: "api", Type: notify.SyncSucceeded},
	}
	for i, e := range all {
		e.At = t0.Add(time.Duration(i) * time.Second)
		if _, err := s.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(recs []notify.Record) []int64 {
		var out []int64
		for _, r := range recs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		q    Query
		want []int64
	}{
		{name: "the zero query reads every event oldest first", want: []int64{1, 2, 3, 4, 5}},
		{name: "after id reads only later events", q: Query{AfterID: 3}, want: []int64{4, 5}},
		{name: "applications select", q: Query{Applications: []string{"web", "db"}}, want: []int64{1, 3, 4}},
		{name: "types select", q: Query{Types: []notify.EventType{notify.SyncStarted, notify.SyncSucceeded}}, want: []int64{1, 2, 5}},
		{name: "filters combine", q: Query{AfterID: 1, Applications: []string{"api"}, Types: []notify.EventType{notify.SyncStarted}}, want: []int64{2}},
		{name: "limit keeps the oldest", q: Query{Limit: 2}, want: []int64{1, 2}},
		{name: "newest keeps the newest in id order", q: Query{Limit: 2, Newest: true}, want: []int64{4, 5}},
		{name: "nothing matches", q: Query{Applications: []string{"nope"}}},
		{name: "a swarm selects", q: Query{Swarms: []string{"prod"}}, want: []int64{1}},
		{name: "the empty swarm is the local one", q: Query{Swarms: []string{""}}, want: []int64{2, 3, 4, 5}},
		{name: "an empty list of swarms selects none", q: Query{Swarms: []string{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Events(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, ids(got)); d != "" {
				t.Errorf("ids (-want +got):\n%s", d)
			}
		})
	}
	got, err := s.Events(ctx, Query{})
	if err != nil {
		t.Fatal(err)
	}
	var want []notify.Record
	for i, e := range all {
		e.At = t0.Add(time.Duration(i) * time.Second)
		want = append(want, notify.Record{ID: int64(i + 1), Event: e})
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("stored fields changed (-want +got):\n%s", d)
	}
}

func TestHistoryFollowsSyncEvents(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name   string
		events []notify.Event
		want   []Sync
	}{
		{
			name: "started then succeeded is one finished sync with plan summary and result",
			events: []notify.Event{
				{Application: "web", Type: notify.SyncStarted, Revision: "abc", Message: "upgrade: 1 changed", Actor: "alice", Swarm: "prod", At: at(0)},
				{Application: "web", Type: notify.ResourcesPruned, Message: "service web_old", Actor: "alice", At: at(1)},
				{Application: "web", Type: notify.SyncSucceeded, Revision: "abc", Message: "1 updated", Actor: "alice", At: at(2)},
			},
			want: []Sync{{ID: 1, Application: "web", Swarm: "prod", Revision: "abc", Actor: "alice", Started: at(0), Finished: at(2),
				Outcome: Succeeded, Summary: "upgrade: 1 changed", Result: "1 updated"}},
		},
		{
			name: "started then failed keeps the error",
			events: []notify.Event{
				{Application: "web", Type: notify.SyncStarted, Revision: "abc", Message: "install", At: at(0)},
				{Application: "web", Type: notify.SyncFailed, Revision: "abc", Message: "image not found", At: at(3)},
			},
			want: []Sync{{ID: 1, Application: "web", Revision: "abc", Started: at(0), Finished: at(3), Outcome: Failed,
				Summary: "install", Error: "image not found"}},
		},
		{
			name:   "a failure with nothing started is a sync that ended where it began",
			events: []notify.Event{{Application: "web", Type: notify.SyncFailed, Revision: "bad", Message: "render: bad compose", At: at(5)}},
			want: []Sync{{ID: 1, Application: "web", Revision: "bad", Started: at(5), Finished: at(5), Outcome: Failed,
				Error: "render: bad compose"}},
		},
		{
			name: "a start over an open sync interrupts it; newest first",
			events: []notify.Event{
				{Application: "web", Type: notify.SyncStarted, Revision: "a", At: at(0)},
				{Application: "web", Type: notify.SyncStarted, Revision: "b", At: at(10)},
			},
			want: []Sync{
				{ID: 2, Application: "web", Revision: "b", Started: at(10), Outcome: Running},
				{ID: 1, Application: "web", Revision: "a", Started: at(0), Finished: at(10), Outcome: Interrupted},
			},
		},
		{
			name: "applications keep separate histories",
			events: []notify.Event{
				{Application: "web", Type: notify.SyncStarted, At: at(0)},
				{Application: "api", Type: notify.SyncStarted, At: at(1)},
				{Application: "api", Type: notify.SyncSucceeded, At: at(2)},
			},
			want: []Sync{{ID: 1, Application: "web", Started: at(0), Outcome: Running}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			for _, e := range tc.events {
				if _, err := s.Append(t.Context(), e); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.History(t.Context(), "web", 0)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("History (-want +got):\n%s", d)
			}
		})
	}
}

func TestCloseRunningEndsWhatTheLastProcessLeftOpen(t *testing.T) {
	s := newStore(t)
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	for _, e := range []notify.Event{
		{Application: "web", Type: notify.SyncStarted, Revision: "a", At: at(0)},
		{Application: "web", Type: notify.SyncSucceeded, Revision: "a", At: at(1)},
		{Application: "web", Type: notify.SyncStarted, Revision: "b", At: at(2)},
		{Application: "api", Type: notify.SyncStarted, Revision: "c", At: at(3)},
	} {
		if _, err := s.Append(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.CloseRunning(t.Context(), at(60), "controller stopped")
	if err != nil || n != 2 {
		t.Fatalf("CloseRunning = %d, %v; want 2 closed", n, err)
	}
	web, err := s.History(t.Context(), "web", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Sync{
		{ID: 2, Application: "web", Revision: "b", Started: at(2), Finished: at(60), Outcome: Interrupted, Error: "controller stopped"},
		{ID: 1, Application: "web", Revision: "a", Started: at(0), Finished: at(1), Outcome: Succeeded},
	}
	if d := cmp.Diff(want, web); d != "" {
		t.Errorf("History after CloseRunning (-want +got):\n%s", d)
	}
	// A sync started afterwards is recorded as usual.
	if _, err := s.Append(t.Context(), notify.Event{Application: "web", Type: notify.SyncStarted, Revision: "d", At: at(61)}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.CloseRunning(t.Context(), at(62), "again"); err != nil || n != 1 {
		t.Errorf("second CloseRunning = %d, %v; want the one new running sync", n, err)
	}
}

func TestHistoryLimitKeepsTheNewest(t *testing.T) {
	s := newStore(t)
	for i := range 5 {
		if _, err := s.Append(t.Context(), ev("web", notify.SyncFailed, t0.Add(time.Duration(i)))); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.History(t.Context(), "web", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != 5 || got[1].ID != 4 {
		t.Errorf("History(limit 2) = %+v, want syncs 5 and 4", got)
	}
}

func TestUpgradeFromV1DerivesHistoryFromKeptEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db, err := sql.Open("sqlite", path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := migrate(ctx, db, migrations[:1]); err != nil {
		t.Fatal(err)
	}
	for i, e := range []notify.Event{
		{Application: "web", Type: notify.SyncStarted, Revision: "abc", Message: "plan", Actor: "alice"},
		{Application: "web", Type: notify.SyncSucceeded, Revision: "abc", Message: "done", Actor: "alice"},
		{Application: "web", Type: notify.DriftDetected},
	} {
		if _, err := db.ExecContext(ctx, "INSERT INTO events (application, type, revision, message, actor, at) VALUES (?, ?, ?, ?, ?, ?)",
			e.Application, string(e.Type), e.Revision, e.Message, e.Actor, t0.Add(time.Duration(i)*time.Second).UnixNano()); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := schemaVersion(ctx, db); err != nil || v != 1 {
		t.Fatalf("prepared schema v%d (%v), want v1", v, err)
	}
	db.Close()

	s := open(t, path, Options{})
	if v, err := s.Version(ctx); err != nil || v != SchemaVersion() {
		t.Errorf("Version after upgrade = %d, %v; want %d", v, err, SchemaVersion())
	}
	got, err := s.History(ctx, "web", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Sync{{ID: 1, Application: "web", Revision: "abc", Actor: "alice", Started: t0, Finished: t0.Add(time.Second),
		Outcome: Succeeded, Summary: "plan", Result: "done"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("history derived by the upgrade (-want +got):\n%s", d)
	}
	recs, err := s.Events(ctx, Query{})
	if err != nil || len(recs) != 3 {
		t.Errorf("events after upgrade: %d, %v; want the 3 kept", len(recs), err)
	}
	// Opening again runs no migration twice.
	s.Close()
	s = open(t, path, Options{})
	if got, _ := s.History(ctx, "web", 0); len(got) != 1 {
		t.Errorf("history after a second open has %d syncs, want 1", len(got))
	}
}

func TestPruneAppliesAgeAndCountLimits(t *testing.T) {
	now := t0.Add(100 * 24 * time.Hour)
	for _, tc := range []struct {
		name       string
		opts       Options
		wantEvents []int64
		wantSyncs  map[string]int
	}{
		{name: "age deletes old events and syncs", opts: Options{MaxAge: 50 * 24 * time.Hour, MaxEvents: -1, MaxSyncs: -1},
			wantEvents: []int64{5, 6, 7, 8}, wantSyncs: map[string]int{"web": 2, "api": 0}},
		{name: "count keeps the newest events and syncs per application", opts: Options{MaxAge: -1, MaxEvents: 3, MaxSyncs: 1},
			wantEvents: []int64{6, 7, 8}, wantSyncs: map[string]int{"web": 1, "api": 1}},
		{name: "negative limits keep everything", opts: Options{MaxAge: -1, MaxEvents: -1, MaxSyncs: -1},
			wantEvents: []int64{1, 2, 3, 4, 5, 6, 7, 8}, wantSyncs: map[string]int{"web": 4, "api": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Now = func() time.Time { return now }
			s := open(t, filepath.Join(t.TempDir(), FileName), tc.opts)
			old, recent := t0, now.Add(-time.Hour)
			for _, e := range []notify.Event{
				ev("web", notify.SyncFailed, old), ev("web", notify.SyncFailed, old), ev("api", notify.SyncFailed, old), ev("web", notify.DriftDetected, old),
				ev("web", notify.SyncFailed, recent), ev("web", notify.SyncStarted, recent), ev("web", notify.SyncSucceeded, recent), ev("web", notify.DriftDetected, recent),
			} {
				if _, err := s.Append(t.Context(), e); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Prune(t.Context()); err != nil {
				t.Fatal(err)
			}
			recs, err := s.Events(t.Context(), Query{})
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, r := range recs {
				ids = append(ids, r.ID)
			}
			if d := cmp.Diff(tc.wantEvents, ids); d != "" {
				t.Errorf("events kept (-want +got):\n%s", d)
			}
			for app, n := range tc.wantSyncs {
				h, err := s.History(t.Context(), app, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(h) != n {
					t.Errorf("%s keeps %d syncs, want %d", app, len(h), n)
				}
			}
		})
	}
}

func TestRunRetentionPrunesAndStopsWithItsContext(t *testing.T) {
	now := t0.Add(1000 * time.Hour)
	s := open(t, filepath.Join(t.TempDir(), FileName), Options{MaxAge: time.Hour, Now: func() time.Time { return now }})
	if _, err := s.Append(t.Context(), ev("web", notify.SyncStarted, t0)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.RunRetention(ctx, time.Hour) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, err := s.Events(t.Context(), Query{})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("RunRetention did not prune at start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("RunRetention = %v, want nil after cancel", err)
	}
}

func TestLastSucceededIsTheNewestSuccessOfEachApplication(t *testing.T) {
	s := newStore(t)
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	for _, e := range []notify.Event{
		{Application: "web", Type: notify.SyncStarted, Revision: "a", Actor: "alice", At: at(0)},
		{Application: "web", Type: notify.SyncSucceeded, Revision: "a", Actor: "alice", At: at(1)},
		{Application: "web", Type: notify.SyncStarted, Revision: "b", At: at(2)},
		{Application: "web", Type: notify.SyncSucceeded, Revision: "b", At: at(3)},
		// A later failure wrote nothing that lasted: b stays the last success.
		{Application: "web", Type: notify.SyncStarted, Revision: "c", Actor: "bob", At: at(4)},
		{Application: "web", Type: notify.SyncFailed, Revision: "c", Actor: "bob", At: at(5)},
		{Application: "api", Type: notify.SyncStarted, Revision: "d", Actor: "carol", At: at(6)},
		{Application: "api", Type: notify.SyncSucceeded, Revision: "d", Actor: "carol", At: at(7)},
		// Never succeeded: not listed.
		{Application: "db", Type: notify.SyncStarted, Revision: "e", At: at(8)},
	} {
		if _, err := s.Append(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.LastSucceeded(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []Sync{
		{ID: 4, Application: "api", Revision: "d", Actor: "carol", Started: at(6), Finished: at(7), Outcome: Succeeded},
		{ID: 2, Application: "web", Revision: "b", Started: at(2), Finished: at(3), Outcome: Succeeded},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("LastSucceeded (-want +got):\n%s", d)
	}
}

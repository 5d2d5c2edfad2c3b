package store

import (
	"crypto/sha256"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func session(cookie string, now time.Time) Session {
	return Session{ID: sha256.Sum256([]byte(cookie)), Issuer: "https://idp.example.test", Subject: "u1",
		Name: "oidc:https://idp.example.test#u1 (alice@example.test)", Email: "alice@example.test",
		Role: "deployer", Apps: []string{"web-*"}, Groups: []string{"web-team"}, CSRF: "csrf-1",
		Created: now, Refreshed: now, TokenExpires: now.Add(5 * time.Minute), Expires: now.Add(12 * time.Hour), Sealed: []byte{1, 2, 3}}
}

func TestSessionsRoundTripRefreshAndEnd(t *testing.T) {
	now := t0
	s := open(t, filepath.Join(t.TempDir(), FileName), Options{Now: func() time.Time { return now }})
	ctx := t.Context()
	alice := session("cookie-a", t0)
	if err := s.CreateSession(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSession(ctx, alice); err == nil {
		t.Error("a second session under the same id was stored")
	}
	refreshed := alice
	refreshed.Role, refreshed.Apps, refreshed.Groups = "viewer", nil, []string{"viewers"}
	refreshed.Refreshed, refreshed.TokenExpires, refreshed.Sealed = t0.Add(4*time.Minute), t0.Add(9*time.Minute), []byte{9}
	// A refresh must not move the session's end, nor its CSRF token.
	moved := refreshed
	moved.Expires, moved.CSRF = t0.Add(48*time.Hour), "other"

	for _, tc := range []struct {
		name    string
		at      time.Time
		change  func() error
		id      SessionID
		want    Session
		wantErr error
	}{
		{name: "a stored session reads back field for field", at: t0, id: alice.ID, want: alice},
		{name: "an unknown cookie names no session", at: t0, id: sha256.Sum256([]byte("cookie-b")), wantErr: ErrNoSession},
		{name: "a refresh replaces role, apps, groups and tokens but not the end or the CSRF token", at: t0.Add(4 * time.Minute),
			change: func() error { return s.UpdateSession(ctx, moved) }, id: alice.ID,
			want: func() Session {
				w := refreshed
				w.Apps = []string{}
				w.CSRF, w.Expires = alice.CSRF, alice.Expires
				return w
			}()},
		{name: "a session past its end is gone", at: alice.Expires, id: alice.ID, wantErr: ErrNoSession},
		{name: "a deleted session is gone", at: t0, change: func() error { return s.DeleteSession(ctx, alice.ID) }, id: alice.ID, wantErr: ErrNoSession},
		{name: "updating a deleted session says so", at: t0, change: func() error {
			if err := s.UpdateSession(ctx, refreshed); !errors.Is(err, ErrNoSession) {
				t.Errorf("UpdateSession of a deleted session = %v, want ErrNoSession", err)
			}
			return nil
		}, id: alice.ID, wantErr: ErrNoSession},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now = tc.at
			if tc.change != nil {
				if err := tc.change(); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.Session(ctx, tc.id)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Session error = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Session (-want +got):\n%s", d)
			}
		})
	}
}

func TestRetentionDeletesOnlyExpiredSessions(t *testing.T) {
	now := t0
	s := open(t, filepath.Join(t.TempDir(), FileName), Options{Now: func() time.Time { return now }})
	short, long := session("short", t0), session("long", t0)
	short.Expires = t0.Add(time.Hour)
	for _, sess := range []Session{short, long} {
		if err := s.CreateSession(t.Context(), sess); err != nil {
			t.Fatal(err)
		}
	}
	now = t0.Add(2 * time.Hour)
	p, err := s.Prune(t.Context())
	if err != nil || p.Sessions != 1 {
		t.Fatalf("Prune = %+v, %v; want one session deleted", p, err)
	}
	if _, err := s.Session(t.Context(), long.ID); err != nil {
		t.Errorf("the unexpired session was deleted: %v", err)
	}
	var rows int
	if err := s.db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM sessions").Scan(&rows); err != nil || rows != 1 {
		t.Errorf("%d session rows (%v), want 1", rows, err)
	}
}

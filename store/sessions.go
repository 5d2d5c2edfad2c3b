package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// SessionID names a sign-in session: the SHA-256 of the cookie the
// browser holds. The cookie's value itself is never stored, so a copy of
// the database signs nobody in.
type SessionID [sha256.Size]byte

// Session is one person signed in through the OpenID provider. The store
// keeps it and hands it back; what the fields mean is package identity's.
type Session struct {
	ID SessionID
	// Issuer and Subject are the provider's iss and sub; Name is the
	// actor that labels what the session does, Email the email claim.
	Issuer, Subject, Name, Email string
	// Role and Apps are what the session may do, as last mapped.
	Role string
	Apps []string
	// Groups are the provider's groups (or roles) as last read.
	Groups []string
	// CSRF is the token a state-changing request with the cookie carries.
	CSRF string
	// Created is the sign-in; Refreshed the last refresh at the provider.
	Created, Refreshed time.Time
	// TokenExpires is when the ID token the session rests on expires:
	// the session refreshes before it.
	TokenExpires time.Time
	// Expires ends the session whatever the provider says.
	Expires time.Time
	// Sealed holds the provider's tokens, encrypted by the caller; the
	// store never sees them in the clear.
	Sealed []byte
}

// ErrNoSession is returned (wrapped) by Session for an id the store does
// not hold, or one whose session has expired.
var ErrNoSession = errors.New("no such session")

// migrateSessions creates the sign-in sessions.
func migrateSessions(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `
CREATE TABLE sessions (
	id            BLOB    PRIMARY KEY, -- SHA-256 of the cookie
	issuer        TEXT    NOT NULL,
	subject       TEXT    NOT NULL,
	name          TEXT    NOT NULL,
	email         TEXT    NOT NULL DEFAULT '',
	role          TEXT    NOT NULL,
	apps          TEXT    NOT NULL DEFAULT '[]', -- JSON list
	groups_json   TEXT    NOT NULL DEFAULT '[]', -- JSON list
	csrf          TEXT    NOT NULL,
	created       INTEGER NOT NULL, -- Unix nanoseconds, as every time here
	refreshed     INTEGER NOT NULL,
	token_expires INTEGER NOT NULL,
	expires       INTEGER NOT NULL,
	sealed        BLOB
);
CREATE INDEX sessions_expires ON sessions (expires);
`)
	return err
}

// CreateSession stores a new session; an id already stored is an error.
func (s *Store) CreateSession(ctx context.Context, sess Session) error {
	apps, groups, err := sessionLists(sess)
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, issuer, subject, name, email, role, apps, groups_json, csrf,
			created, refreshed, token_expires, expires, sealed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sess.ID[:], sess.Issuer, sess.Subject, sess.Name, sess.Email, sess.Role, apps, groups, sess.CSRF,
			sess.Created.UnixNano(), sess.Refreshed.UnixNano(), sess.TokenExpires.UnixNano(), sess.Expires.UnixNano(), sess.Sealed)
		return err
	})
	if err != nil {
		return fmt.Errorf("create session of %s: %w", sess.Name, err)
	}
	return nil
}

// Session returns the session id names; an unknown or expired one is
// ErrNoSession.
func (s *Store) Session(ctx context.Context, id SessionID) (Session, error) {
	var sess Session
	var apps, groups string
	var created, refreshed, tokenExpires, expires int64
	err := s.db.QueryRowContext(ctx, `SELECT issuer, subject, name, email, role, apps, groups_json, csrf,
		created, refreshed, token_expires, expires, sealed FROM sessions WHERE id = ? AND expires > ?`, id[:], s.opts.Now().UnixNano()).
		Scan(&sess.Issuer, &sess.Subject, &sess.Name, &sess.Email, &sess.Role, &apps, &groups, &sess.CSRF,
			&created, &refreshed, &tokenExpires, &expires, &sess.Sealed)
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, ErrNoSession
	}
	if err != nil {
		return Session{}, fmt.Errorf("read session: %w", err)
	}
	if err := json.Unmarshal([]byte(apps), &sess.Apps); err != nil {
		return Session{}, fmt.Errorf("read session of %s: apps: %w", sess.Name, err)
	}
	if err := json.Unmarshal([]byte(groups), &sess.Groups); err != nil {
		return Session{}, fmt.Errorf("read session of %s: groups: %w", sess.Name, err)
	}
	sess.ID = id
	sess.Created, sess.Refreshed = time.Unix(0, created), time.Unix(0, refreshed)
	sess.TokenExpires, sess.Expires = time.Unix(0, tokenExpires), time.Unix(0, expires)
	return sess, nil
}

// UpdateSession replaces what a refresh changes: name, email, role,
// apps, groups, Refreshed, TokenExpires and Sealed. The rest, the
// session's end above all, stays. An unknown id is ErrNoSession.
func (s *Store) UpdateSession(ctx context.Context, sess Session) error {
	apps, groups, err := sessionLists(sess)
	if err != nil {
		return fmt.Errorf("update session: %w", err)
	}
	var n int64
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET name = ?, email = ?, role = ?, apps = ?, groups_json = ?,
			refreshed = ?, token_expires = ?, sealed = ? WHERE id = ?`,
			sess.Name, sess.Email, sess.Role, apps, groups, sess.Refreshed.UnixNano(), sess.TokenExpires.UnixNano(), sess.Sealed, sess.ID[:])
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("update session of %s: %w", sess.Name, err)
	}
	if n == 0 {
		return ErrNoSession
	}
	return nil
}

// DeleteSession ends a session; deleting one that is gone is no error.
func (s *Store) DeleteSession(ctx context.Context, id SessionID) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "DELETE FROM sessions WHERE id = ?", id[:])
		return err
	})
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// sessionLists encodes a session's lists for their columns; nil is [].
func sessionLists(sess Session) (apps, groups string, err error) {
	a, err := json.Marshal(nonNil(sess.Apps))
	if err != nil {
		return "", "", err
	}
	g, err := json.Marshal(nonNil(sess.Groups))
	if err != nil {
		return "", "", err
	}
	return string(a), string(g), nil
}

func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

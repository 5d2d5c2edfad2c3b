// Package lease elects one leader among the replicas of a controller
// through a lease kept in the swarm itself: a record whose every change is
// a compare-and-swap on its version (a Swarm config, whose labels can
// change without touching any task; see Config).
//
// The leader renews the lease every Retry; a standby takes it over once
// the record's version has not moved for Duration on the standby's own
// clock, which it starts when it first sees that version, so no two hosts'
// clocks are ever compared. A leader that cannot renew for RenewDeadline
// steps down, and Fence refuses every write once its last renewal was sent
// Duration-Margin ago, before any standby can have taken over. A leader
// that stops releases the lease, so a standby takes over at its next look.
//
// This package writes nothing but its own record, never decides what a
// leader does, and never trusts a timestamp written by another host.
// docs/operations.md#high-availability explains the timings.
package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Record is what the lease says: who holds it and how to reach them. The
// zero value is a lease nobody ever held.
type Record struct {
	// Holder tells the holding process apart from every other, restarts
	// included; "" is a released lease.
	Holder string
	// Name is the holder's replica name, Addr the host:port of its API
	// (what standbys forward to), Version its build's version: kept on
	// release, for the downgrade guard.
	Name    string
	Addr    string
	Version string
	// Term counts the lease's holders: every take-over raises it by one.
	Term int64
	// Events is the last event id the holder had kept when it wrote the
	// record: the next leader waits, briefly, until its copy of the
	// history reaches it.
	Events int64
	// Duration is the holder's Timings.Duration: a standby waits for the
	// longer of its own and this one.
	Duration time.Duration
	// Renewed is when the holder wrote the record, by its own clock: for
	// people reading the record; no decision reads it.
	Renewed time.Time
}

// Released reports whether nobody holds the lease.
func (r Record) Released() bool { return r.Holder == "" }

// Store keeps one lease record. Every method is safe for concurrent use;
// versions only grow, and any successful Create or Update moves the version.
type Store interface {
	// Get returns the record and its version; found is false when there is
	// no record yet.
	Get(ctx context.Context) (rec Record, version uint64, found bool, err error)
	// Create stores rec as the first record; an error wrapping
	// ErrConflict when one exists already.
	Create(ctx context.Context, rec Record) error
	// Update replaces the record when its version is still version, and
	// returns an error wrapping ErrConflict when it moved.
	Update(ctx context.Context, version uint64, rec Record) error
}

// ErrConflict is what a Store returns when the record changed since it
// was read (a compare-and-swap lost) or already exists.
var ErrConflict = errors.New("lease changed since it was read")

// ErrNotLeader is what Fence returns when this process does not hold the
// lease for the term asked about.
var ErrNotLeader = errors.New("this replica does not lead")

// ErrExpired is what Fence returns when this process held the lease but
// its last renewal is too old to write under.
var ErrExpired = errors.New("leader lease not renewed in time")

// Timings are the lease's durations. The zero value means every default:
// a killed or frozen leader is replaced within about Duration+2*Retry, a
// leader that stops cleanly within about Retry.
type Timings struct {
	// Duration is how long a lease lasts unrenewed: a standby takes over
	// once the record has not changed for Duration on its own clock.
	// Default 8s.
	Duration time.Duration
	// RenewDeadline is how long a leader goes on without a successful
	// renewal before it steps down. Default 5s.
	RenewDeadline time.Duration
	// Retry is how often the leader renews and a standby reads the
	// record. Default 1s.
	Retry time.Duration
	// Margin: a leader writes nothing once its last renewal was sent
	// Duration-Margin ago, time enough for a write checked just before
	// to reach the swarm. Default a quarter of Duration (2s).
	Margin time.Duration
}

// Defaults for Timings.
const (
	DefaultDuration      = 8 * time.Second
	DefaultRenewDeadline = 5 * time.Second
	DefaultRetry         = time.Second
)

// WithDefaults fills in every zero field.
func (t Timings) WithDefaults() Timings {
	if t.Duration <= 0 {
		t.Duration = DefaultDuration
	}
	if t.RenewDeadline <= 0 {
		t.RenewDeadline = DefaultRenewDeadline
	}
	if t.Retry <= 0 {
		t.Retry = DefaultRetry
	}
	if t.Margin <= 0 {
		t.Margin = t.Duration / 4
	}
	return t
}

// Validate checks that the timings keep one writer: Retry < RenewDeadline
// < Duration-Margin, Margin > 0. Apply WithDefaults first.
func (t Timings) Validate() error {
	var errs []error
	if t.Retry >= t.RenewDeadline {
		errs = append(errs, fmt.Errorf("retry %s must be shorter than the renew deadline %s", t.Retry, t.RenewDeadline))
	}
	if t.RenewDeadline >= t.Duration-t.Margin {
		errs = append(errs, fmt.Errorf("renew deadline %s must be shorter than the duration %s minus the margin %s", t.RenewDeadline, t.Duration, t.Margin))
	}
	if t.Margin <= 0 || t.Margin >= t.Duration {
		errs = append(errs, fmt.Errorf("margin %s must be above zero and below the duration %s", t.Margin, t.Duration))
	}
	return errors.Join(errs...)
}

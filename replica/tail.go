package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/skep-cd/skep/client"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/wire"
)

// Headers a standby sends with its copy of the leader's events, so that
// the leader can list it (only under the replicas' own token).
const (
	HeaderReplica        = "X-Skep-Replica"
	HeaderReplicaAddr    = "X-Skep-Replica-Addr"
	HeaderReplicaVersion = "X-Skep-Replica-Version"
)

// trail is one copy of a leader's events, running in its own goroutine.
type trail struct {
	addr   string
	cancel context.CancelFunc
	done   chan struct{}
}

// stop ends the copy and waits for it; a nil trail does nothing.
func (t *trail) stop() {
	if t == nil {
		return
	}
	t.cancel()
	<-t.done
}

// ended reports whether the copy returned on its own.
func (t *trail) ended() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// startTail copies the events of the replica at addr into the store and
// the broker until ctx ends or the trail is stopped.
func (r *Replica) startTail(ctx context.Context, addr string) *trail {
	ctx, cancel := context.WithCancel(ctx)
	t := &trail{addr: addr, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		r.copyFrom(ctx, addr)
	}()
	return t
}

// copyFrom follows the event stream of the replica at addr, resuming
// after the last id kept each time it connects, until ctx ends; a failed
// connection is tried again after a Retry.
func (r *Replica) copyFrom(ctx context.Context, addr string) {
	header := http.Header{}
	header.Set(HeaderReplica, r.self.Name)
	header.Set(HeaderReplicaAddr, r.self.Addr)
	header.Set(HeaderReplicaVersion, r.self.Version)
	c, err := client.New(client.Options{Server: r.opts.Peer.Scheme + "://" + addr, Token: r.opts.Peer.Token,
		HTTPClient: &http.Client{Transport: r.opts.Peer.Transport}, Header: header})
	if err != nil {
		r.log.Error("leader's events not copied", "leader", addr, "err", err)
		return
	}
	retry := r.opts.Elector.Timings().Retry
	failing := false
	for ctx.Err() == nil {
		last, err := r.opts.Store.LastID(ctx)
		if err == nil {
			err = c.Stream(ctx, client.EventQuery{}, strconv.FormatInt(last, 10), func(e client.StreamEvent) error {
				return r.keep(ctx, e, &last)
			})
		}
		if ctx.Err() != nil {
			return
		}
		// The leader restarting or going away ends the stream: normal in a
		// failover, worth a line once per streak.
		if !failing {
			r.log.Info("leader's event stream ended; following again", "leader", addr, "err", err)
		}
		failing = true
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}

// keep stores one copied event and publishes it to this replica's own
// subscribers; last is the highest id kept, and an event at or below it
// (the leader replaying what this replica has) is skipped.
func (r *Replica) keep(ctx context.Context, e client.StreamEvent, last *int64) error {
	id, err := strconv.ParseInt(e.ID, 10, 64)
	if err != nil {
		return fmt.Errorf("event id %q: %w", e.ID, err)
	}
	if id <= *last {
		return nil
	}
	var w wire.Event
	if err := json.Unmarshal(e.Data, &w); err != nil {
		return fmt.Errorf("event %d: %w", id, err)
	}
	rec := notify.RecordFromWire(id, w)
	if err := r.opts.Store.Insert(ctx, rec); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("keep event %d: %w", id, err)
	}
	*last = id
	if r.opts.Publish != nil {
		r.opts.Publish.Publish(rec)
	}
	return nil
}

// errNoLeader is what a standby answers while no replica holds the lease.
var errNoLeader = errors.New("no replica leads yet (a take-over is under way); retry in a second")

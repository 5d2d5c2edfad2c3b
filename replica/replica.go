// Package replica runs one replica of a replicated controller (`skep
// controller --leader-election`). The leader lease (package lease) decides
// which replica reconciles; this package does the rest.
//
// While it leads, a replica runs the controller of its term
// (Options.Lead), and its events carry the term and ids above every
// earlier leader's (notify.Recorder.BeginTerm). While it stands by, it
// follows the leader's event stream into its own store and broker, so its
// history has no hole and an event stream reconnected to it misses
// nothing; when it takes over, it first lets that copy reach the last
// event its predecessor kept. Front answers on a standby what the replica
// holds itself (health, metrics, the UI's files, the event stream and
// list) and forwards the rest to the leader with the caller's own
// credential, so the leader authenticates and attributes every write.
//
// A replica never reconciles, writes to a swarm or raises an event while
// it stands by; never forwards a request twice; and opens no port of its
// own: replicas reach each other through the API they serve, each request
// authenticated by the credential it carries.
package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/skep-cd/skep/lease"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/wire"
)

// Store is the replica's event store: the standby copies the leader's
// events into it; *store.Store implements it.
type Store interface {
	// Insert keeps rec under rec.ID, which must be above LastID.
	Insert(ctx context.Context, rec notify.Record) error
	// LastID is the highest id kept.
	LastID(ctx context.Context) (int64, error)
}

// Recorder numbers and keeps the events the leader raises;
// *notify.Recorder implements it.
type Recorder interface {
	BeginTerm(term, floor int64)
	Flush(ctx context.Context) error
	Recorded() int64
}

// Peer is how replicas reach each other's API.
type Peer struct {
	// Scheme is "https" when the API serves TLS, "http" otherwise.
	Scheme string
	// Transport dials the other replicas, TLS settings included; nil is
	// a clone of http.DefaultTransport.
	Transport http.RoundTripper
	// Token is the replicas' shared token. The leader's API accepts it as
	// a viewer named PeerName: a standby follows the leader's events with
	// it, and the leader lists the standbys that do.
	Token wire.Token
}

// PeerName is the subject name of Peer.Token in the API's tokens.
const PeerName = "skep-replica"

// Options wire a Replica. Elector, Lead and Recorder are required; the
// zero value of every other field means its default or none.
type Options struct {
	Elector *lease.Elector
	// Lead runs the controller of term t until ctx ends, then returns;
	// an error it returns earlier (the swarm unreachable at start) is
	// logged, and the lease is given up for a while (see lease.Elector.Run).
	Lead     func(ctx context.Context, t lease.Term) error
	Recorder Recorder
	// Store and Publish receive the leader's events on a standby (the
	// store, the broker); without a store, a standby copies nothing.
	Store   Store
	Publish notify.Publisher
	Peer    Peer
	// Handover bounds how long a new leader waits for its copy of the
	// history to reach the last event its predecessor kept. Default 2s.
	Handover time.Duration
	Logger   *slog.Logger
}

// Replica is one replica of a replicated controller. Build it with New;
// Run must be called once. Its methods are safe for concurrent use.
type Replica struct {
	opts  Options
	self  lease.Candidate
	log   *slog.Logger
	peers followers // the standbys following this replica's events

	mu     sync.Mutex
	paused bool   // the replica leads: nothing is copied
	tail   *trail // the copy running, nil when none
}

// New checks opts and returns a Replica that does nothing until Run.
func New(opts Options) (*Replica, error) {
	switch {
	case opts.Elector == nil:
		return nil, errors.New("replica: no elector")
	case opts.Lead == nil:
		return nil, errors.New("replica: nothing to lead")
	case opts.Recorder == nil:
		return nil, errors.New("replica: no recorder")
	}
	if opts.Handover <= 0 {
		opts.Handover = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Peer.Scheme == "" {
		opts.Peer.Scheme = "http"
	}
	if opts.Peer.Transport == nil {
		opts.Peer.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	return &Replica{opts: opts, self: opts.Elector.Self(), log: opts.Logger, peers: followers{m: map[*follower]struct{}{}}}, nil
}

// Run campaigns for the lease, leads while it holds it and follows the
// leader otherwise, until ctx ends. When it leads as ctx ends, it returns
// once its term drained and the lease was released.
func (r *Replica) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { r.follow(ctx) })
	err := r.opts.Elector.Run(ctx, r.lead)
	wg.Wait()
	return err
}

// lead runs one term: the copy of the history catches up with the
// predecessor's last event and stops, the recorder starts the term's ids
// above everything kept, the controller runs, and what it raised is kept
// before the lease is given up.
func (r *Replica) lead(ctx context.Context, t lease.Term) {
	r.pause(ctx, t.Previous.Events)
	defer r.resume()
	var floor int64
	if r.opts.Store != nil {
		var err error
		if floor, err = r.opts.Store.LastID(ctx); err != nil {
			r.log.Warn("store last id unreadable at take-over; event ids continue above the clock", "err", err)
		}
	}
	r.opts.Recorder.BeginTerm(t.Number, floor)
	r.log.Info("leading", "term", t.Number, "previous", t.Previous.Name, "previous_term", t.Previous.Term, "last_event", floor)
	if err := r.opts.Lead(ctx, t); err != nil && ctx.Err() == nil {
		r.log.Error("leader term ended", "term", t.Number, "err", err)
	}
	flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.opts.Recorder.Flush(flush); err != nil {
		r.log.Warn("events of the term not all kept before the hand-over", "term", t.Number, "err", err)
	}
	r.log.Info("term over", "term", t.Number, "last_event", r.opts.Recorder.Recorded())
}

// pause waits, within Handover, until the copied history holds event
// want (the predecessor's last), then stops the copy for the term.
func (r *Replica) pause(ctx context.Context, want int64) {
	if want > 0 && r.opts.Store != nil {
		deadline := time.NewTimer(r.opts.Handover)
		defer deadline.Stop()
		poll := time.NewTicker(20 * time.Millisecond)
		defer poll.Stop()
		for caught := false; !caught; {
			if last, err := r.opts.Store.LastID(ctx); err == nil && last >= want {
				break
			}
			select {
			case <-poll.C:
			case <-deadline.C:
				r.log.Warn("history not caught up with the last leader's at take-over", "want", want)
				caught = true
			case <-ctx.Done():
				caught = true
			}
		}
	}
	r.mu.Lock()
	r.paused = true
	cur := r.tail
	r.tail = nil
	r.mu.Unlock()
	cur.stop()
}

// resume lets the copy run again once the term is over.
func (r *Replica) resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paused = false
}

// follow keeps one copy of the leader's events running while this
// replica stands by, pointed at the leader the lease names, until ctx
// ends.
func (r *Replica) follow(ctx context.Context) {
	tick := time.NewTicker(r.opts.Elector.Timings().Retry)
	defer tick.Stop()
	for {
		r.steer(ctx)
		select {
		case <-ctx.Done():
			r.mu.Lock()
			cur := r.tail
			r.tail = nil
			r.mu.Unlock()
			cur.stop()
			return
		case <-r.opts.Elector.Changes():
		case <-tick.C:
		}
	}
}

// steer starts, moves or stops the copy as the lease says: a standby
// copies from the replica the lease names (a released lease keeps its
// last holder's address, whose stream still carries its last events).
func (r *Replica) steer(ctx context.Context) {
	obs := r.opts.Elector.Observed()
	want := ""
	if !obs.Leading && obs.Leader.Addr != "" && obs.Leader.Addr != r.self.Addr && r.opts.Store != nil {
		want = obs.Leader.Addr
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paused {
		return
	}
	if r.tail != nil && (r.tail.addr != want || r.tail.ended()) {
		r.tail.stop()
		r.tail = nil
	}
	if r.tail == nil && want != "" {
		r.tail = r.startTail(ctx, want)
	}
}

// Status is the replication part of the status route: what this replica
// knows of the lease, and the replicas it knows of.
func (r *Replica) Status() *wire.Replication {
	obs := r.opts.Elector.Observed()
	role := wire.RoleStandby
	if obs.Leading {
		role = wire.RoleLeader
	}
	out := &wire.Replication{Replica: r.self.Name, Role: role, Term: obs.Term, Error: obs.Err,
		Replicas: []wire.Replica{{Name: r.self.Name, Role: role, Addr: r.self.Addr, Version: r.self.Version}}}
	if l := obs.Leader; !l.Released() {
		out.Leader = &wire.Replica{Name: l.Name, Role: wire.RoleLeader, Addr: l.Addr, Version: l.Version}
	}
	if obs.Leading {
		out.Replicas = append(out.Replicas, r.peers.list()...)
	}
	return out
}

// Ready is the readiness of a standby: the lease was read at the last
// look, so the replica knows whom to forward to.
func (r *Replica) Ready() error {
	obs := r.opts.Elector.Observed()
	switch {
	case !obs.Known:
		return errors.New("leader lease not read yet")
	case obs.Err != "":
		return fmt.Errorf("leader lease unreadable: %s", obs.Err)
	}
	return nil
}

// Leading reports whether this replica holds the lease.
func (r *Replica) Leading() bool { return r.opts.Elector.Observed().Leading }

// Fenced returns n gated by fence: events raised while fence refuses (a
// replica whose lease is no longer valid) are dropped, since only the
// leader raises events.
func Fenced(n notify.Notifier, fence func() error) notify.Notifier {
	return fenced{n: n, fence: fence}
}

type fenced struct {
	n     notify.Notifier
	fence func() error
}

// Notify implements notify.Notifier.
func (f fenced) Notify(ctx context.Context, e notify.Event) {
	if f.fence() == nil {
		f.n.Notify(ctx, e)
	}
}

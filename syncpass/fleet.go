package syncpass

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/prune"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// view is one look at the live swarm: a snapshot, and whether it shows
// every write of the application it was taken for. The zero value is no
// look at all (no live snapshot).
type view struct {
	snap swarm.Snapshot
	has  bool // the destination has a live snapshot
	seen bool // snap shows every write of the application
}

// readable reports whether v can stand in for the Engine: there is a
// snapshot, its last read succeeded, and it shows the application's writes.
func (v view) readable() bool { return v.has && !v.snap.ReadFailed() && v.seen }

// first is the pass's look before any write: Input.Live.
func (in Input) first(env Env) view {
	return view{snap: in.Live, has: env.Live != nil, seen: in.SeenWrites}
}

// look takes a fresh view for app, for the reads after a write.
func (env Env) look(app string) view {
	if env.Live == nil {
		return view{}
	}
	snap := env.Live.Current()
	return view{snap: snap, has: true, seen: env.seenWrites(app, snap.TakenAt(), false)}
}

// seenWrites reports whether a snapshot taken at taken shows every write
// of app (ended: every write that ended); a snapshot never taken shows none.
func (env Env) seenWrites(app string, taken time.Time, ended bool) bool {
	if taken.IsZero() {
		return false
	}
	return env.Fleet.SeenWrites == nil || env.Fleet.SeenWrites(app, taken, ended)
}

// beginWrite records a write of app starting; call the func it returns
// once, when nothing more is written.
func (env Env) beginWrite(app string) (end func()) {
	if env.Fleet.BeginWrite == nil {
		return func() {}
	}
	return env.Fleet.BeginWrite(app)
}

// newer is Fleet.Newer for app, nil (a channel never closed) when the
// loop does not tell.
func (env Env) newer(app string) <-chan struct{} {
	if env.Fleet.Newer == nil {
		return nil
	}
	return env.Fleet.Newer(app)
}

// applying tells the loop app's first write starts.
func (env Env) applying(app string) {
	if env.Fleet.Applying != nil {
		env.Fleet.Applying(app)
	}
}

// remember hands rel to the loop, for health.
func (env Env) remember(app appset.Application, rel stack.Release) {
	if env.Fleet.Remember != nil {
		env.Fleet.Remember(app, rel)
	}
}

// movedFrom asks the loop where else app's release was recorded.
func (env Env) movedFrom(app appset.Application) string {
	if env.Fleet.MovedFrom == nil {
		return ""
	}
	return env.Fleet.MovedFrom(app)
}

// gates are prune's gates for release of app; none known holds nothing.
func (env Env) gates(app, release string) prune.Gates {
	if env.Fleet.Gates == nil {
		return prune.Gates{}
	}
	return env.Fleet.Gates(app, release)
}

// appNames lists the running app set's applications.
func (env Env) appNames() []string {
	if env.Fleet.AppNames == nil {
		return nil
	}
	return env.Fleet.AppNames()
}

// pruneRelease asks the loop to delete owner's whole release.
func (env Env) pruneRelease(ctx context.Context, owner stack.Owner, snap swarm.Snapshot, why string) {
	if env.Fleet.PruneRelease != nil {
		env.Fleet.PruneRelease(ctx, owner, snap, why)
	}
}

// ErrFenced is what a write fails with when the loop's Fence refuses it:
// this replica of a replicated controller does not hold a valid leader
// lease. It is transient: the next leader writes what this one did not.
var ErrFenced = errors.New("write refused: this replica does not hold a valid leader lease")

// fence asks the loop whether the pass may write now.
func (env Env) fence() error {
	if env.Fleet.Fence == nil {
		return nil
	}
	if err := env.Fleet.Fence(); err != nil {
		return Fenced(err)
	}
	return nil
}

// Fenced is the error of a write the fence refused for why: ErrFenced,
// classed transient.
func Fenced(why error) error {
	return &outcome.TransientError{Err: fmt.Errorf("%w: %w", ErrFenced, why)}
}

// owner is the ownership of app's release by this controller here.
func (env Env) owner(app appset.Application) stack.Owner {
	return stack.Owner{Controller: env.Owner, Application: app.Name, Release: app.Release}
}

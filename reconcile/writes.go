package reconcile

import (
	"context"

	"github.com/docker/docker/api/types/network"
	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/syncpass"
)

// DefaultParallelWrites is how many writes the controller has in flight
// on one swarm when Options.ParallelWrites is zero.
const DefaultParallelWrites = 8

// limitedEngine is an Engine whose writes wait for one of a few slots of
// their swarm. A manager commits writes one at a time through its raft
// log: when a thousand applications deployed at once (a first start on a
// large app set), it timed half their requests out ("context deadline
// exceeded"), and every failed apply was rendered and sent again. Reads
// go straight through. Each write, once it has its slot, asks the fence
// (Options.Fence) right before it is sent: the lease of a replicated
// controller is checked as close to the write as the process can, so one
// that was frozen while it waited for a slot writes nothing.
type limitedEngine struct {
	Engine
	slots chan struct{}
	fence func() error
}

// limitWrites returns e with at most n writes in flight, each asking
// fence first (nil asks nothing); a nil e stays nil (a destination
// without a client).
func limitWrites(e Engine, n int, fence func() error) Engine {
	if e == nil {
		return nil
	}
	if n <= 0 {
		n = DefaultParallelWrites
	}
	return &limitedEngine{Engine: e, slots: make(chan struct{}, n), fence: fence}
}

// acquire takes a slot, or gives up with ctx.
func (l *limitedEngine) acquire(ctx context.Context) error {
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (l *limitedEngine) release() { <-l.slots }

// write runs f, which returns a value too, in a slot.
func write[T any](ctx context.Context, l *limitedEngine, f func() (T, error)) (T, error) {
	var out T
	err := l.done(ctx, func() (err error) {
		out, err = f()
		return err
	})
	return out, err
}

// done runs f, which returns only an error, in a slot.
func (l *limitedEngine) done(ctx context.Context, f func() error) error {
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.release()
	if l.fence != nil {
		if err := l.fence(); err != nil {
			return syncpass.Fenced(err)
		}
	}
	return f()
}

func (l *limitedEngine) ServiceCreate(ctx context.Context, spec dswarm.ServiceSpec, o dswarm.ServiceCreateOptions) (dswarm.ServiceCreateResponse, error) {
	return write(ctx, l, func() (dswarm.ServiceCreateResponse, error) { return l.Engine.ServiceCreate(ctx, spec, o) })
}

func (l *limitedEngine) ServiceUpdate(ctx context.Context, id string, v dswarm.Version, spec dswarm.ServiceSpec, o dswarm.ServiceUpdateOptions) (dswarm.ServiceUpdateResponse, error) {
	return write(ctx, l, func() (dswarm.ServiceUpdateResponse, error) { return l.Engine.ServiceUpdate(ctx, id, v, spec, o) })
}

func (l *limitedEngine) ServiceRemove(ctx context.Context, id string) error {
	return l.done(ctx, func() error { return l.Engine.ServiceRemove(ctx, id) })
}

func (l *limitedEngine) ConfigCreate(ctx context.Context, spec dswarm.ConfigSpec) (dswarm.ConfigCreateResponse, error) {
	return write(ctx, l, func() (dswarm.ConfigCreateResponse, error) { return l.Engine.ConfigCreate(ctx, spec) })
}

func (l *limitedEngine) ConfigUpdate(ctx context.Context, id string, v dswarm.Version, spec dswarm.ConfigSpec) error {
	return l.done(ctx, func() error { return l.Engine.ConfigUpdate(ctx, id, v, spec) })
}

func (l *limitedEngine) ConfigRemove(ctx context.Context, id string) error {
	return l.done(ctx, func() error { return l.Engine.ConfigRemove(ctx, id) })
}

func (l *limitedEngine) SecretCreate(ctx context.Context, spec dswarm.SecretSpec) (dswarm.SecretCreateResponse, error) {
	return write(ctx, l, func() (dswarm.SecretCreateResponse, error) { return l.Engine.SecretCreate(ctx, spec) })
}

func (l *limitedEngine) SecretUpdate(ctx context.Context, id string, v dswarm.Version, spec dswarm.SecretSpec) error {
	return l.done(ctx, func() error { return l.Engine.SecretUpdate(ctx, id, v, spec) })
}

func (l *limitedEngine) SecretRemove(ctx context.Context, id string) error {
	return l.done(ctx, func() error { return l.Engine.SecretRemove(ctx, id) })
}

func (l *limitedEngine) NetworkCreate(ctx context.Context, name string, o network.CreateOptions) (network.CreateResponse, error) {
	return write(ctx, l, func() (network.CreateResponse, error) { return l.Engine.NetworkCreate(ctx, name, o) })
}

func (l *limitedEngine) NetworkRemove(ctx context.Context, id string) error {
	return l.done(ctx, func() error { return l.Engine.NetworkRemove(ctx, id) })
}

func (l *limitedEngine) VolumeRemove(ctx context.Context, id string, force bool) error {
	return l.done(ctx, func() error { return l.Engine.VolumeRemove(ctx, id, force) })
}

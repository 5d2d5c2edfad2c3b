package syncpass

import (
	"context"
	"fmt"
	"maps"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/stack"
)

// selfIn is apply's view of the controller's own service for rel: set
// only for the self application's release on the local swarm, when rel
// declares the service (a correction may leave it out).
func selfIn(env Env, app appset.Application, rel stack.Release) apply.SelfService {
	if !app.Self || app.Destination.Swarm != "" || env.Self.ServiceID == "" {
		return apply.SelfService{}
	}
	if _, ok := rel.Services[env.Self.ServiceName]; !ok {
		return apply.SelfService{}
	}
	return apply.SelfService{ID: env.Self.ServiceID, Name: env.Self.ServiceName}
}

// writeSelf announces the write of the controller's own service with
// self-update-issued, then makes it. Whatever the process does after this
// may be cut short: Swarm stops it to start the new controller, which
// carries on from the revision recorded before the write.
func writeSelf(ctx context.Context, env Env, app appset.Application, commit string, w *apply.SelfWrite) (apply.Change, error) {
	emit(ctx, env, app, notify.SelfUpdateIssued, commit, fmt.Sprintf("service %s: %s → %s; the new controller takes over from the swarm's records", w.Name, w.From, w.To))
	ch, err := w.Write(ctx)
	if err != nil {
		return ch, transientUnlessStalled(fmt.Errorf("update the controller's own service %s at %s: %w", w.Name, gitsource.ShortCommit(commit), err))
	}
	return ch, nil
}

// withoutService returns rel without the service w will write, or rel
// itself when w is nil.
func withoutService(rel stack.Release, w *apply.SelfWrite) stack.Release {
	if w == nil {
		return rel
	}
	out := rel
	out.Services = maps.Clone(rel.Services)
	delete(out.Services, w.Name)
	return out
}

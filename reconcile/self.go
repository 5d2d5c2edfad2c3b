package reconcile

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
)

// checkSelf refuses to deploy the app set's self application unless this
// controller runs as a swarm service that the rendered release declares:
// deploying a controller beside an unmanaged one would make two, and a
// release without the controller's service would prune it. Both are
// stalled: the commit or the controller's deployment must change.
func (c *Controller) checkSelf(app appset.Application, rel stack.Release, commit string) error {
	if !app.Self {
		return nil
	}
	at := gitsource.ShortCommit(commit)
	if c.self.ServiceID == "" {
		return &outcome.StalledError{Err: fmt.Errorf("self application %s at %s: this controller runs as no swarm service (no task container of its own was found), so it cannot deploy itself; run it as a service of release %s, or drop self", app.Name, at, app.Release)}
	}
	if _, ok := rel.Services[c.self.ServiceName]; !ok {
		return &outcome.StalledError{Err: fmt.Errorf("self application %s at %s: this controller runs as service %s, which release %s does not declare (it declares %s); a self release must keep the controller's own service",
			app.Name, at, c.self.ServiceName, app.Release, strings.Join(slices.Sorted(maps.Keys(rel.Services)), ", "))}
	}
	return nil
}

// selfIn is apply's view of the controller's own service for rel: set
// only for the self application's release on the local swarm, when rel
// declares the service (a correction may leave it out).
func (c *Controller) selfIn(app appset.Application, rel stack.Release) apply.SelfService {
	if !app.Self || app.Destination.Swarm != "" || c.self.ServiceID == "" {
		return apply.SelfService{}
	}
	if _, ok := rel.Services[c.self.ServiceName]; !ok {
		return apply.SelfService{}
	}
	return apply.SelfService{ID: c.self.ServiceID, Name: c.self.ServiceName}
}

// writeSelf announces the write of the controller's own service with
// self-update-issued, then makes it. Whatever the process does after this
// may be cut short: Swarm stops it to start the new controller, which
// carries on from the revision recorded before the write.
func (c *Controller) writeSelf(ctx context.Context, app appset.Application, commit string, w *apply.SelfWrite) (apply.Change, error) {
	c.emit(ctx, app, notify.SelfUpdateIssued, commit, fmt.Sprintf("service %s: %s → %s; the new controller takes over from the swarm's records", w.Name, w.From, w.To))
	ch, err := w.Write(ctx)
	if err != nil {
		err = fmt.Errorf("update the controller's own service %s at %s: %w", w.Name, gitsource.ShortCommit(commit), err)
		if outcome.Of(err) != outcome.Stalled {
			err = &outcome.TransientError{Err: err}
		}
		return ch, err
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

package syncpass

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/prune"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// settle is what follows a release that is where git wants it: what it
// stopped declaring is pruned, and its previews are kept at their
// branches. It reads the swarm afresh: a write may have come before it.
func settle(ctx context.Context, env Env, in Input, d desired) Found {
	var found Found
	found.Unmanaged = pruneResources(ctx, env, in, d)
	if !in.Ask.Release {
		found.Previews = reconcilePreviews(ctx, env, in, d)
	}
	return found
}

// pruneResources deletes what a still-declared release stopped declaring
// and this controller provably created (syncPolicy.pruneResources, or a
// sync that asked for prune), and returns what sits in the release's
// namespace without this application's proof of ownership; nil when it
// did not look.
func pruneResources(ctx context.Context, env Env, in Input, d desired) *[]string {
	app := in.App
	enabled := app.SyncPolicy.PruneResources
	if in.Ask.Prune != nil {
		enabled = *in.Ask.Prune
	}
	if !enabled || env.Live == nil {
		return nil
	}
	// Unlike a whole release's (Fleet.ReleaseGates), this prune may read a
	// snapshot behind the application's own write: what it misses is
	// declared, and the records stay.
	if err := prune.Allowed(env.gates(app.Name, app.Release)); err != nil {
		env.Log.Warn("prune held", "app", app.Name, "release", app.Release, "err", err)
		return nil
	}
	owner := env.owner(app)
	v := env.look(app.Name)
	revs, err := apply.Revisions(ctx, revisionSource(env, v), owner)
	if err != nil {
		env.Log.Warn("prune skipped: revisions unreadable", "app", app.Name, "err", err)
		return nil
	}
	p := prune.Orphans(prune.Input{
		Owner: owner, Declared: d.release, Live: LiveObjects(v.snap), Recorded: Records(revs),
		Applications: env.appNames(), OwnStack: env.OwnStack, PruneVolumes: app.SyncPolicy.PruneVolumes,
	})
	unmanaged := Unmanaged(p)
	Prune(ctx, env, app.Name, d.commit, p, "")
	return &unmanaged
}

// restamp moves objects of app's release that a renamed application left
// behind to app, in place, before anything is written. A failure is
// logged: what was not moved is left as it is, and the write goes on.
func restamp(ctx context.Context, env Env, app appset.Application, snap swarm.Snapshot) {
	p := prune.Orphans(prune.Input{Owner: env.owner(app), Live: LiveObjects(snap), Applications: env.appNames(),
		Declared: stack.Release{Name: app.Release}, OwnStack: env.OwnStack})
	// Networks and volumes cannot be re-labelled; apply accepts them as the
	// release's own (see apply's network check), so only the rest moves.
	p.Items = slices.DeleteFunc(p.Items, func(it prune.Item) bool {
		return it.Object.Kind == prune.KindNetwork || it.Object.Kind == prune.KindVolume
	})
	if len(p.Select(prune.Restamp)) == 0 {
		return
	}
	res := prune.Relabel(ctx, env.Engine, p)
	if err := res.Err(); err != nil {
		env.Log.Warn("restamp incomplete", "app", app.Name, "release", app.Release, "err", err)
	}
}

// Prune deletes what p proves orphaned on env's swarm, on behalf of app at
// commit, and raises resources-pruned or prune-failed (why, when not "",
// says what made the release go). The controller's own service is never
// deleted. A failed deletion is retried on the next pass.
func Prune(ctx context.Context, env Env, app, commit string, p prune.Plan, why string) prune.Result {
	if len(p.Deletions()) == 0 {
		return prune.Result{}
	}
	defer env.beginWrite(app)()
	if env.Swarm == swarm.Local && env.Self.ServiceID != "" {
		p = p.Protect(prune.KindService, env.Self.ServiceID, "the controller's own service is never pruned")
	}
	res := prune.Execute(ctx, env.Engine, p)
	if len(res.Gone) > 0 {
		// Only what this prune deleted is told: a second prune on a snapshot
		// that still shows the first one's deletions finds them gone.
		env.Log.Debug("prune found objects gone already", "app", app, "objects", describeObjects(res.Gone))
	}
	ev := notify.Event{Application: app, Revision: commit, Swarm: env.Swarm, Actor: notify.ActorFrom(ctx), At: env.Now()}
	if len(res.Deleted) > 0 {
		ev.Type, ev.Message = notify.ResourcesPruned, "deleted "+describeObjects(res.Deleted)
		if why != "" {
			ev.Message = why + ": " + ev.Message
		}
		env.Notifier.Dispatch(ctx, ev)
	}
	if err := res.Err(); err != nil {
		ev.Type, ev.Message = notify.PruneFailed, err.Error()
		env.Notifier.Dispatch(ctx, ev)
	}
	return res
}

// Unmanaged names what p found in its release's namespace without the
// application's proof of ownership, as the status lists it.
func Unmanaged(p prune.Plan) []string {
	var out []string
	for _, it := range p.Select(prune.Unmanaged) {
		out = append(out, fmt.Sprintf("%s %s (%s)", it.Object.Kind, it.Object.Name, it.Reason))
	}
	return out
}

// RecordedOwners lists the (application, release) pairs the controller
// label owner has recorded revisions for in snap.
func RecordedOwners(owner string, snap swarm.Snapshot) []stack.Owner {
	seen := map[stack.Owner]bool{}
	var out []stack.Owner
	for _, cfg := range snap.Configs() {
		l := cfg.Spec.Labels
		if l[stack.LabelKind] == "" || l[stack.LabelController] != owner {
			continue
		}
		o := stack.Owner{Controller: owner, Application: l[stack.LabelApplication], Release: l[stack.LabelRelease]}
		if o.Application != "" && o.Release != "" && !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	return out
}

// Records turns recorded revisions into what prune proves ownership with.
func Records(revs []apply.Revision) []prune.Record {
	out := make([]prune.Record, 0, len(revs))
	for _, r := range revs {
		out = append(out, prune.Record{Application: r.Application, Release: r.Release})
	}
	return out
}

// LiveObjects lists the snapshot's objects for prune.
func LiveObjects(snap swarm.Snapshot) []prune.Object {
	return prune.LiveObjects(snap.Services(), snap.Networks(), snap.Configs(), snap.Secrets(), snap.Volumes())
}

// describeObjects names what a prune touched: "service web_api, config web_x".
func describeObjects(objs []prune.Object) string {
	parts := make([]string, 0, len(objs))
	for _, o := range objs {
		parts = append(parts, string(o.Kind)+" "+o.Name)
	}
	return strings.Join(parts, ", ")
}

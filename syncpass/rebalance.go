package syncpass

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/placement"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// This file holds the rebalance: once a drained or lost node is back,
// Swarm never moves a running task to it, so the services whose tasks sit
// unevenly are rolled (a forced update under their own update_config),
// one service at a time per swarm. It is a step of settle: it runs only
// for a release that is where git wants it, inside its sync windows, and
// never while a rollout of the release runs.

// settled is what follows a release that is where git wants it (settle),
// then the rebalance of its services.
func (out *Outcome) settled(ctx context.Context, env Env, in Input, d desired) {
	out.Found.merge(settle(ctx, env, in, d))
	out.rebalance(ctx, env, in, d)
}

// Rebalances reports whether app's services are rebalanced on env's
// swarm once a node is back: its rebalance key, else the controller's
// default (Env.Rebalance).
func Rebalances(env Env, app appset.Application) bool {
	if env.Rebalancing == nil || env.Live == nil {
		return false
	}
	if app.Rebalance != nil {
		return *app.Rebalance
	}
	return env.Rebalance
}

// rebalanceDue reports whether in.App is rebalanced and its last
// rebalance was not judged at the nodes in.Live shows (a node came back,
// or the release had not settled): its passes run in full, not quiet,
// until one judges it.
func rebalanceDue(env Env, in Input) bool {
	return Rebalances(env, in.App) && NodesKey(in.Live) != in.Memo.rebalanced
}

// NodesKey names the nodes of snap as a rebalance judges them: each
// one's id, state and availability. A node coming back changes it.
func NodesKey(snap swarm.Snapshot) string {
	var parts []string
	for _, n := range snap.Nodes() {
		parts = append(parts, n.ID+" "+string(n.Status.State)+" "+string(n.Spec.Availability))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// rebalance rolls the services of d's release whose tasks are skewed (see
// toRebalance), once per set of nodes (Memo.rebalanced): a service a roll
// cannot even out is not rolled again until a node changes. When another
// application's rebalance holds the swarm, what is left waits for the
// next pass. It raises tasks-rebalanced naming the nodes and the services.
func (out *Outcome) rebalance(ctx context.Context, env Env, in Input, d desired) {
	if !Rebalances(env, in.App) || windowAt(in).Held {
		return
	}
	v := env.look(in.App.Name)
	key := NodesKey(v.snap)
	if !v.readable() || key == out.Memo.rebalanced {
		return
	}
	skews, judged := toRebalance(d.release, v.snap)
	env.Log.Debug("rebalance judged", "app", in.App.Name, "settled", judged, "skewed", len(skews))
	if !judged {
		return // the next pass judges once the release settled
	}
	var rolled []placement.Skew
	done := true
	for _, sk := range skews {
		took, err := rollService(ctx, env, in.App, d.release, sk.Service)
		if !took {
			done = false
			break
		}
		if err != nil {
			env.Log.Warn("rebalance failed", "app", in.App.Name, "service", sk.Service, "err", err)
			break
		}
		rolled = append(rolled, sk)
	}
	if done {
		out.Memo.rebalanced = key
	}
	if len(rolled) > 0 {
		msg := rebalancedMessage(rolled)
		env.Log.Info("tasks rebalanced", "app", in.App.Name, "release", in.App.Release, "why", msg)
		emit(ctx, env, in.App, notify.TasksRebalanced, d.commit, msg)
	}
}

// toRebalance returns the services of rel whose running tasks sit
// unevenly on their eligible nodes in snap (placement.Skewed), and whether
// snap can tell: a release not yet healthy and converged, or under a
// rollout, is judged later. It is pure.
func toRebalance(rel stack.Release, snap swarm.Snapshot) ([]placement.Skew, bool) {
	if snap.ReadFailed() || Rollout(rel, snap) != "" || Converged(rel, snap) != "" || Health(rel, snap).State != health.Healthy {
		return nil, false
	}
	live := map[string]dswarm.Service{}
	for name := range rel.Services {
		if s, ok := snap.Service(name); ok {
			live[name] = s
		}
	}
	return placement.Skewed(live, snap.Nodes(), snap.Tasks()), true
}

// rollService restarts the tasks of service name of app's release, when
// no other rebalance holds the swarm (took false: one does, nothing was
// done), and waits until the service rolled: the next service of the
// swarm rolls only then.
func rollService(ctx context.Context, env Env, app appset.Application, rel stack.Release, name string) (took bool, err error) {
	select {
	case env.Rebalancing <- struct{}{}:
	default:
		return false, nil
	}
	defer func() { <-env.Rebalancing }()
	// A replica that does not lead writes nothing (its Engine writes are
	// fenced too; this says so before the roll).
	if err := env.fence(); err != nil {
		return true, err
	}
	end := env.beginWrite(app.Name)
	err = apply.ForceUpdate(ctx, env.Engine, env.owner(app), name)
	written := env.Wall()
	end()
	if err != nil {
		return true, err
	}
	one := stack.Release{Name: rel.Name, Services: map[string]dswarm.ServiceSpec{name: rel.Services[name]}}
	return true, waitRolled(ctx, env, app.SyncPolicy.Timeout, one, written)
}

// waitRolled waits, up to timeout, until a snapshot taken after written
// shows every service of rel rolled: no rollout, every task of the
// current spec, healthy. A rollback by Swarm ends it at once.
func waitRolled(ctx context.Context, env Env, timeout time.Duration, rel stack.Release, written time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	changes := env.Live.Subscribe(ctx)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		snap := env.Live.Current()
		seen := snap.TakenAt().After(written)
		if seen {
			if why := rolledBack(rel, snap); why != "" {
				return errors.New(why)
			}
			if Rollout(rel, snap) == "" && Converged(rel, snap) == "" && Health(rel, snap).State == health.Healthy {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("release %s not rolled within %s: %w", rel.Name, timeout, ctx.Err())
		case <-changes:
		case <-tick.C:
			// Tasks on other nodes raise no event on this manager.
			if seen {
				env.Live.RelistTasks()
			} else {
				env.Live.Relist()
			}
		}
	}
}

// rebalancedMessage names the nodes the services' tasks were short on
// and each service rolled, with its tasks per node before the roll:
// "skep-w1 back with fewer tasks: rolled web_api (skep-m1 2, skep-w1 0)".
func rebalancedMessage(rolled []placement.Skew) string {
	var nodes, services []string
	for _, sk := range rolled {
		nodes = append(nodes, sk.Short...)
		var counts []string
		for _, n := range slices.Sorted(maps.Keys(sk.Counts)) {
			counts = append(counts, fmt.Sprintf("%s %d", n, sk.Counts[n]))
		}
		services = append(services, fmt.Sprintf("%s (tasks per node were %s)", sk.Service, strings.Join(counts, ", ")))
	}
	slices.Sort(nodes)
	return fmt.Sprintf("%s back with fewer tasks than the other nodes: rolled %s to spread them again",
		strings.Join(slices.Compact(nodes), ", "), strings.Join(services, "; "))
}

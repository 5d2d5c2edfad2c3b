package syncpass

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/placement"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// ImagePlatforms reads the platforms an image is built for from its
// registry; *artifact.Registry implements it, cached per reference. It
// must be safe for concurrent use.
type ImagePlatforms interface {
	Platforms(ctx context.Context, image string) ([]artifact.Platform, error)
}

// platformLookups bounds the registry look-ups of one placement check.
const platformLookups = 4

// placeCheck is how far a pass checked its release's placement.
type placeCheck int

const (
	placeNotChecked placeCheck = iota // another rule held the write, or there is no live snapshot
	placeUnlisted                     // the snapshot has not listed the nodes (yet)
	placeChecked
)

// judge runs gate on what the pass found and, when gate lets a write
// through, checks the release's placement against the nodes of the pass's
// snapshot (the registry asked for the images' platforms only then; a
// snapshot not listed yet cannot tell) and lets gate judge that too. It
// raises and records what gate found.
func (out *Outcome) judge(ctx context.Context, env Env, in Input, d desired, seen observed) verdict {
	f := out.facts(in, d, seen)
	v := gate(f)
	// A canary's start writes the new spec too: it is checked the same.
	// A snapshot never listed is a pass without a live snapshot (one run
	// before the controller follows the swarm, or whose first list outran
	// the wait for it): as then, the write is not checked. One listed but
	// not read now waits.
	neverListed := errors.Is(in.Live.Err(), swarm.ErrNotListed)
	if (v.then == write || v.then == steer && f.canary.starts) && seen.has && !neverListed {
		f.placed = placeUnlisted
		if !in.Live.TakenAt().IsZero() && !in.Live.ReadFailed() {
			f.placed, f.unplaceable = placeChecked, checkPlacement(ctx, env, in.App, d.release, in.Live)
		}
		if v = gate(f); v.then != hold && len(f.unplaceable) > 0 {
			env.Log.Warn("release written although it cannot be placed (allow.unplaceable)", "app", in.App.Name,
				"release", in.App.Release, "problems", describePlacement(f.unplaceable))
		}
		out.Result.Unplaceable = placementLines(f.unplaceable)
	}
	out.judged(ctx, env, in, d, v)
	return v
}

// checkPlacement is what no node of snap satisfies for each service of
// rel; nil when snap lists no node (it cannot say).
func checkPlacement(ctx context.Context, env Env, app appset.Application, rel stack.Release, snap swarm.Snapshot) []placement.Problem {
	nodes := snap.Nodes()
	if snap.ReadFailed() || len(nodes) == 0 {
		return nil
	}
	return placement.Check(placement.Input{Services: rel.Services, Nodes: nodes, Tasks: snap.Tasks(), Live: snap.Services(),
		Images: imagePlatforms(ctx, env, app, rel)})
}

// imagePlatforms asks the registry for the platforms of each image rel
// names, a few at a time, unless the application turns registry look-ups
// off (syncPolicy.resolveImage: never). An image the registry does not
// answer for is left out: it is not judged on platform.
func imagePlatforms(ctx context.Context, env Env, app appset.Application, rel stack.Release) map[string][]placement.Platform {
	if env.Platforms == nil || app.SyncPolicy.ResolveImage == appset.ResolveNever {
		return nil
	}
	images := map[string]bool{}
	for _, spec := range rel.Services {
		if cs := spec.TaskTemplate.ContainerSpec; cs != nil && cs.Image != "" {
			images[cs.Image] = true
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[string][]placement.Platform{}
	slots := make(chan struct{}, platformLookups)
	for _, image := range slices.Sorted(maps.Keys(images)) {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return out
		}
		wg.Go(func() {
			defer func() { <-slots }()
			ps, err := env.Platforms.Platforms(ctx, image)
			if err != nil {
				env.Log.Debug("image platforms unknown", "app", app.Name, "image", image, "err", err)
				return
			}
			conv := make([]placement.Platform, 0, len(ps))
			for _, p := range ps {
				conv = append(conv, placement.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant})
			}
			mu.Lock()
			out[image] = conv
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// unplaceableError is the refusal of app's release at commit ("" when
// there is none yet) for the problems the application does not allow
// (allow.unplaceable), one line per service; nil when it allows each.
func unplaceableError(app appset.Application, commit string, problems []placement.Problem) error {
	var lines []string
	for _, p := range problems {
		if !app.Allow.AllowsUnplaceable(string(p.Rule)) {
			lines = append(lines, p.String())
		}
	}
	if len(lines) == 0 {
		return nil
	}
	at := ""
	if commit != "" {
		at = " at " + gitsource.ShortCommit(commit)
	}
	return &outcome.StalledError{Err: fmt.Errorf("release %s%s cannot be placed, so nothing was written (allow.unplaceable lets a rule through):\n%s",
		app.Release, at, strings.Join(lines, "\n"))}
}

// placementLines is each problem in one line, as the status and the dry
// run show them; nil for none.
func placementLines(problems []placement.Problem) []string {
	var out []string
	for _, p := range problems {
		out = append(out, p.String())
	}
	return out
}

// describePlacement joins the problems for a log line.
func describePlacement(problems []placement.Problem) string {
	return strings.Join(placementLines(problems), "; ")
}

// unschedulable names a task of rel meant to run that the scheduler left
// pending because no node suits it (its error: "no suitable node (…)"),
// with what the placement check finds no node satisfies for its service;
// "" when there is none, when the check finds nothing and a task of the
// service is on its way out (the task waits for what that one holds), or
// when the application allows what the check finds (allow.unplaceable:
// the task waits for a node). Swarm keeps such a task pending for ever,
// so a wait for health fails at once rather than at its timeout. It is
// pure.
func unschedulable(app appset.Application, rel stack.Release, snap swarm.Snapshot) string {
	for _, name := range slices.Sorted(maps.Keys(rel.Services)) {
		live, ok := snap.Service(name)
		if !ok {
			continue
		}
		for _, t := range snap.TasksOf(live.ID) {
			if t.DesiredState != dswarm.TaskStateRunning || t.Status.State != dswarm.TaskStatePending || t.Status.Err == "" {
				continue
			}
			one := map[string]dswarm.ServiceSpec{name: live.Spec}
			problems := placement.Check(placement.Input{Services: one, Nodes: snap.Nodes(), Tasks: snap.Tasks(), Live: []dswarm.Service{live}})
			if len(problems) == 0 && leaving(snap.TasksOf(live.ID), snap.TakenAt()) {
				// A node suits the service but for what a task on its way
				// out holds (a host-mode port, during a stop-first update):
				// the task is placed once it is gone.
				continue
			}
			why := fmt.Sprintf("service %s cannot be placed: task %s pending: %s", name, health.ShortID(t.ID), t.Status.Err)
			for _, p := range problems {
				if app.Allow.AllowsUnplaceable(string(p.Rule)) {
					return ""
				}
				why += "; " + p.Message
			}
			if app.Allow.AllowsUnplaceable(appset.UnplaceableAll) {
				return ""
			}
			return why
		}
	}
	return ""
}

// leftRecently is how long after a task stopped what it held (a port,
// resources) may still keep the scheduler from placing another task.
const leftRecently = 5 * time.Second

// leaving reports whether a task of tasks is on its way out at at: meant
// to stop and not stopped yet, or stopped within leftRecently.
func leaving(tasks []dswarm.Task, at time.Time) bool {
	return slices.ContainsFunc(tasks, func(t dswarm.Task) bool {
		if t.DesiredState != dswarm.TaskStateShutdown && t.DesiredState != dswarm.TaskStateRemove {
			return false
		}
		return !swarm.TaskEnded(t.Status.State) || at.Sub(t.Status.Timestamp) < leftRecently
	})
}

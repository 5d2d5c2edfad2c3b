package syncpass

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"time"

	"github.com/docker/docker/api/types/filters"
	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
)

// desired is an application rendered (or about to be) at one commit and
// artifact versions, with what the git part of it took (for metrics).
type desired struct {
	commit    string
	source    appset.AppSource // where the release is rendered from
	release   stack.Release
	artifacts []artifact.Object
	chart     *chartRender // nil for a compose release
	gitTook   time.Duration
	gitFailed bool
}

// key identifies what d deploys: the commit and the artifact versions.
func (d desired) key() string {
	if len(d.artifacts) == 0 {
		return d.commit
	}
	return d.commit + "+" + versionsKey(d.artifacts)
}

// resolve finds what a render of app would read: the artifact versions
// and the commit (commit "" = the revision app tracks; known, when not "",
// is that revision's commit as git last named it, taken instead of asking
// again unless an artifact names the source). It reads refs and the
// registry gate, both cached, and the swarm through v; it renders nothing.
func resolve(ctx context.Context, env Env, app appset.Application, v view, commit, known string) (desired, error) {
	start := env.Wall()
	arts, err := resolveArtifacts(ctx, env, app, v)
	if err != nil {
		return desired{artifacts: arts.objects, gitTook: env.Wall().Sub(start), gitFailed: outcome.Of(err) == outcome.Transient}, err
	}
	source := app.Source
	if arts.source != "" {
		// The infrastructure artifact names the stack definitions and the
		// version of them to deploy; a held commit still wins, since a
		// rollback must keep its commit whatever the artifact files say.
		source.Repo, source.Revision = arts.source, arts.revision
		if commit == "" {
			commit = arts.revision
		}
	}
	if commit == "" && arts.source == "" {
		commit = known
	}
	if commit == "" {
		commit, err = env.Git.Resolve(ctx, source.Repo, source.Revision)
		if err != nil {
			return desired{artifacts: arts.objects, gitTook: env.Wall().Sub(start), gitFailed: true},
				classifyGit(fmt.Errorf("resolve %s at %q: %w", gitsource.RedactURL(source.Repo), source.Revision, err))
		}
	}
	return desired{commit: commit, source: source, artifacts: arts.objects, gitTook: env.Wall().Sub(start)}, nil
}

// classifyGit classes a git failure: a revision, repository or credential
// git refuses, or a repository over the git cache's caps, is stalled until
// someone changes the app set or the remote; anything else (the network, a
// 5xx) is transient.
func classifyGit(err error) error {
	var remote *gitsource.RemoteError
	switch {
	case errors.Is(err, gitsource.ErrRevisionNotFound), errors.Is(err, gitsource.ErrAuth),
		errors.Is(err, gitsource.ErrRepositoryNotFound), errors.Is(err, gitsource.ErrTooLarge):
		return &outcome.StalledError{Err: err}
	case errors.As(err, &remote) && !remote.Transient():
		return &outcome.StalledError{Err: err}
	default:
		return &outcome.TransientError{Err: err}
	}
}

// artifacts is what one pass resolved of an application's release
// artifacts: every object, and the render inputs they give.
type artifacts struct {
	objects []artifact.Object
	// source and revision replace the application's own when an
	// infrastructure entry names the stack definitions; "" keeps them.
	source, revision string
}

// resolveArtifacts reads app's artifact files at the revision they track
// and resolves each entry against git, the registry and what the swarm
// runs. An application without artifacts gets the zero value.
func resolveArtifacts(ctx context.Context, env Env, app appset.Application, v view) (artifacts, error) {
	spec := app.Artifacts
	if spec == nil {
		return artifacts{}, nil
	}
	set, err := loadArtifacts(ctx, env, app)
	if err != nil {
		return artifacts{}, err
	}
	opts := artifact.ResolveOptions{Git: env.Git, Current: currentVersions(ctx, env, v, env.owner(app), set.Entries()), TagTemplate: spec.TagTemplate}
	if spec.CheckImages {
		opts.Images = env.Images
	}
	objs := artifact.Resolve(ctx, set.Entries(), opts)
	out := artifacts{objects: objs}
	for _, o := range objs {
		if o.Entry.Kind != artifact.Infrastructure {
			continue
		}
		out.source = o.Entry.Source
		out.revision = o.Version()
		if out.revision == "" {
			return out, &outcome.WaitingError{Err: fmt.Errorf("artifact %s: no revision of %s resolved and none deployed: %s",
				o.Entry.Name, gitsource.RedactURL(o.Entry.Source), o.Reason), Retry: artifact.DefaultMissingFor}
		}
	}
	return out, nil
}

// loadArtifacts reads and validates app's artifact directory at the commit
// its revision resolves to. Invalid files are a stalled error: git must
// change.
func loadArtifacts(ctx context.Context, env Env, app appset.Application) (*artifact.Set, error) {
	spec := app.Artifacts
	repo := spec.Repo
	if repo == "" {
		repo = app.Source.Repo
		if env.AppSetRepo != "" {
			repo = env.AppSetRepo
		}
	}
	commit, err := env.Git.Resolve(ctx, repo, spec.Revision)
	if err != nil {
		return nil, classifyGit(fmt.Errorf("artifacts %s at %q: %w", gitsource.RedactURL(repo), spec.Revision, err))
	}
	tree, err := env.Git.Checkout(ctx, repo, commit)
	if err != nil {
		return nil, classifyGit(fmt.Errorf("artifacts %s at %s: %w", gitsource.RedactURL(repo), gitsource.ShortCommit(commit), err))
	}
	defer tree.Release()
	root, err := os.OpenRoot(tree.Dir())
	if err != nil {
		return nil, &outcome.TransientError{Err: fmt.Errorf("artifacts at %s: %w", gitsource.ShortCommit(commit), err)}
	}
	defer root.Close()
	dir := path.Join(spec.Path, spec.Environment)
	set, err := artifact.Load(root.FS(), dir, artifact.LoadOptions{Registry: spec.Registry, GitBase: spec.GitBase})
	if err != nil {
		return nil, &outcome.StalledError{Err: fmt.Errorf("artifacts %s at %s: %w", dir, gitsource.ShortCommit(commit), err)}
	}
	return set, nil
}

// currentVersions finds what the swarm runs of each artifact in owner's
// release: the image tag of the release's live service using a service
// artifact's image (the previous spec while an update runs), and the
// deployed commit for the infrastructure entry.
func currentVersions(ctx context.Context, env Env, v view, owner stack.Owner, entries []artifact.Entry) map[string]string {
	out := map[string]string{}
	live := releaseServices(ctx, env, v, owner.Release)
	for _, e := range entries {
		if e.Kind == artifact.Infrastructure {
			if rev, err := apply.LatestRevision(ctx, revisionSource(env, v), owner); err == nil && rev != nil {
				out[e.Name] = rev.Commit
			}
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(live)) {
			if tag, ok := tagOf(live[name], e.Image); ok {
				out[e.Name] = tag
				break
			}
		}
	}
	return out
}

// releaseServices returns the image each service of release runs, by
// service name, as v shows it; the Engine answers instead when v cannot
// (no snapshot, or one that may predate the application's last write, a
// relist still under way after a deploy): it would show the release as it
// was before, and a version just deployed would read as nothing running
// (see TestArtifactCurrentVersionIsReadFromTheEngineWhileTheSnapshotPredatesTheDeploy).
func releaseServices(ctx context.Context, env Env, v view, release string) map[string]string {
	out := map[string]string{}
	if v.readable() {
		for name, s := range servicesOf(v.snap, release) {
			out[name] = runningImage(s)
		}
		return out
	}
	f := filters.NewArgs(filters.Arg("label", stack.LabelNamespace+"="+release))
	services, err := env.Engine.ServiceList(ctx, dswarm.ServiceListOptions{Filters: f})
	if err != nil {
		return out
	}
	for _, s := range services {
		if s.Spec.Labels[stack.LabelNamespace] == release {
			out[s.Spec.Name] = runningImage(s)
		}
	}
	return out
}

package syncpass

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/chart"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/outcome"
)

// Plan renders app at commit ("" = the revision it tracks) and compares
// the render with what was last recorded: a pass's resolve, render,
// compare and placement check (Result.Unplaceable, whatever the
// application allows), without its writes, its events or its memo. It is safe to call
// beside running passes.
func Plan(ctx context.Context, env Env, app appset.Application, commit string) (Result, error) {
	v := env.look(app.Name)
	d, err := resolve(ctx, env, app, v, commit, "")
	if err == nil {
		d, err = renderAt(ctx, env, app, v, d)
	}
	if err != nil {
		return Result{Commit: d.commit}, err
	}
	p, latest, err := compare(ctx, env, v, env.owner(app), d.release)
	return Result{Commit: d.commit, Plan: p, Recorded: latest.Revision, Warnings: slices.Concat(d.release.Warnings, latest.Skipped),
		Unplaceable: placementLines(checkPlacement(ctx, env, app, d.release, v.snap))}, err
}

// ReadReleases resolves the commit app deploys (commit, when not "", is
// it: a held one) and reads app's release file there. It returns the
// commit it read, "" when the revision did not resolve.
func ReadReleases(ctx context.Context, env Env, app appset.Application, commit string) ([]chart.ReleaseSpec, string, error) {
	if commit == "" {
		var err error
		commit, err = env.Git.Resolve(ctx, app.Source.Repo, app.Source.Revision)
		if err != nil {
			return nil, "", classifyGit(fmt.Errorf("resolve %s at %q: %w", gitsource.RedactURL(app.Source.Repo), app.Source.Revision, err))
		}
	}
	tree, err := env.Git.Checkout(ctx, app.Source.Repo, commit)
	if err != nil {
		return nil, commit, classifyGit(fmt.Errorf("fetch %s at %s: %w", gitsource.RedactURL(app.Source.Repo), gitsource.ShortCommit(commit), err))
	}
	defer tree.Release()
	root, err := os.OpenRoot(tree.Dir())
	if err != nil {
		return nil, commit, &outcome.TransientError{Err: fmt.Errorf("release file at %s: %w", gitsource.ShortCommit(commit), err)}
	}
	defer root.Close()
	specs, err := chart.LoadReleases(root.FS(), app.Chart.Releases)
	if err != nil {
		return nil, commit, &outcome.StalledError{Err: fmt.Errorf("release file at %s: %w", gitsource.ShortCommit(commit), err)}
	}
	if len(specs) == 0 {
		return nil, commit, &outcome.StalledError{Err: errors.New("release file declares no releases")}
	}
	return specs, commit, nil
}

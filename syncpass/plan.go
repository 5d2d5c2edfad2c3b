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
	"github.com/skep-cd/skep/stack"
)

// Plan renders app at commit ("" = the revision it tracks) and compares
// the render with what was last recorded: a pass's resolve, render,
// compare and placement check (Result.Unplaceable, whatever the
// application allows), without its writes, its events or its memo. It is
// safe to call beside running passes.
func Plan(ctx context.Context, env Env, app appset.Application, commit string) (Result, error) {
	res, _, err := planAt(ctx, env, app, commit)
	return res, err
}

// planAt is Plan, with the release it rendered.
func planAt(ctx context.Context, env Env, app appset.Application, commit string) (Result, stack.Release, error) {
	v := env.look(app.Name)
	d, err := resolve(ctx, env, app, v, commit, "")
	if err == nil {
		d, err = renderAt(ctx, env, app, v, d)
	}
	if err != nil {
		return Result{Commit: d.commit, Artifacts: d.artifacts}, stack.Release{}, err
	}
	p, latest, err := compare(ctx, env, v, env.owner(app), d.release)
	res := Result{Commit: d.commit, Plan: p, Recorded: latest.Revision, Artifacts: d.artifacts,
		Warnings: slices.Concat(d.release.Warnings, latest.Skipped), Unplaceable: placementLines(checkPlacement(ctx, env, app, d.release, v.snap))}
	return res, d.release, err
}

// Proposal is a commit nobody deployed yet, planned as merging it would
// deploy it: a pull request's head, or a revision a CI job asks about.
type Proposal struct {
	// Commit is the full sha rendered. It must be in the git cache's clone
	// of the application's repository already when no branch or tag
	// reaches it (gitsource.FetchRef brings a fork's head).
	Commit string
	// Sealed renders without the destination's decryption keys: each
	// SOPS-encrypted value stands in by a digest of its ciphertext
	// (sops.Sealed). A fork's proposal is sealed.
	Sealed bool
}

// Proposed is the plan of one release of a Proposal: Err is set, and
// Result holds what was found before it, when the commit does not
// resolve, render, validate or place.
type Proposed struct {
	Release string
	Result  Result
	Err     error
}

// Propose plans app, its definition as merging the proposal would make
// it, at p.Commit against what its swarm runs (the revision recorded
// there, as Plan): resolve, render, the placement check and compare,
// never a write, a hook, an event or a memo. The caller makes env sealed
// for a sealed proposal. It is safe to call beside running passes.
func Propose(ctx context.Context, env Env, app appset.Application, p Proposal) Proposed {
	res, rel, err := planAt(ctx, env, app, p.Commit)
	if err == nil {
		err = place(ctx, env, app, rel)
	}
	return Proposed{Release: app.Release, Result: res, Err: err}
}

// place checks that the swarm, as the destination's snapshot shows it,
// can run every service of rel as declared (package placement: nodes up,
// constraints, the images' platforms from the registry unless the
// application turns look-ups off, reservations, max_replicas_per_node),
// as the check before a write does: a stalled refusal, one line per
// service, of what the application does not allow (allow.unplaceable);
// nil without a snapshot that lists nodes.
func place(ctx context.Context, env Env, app appset.Application, rel stack.Release) error {
	v := env.look(app.Name)
	if !v.has {
		return nil
	}
	return unplaceableError(app, "", checkPlacement(ctx, env, app, rel, v.snap))
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

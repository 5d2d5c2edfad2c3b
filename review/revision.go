package review

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/wire"
)

// Plan implements api.Reviews: application name's running definition at
// revision, a branch, tag or commit of its repository or a pull request's
// ref there (refs/pull/7/head, refs/merge-requests/7/head,
// refs/pull-requests/7/from), as a pull request's head is planned. Its
// artifact files are read at revision too when they live in the
// application's repository and track its branch. A pull request's ref
// may be a fork's, so its plan is sealed.
func (r *Reviewer) Plan(ctx context.Context, name, revision string) (wire.Proposal, error) {
	i := slices.IndexFunc(r.opts.Controller.Applications(), func(a appset.Application) bool { return a.Name == name })
	if i < 0 {
		return wire.Proposal{}, fmt.Errorf("%w: application %s", api.ErrNotFound, name)
	}
	app := r.opts.Controller.Applications()[i]
	// A CI job asks right after its push: an ls-remote answer the cache
	// still reuses may predate it.
	r.opts.Git.Forget(app.Source.Repo)
	sealed := isPullRef(revision)
	var (
		commit string
		err    error
	)
	if sealed {
		commit, err = r.opts.Git.FetchRef(ctx, app.Source.Repo, revision)
	} else {
		commit, err = r.opts.Git.Resolve(ctx, app.Source.Repo, revision)
	}
	switch {
	case errors.Is(err, gitsource.ErrRevisionNotFound):
		return wire.Proposal{}, fmt.Errorf("%w: revision %q of application %s: %w", api.ErrInvalid, revision, name, err)
	case err != nil:
		return wire.Proposal{}, fmt.Errorf("%w: resolve revision %q of application %s: %w", api.ErrUnavailable, revision, name, err)
	}
	t := target{app: app, source: true}
	t.arts = app.Artifacts != nil && api.RepoKey(r.artifactsRepo(app)) == api.RepoKey(app.Source.Repo) &&
		app.Artifacts.Revision == app.Source.Revision
	return r.planApp(ctx, api.PullRequest{Fork: sealed}, commit, app.Source.Repo, t, nil).proposal, nil
}

// isPullRef reports whether ref is one a forge keeps a pull request's head
// under.
func isPullRef(ref string) bool {
	for _, p := range []string{"refs/pull/", "refs/merge-requests/", "refs/pull-requests/"} {
		if strings.HasPrefix(ref, p) {
			return true
		}
	}
	return false
}

package reconcile

import (
	"context"
	"fmt"
	"os"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
)

// GitAppSet is an app-set source in a git repository: every *.yaml and
// *.yml file in Path at the commit Revision resolves to. Its revision is
// that commit.
type GitAppSet struct {
	Git      *gitsource.Cache
	Repo     string
	Revision string
	Path     string
}

// Load implements appset.Source.
func (g GitAppSet) Load(ctx context.Context) (*appset.Set, string, error) {
	// A new commit must be seen at the app-set interval, not the ref cache's.
	g.Git.Forget(g.Repo)
	commit, err := g.Git.Resolve(ctx, g.Repo, g.Revision)
	if err != nil {
		return nil, "", fmt.Errorf("app set %s at %q: %w", gitsource.RedactURL(g.Repo), g.Revision, err)
	}
	tree, err := g.Git.Checkout(ctx, g.Repo, commit)
	if err != nil {
		return nil, "", fmt.Errorf("app set %s at %s: %w", gitsource.RedactURL(g.Repo), gitsource.ShortCommit(commit), err)
	}
	defer tree.Release()
	root, err := os.OpenRoot(tree.Dir())
	if err != nil {
		return nil, "", fmt.Errorf("app set at %s: %w", gitsource.ShortCommit(commit), err)
	}
	defer root.Close()
	path := g.Path
	if path == "" {
		path = "."
	}
	files, err := appset.ReadFiles(root.FS(), path)
	if err != nil {
		return nil, commit, fmt.Errorf("app set at %s: %w", gitsource.ShortCommit(commit), err)
	}
	set, err := appset.ParseFiles(files)
	return set, commit, err
}

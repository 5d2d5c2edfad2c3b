package reconcile

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
)

// generated is the app-set source the controller watches: its inner
// source's set, with each generator's applications made from the
// directories its repository holds now. The revision names the commits of
// the generators' repositories too, so a directory added or removed is a
// new revision, as appset.Source requires.
type generated struct {
	inner appset.Source
	git   *gitsource.Cache
}

// Load implements appset.Source. A generator whose repository cannot be
// read fails the load: the running set stays, rather than losing the
// applications that repository generated.
func (g generated) Load(ctx context.Context) (*appset.Set, string, error) {
	set, revision, err := g.inner.Load(ctx)
	if err != nil || set == nil || len(set.Generators()) == 0 {
		return set, revision, err
	}
	found := map[string][]string{}
	var commits []string
	for _, gen := range set.Generators() {
		dirs, commit, err := g.directories(ctx, gen)
		if err != nil {
			return nil, revision, fmt.Errorf("generator %s: %w", gen.Name, err)
		}
		found[gen.Name] = dirs
		commits = append(commits, gen.Name+"@"+gitsource.ShortCommit(commit))
	}
	expanded, err := set.Expand(found)
	return expanded, revision + " (" + strings.Join(commits, ", ") + ")", err
}

// directories lists the directories of gen's repository, at the commit its
// revision resolves to now, that match one of its globs; names starting
// with '.' are left out.
func (g generated) directories(ctx context.Context, gen appset.Generator) ([]string, string, error) {
	// A directory pushed must be seen at the app-set interval, not the
	// ref cache's.
	g.git.Forget(gen.Repo)
	commit, err := g.git.Resolve(ctx, gen.Repo, gen.Revision)
	if err != nil {
		return nil, "", fmt.Errorf("resolve %s at %q: %w", gitsource.RedactURL(gen.Repo), gen.Revision, err)
	}
	tree, err := g.git.Checkout(ctx, gen.Repo, commit)
	if err != nil {
		return nil, commit, fmt.Errorf("fetch %s at %s: %w", gitsource.RedactURL(gen.Repo), gitsource.ShortCommit(commit), err)
	}
	defer tree.Release()
	// os.Root: a symbolic link in the repository cannot make a directory
	// outside the checkout look like one of its own.
	root, err := os.OpenRoot(tree.Dir())
	if err != nil {
		return nil, commit, fmt.Errorf("list %s at %s: %w", gitsource.RedactURL(gen.Repo), gitsource.ShortCommit(commit), err)
	}
	defer root.Close()
	var dirs []string
	for _, glob := range gen.Directories {
		matches, err := fs.Glob(root.FS(), glob)
		if err != nil {
			return nil, commit, fmt.Errorf("directories %q: %w", glob, err)
		}
		for _, m := range matches {
			if strings.HasPrefix(path.Base(m), ".") {
				continue
			}
			if st, err := fs.Stat(root.FS(), m); err == nil && st.IsDir() {
				dirs = append(dirs, m)
			}
		}
	}
	slices.Sort(dirs)
	return slices.Compact(dirs), commit, nil
}

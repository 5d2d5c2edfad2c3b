package gitsource

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// reviewRefs is where the clone keeps the refs FetchRef brings, outside
// the remote's refspecs, so the next fetch of branches and tags neither
// needs nor prunes them.
const reviewRefs = "refs/skep/fetched/"

// FetchRef brings the commit ref names in repoURL into the local clone
// and returns it: a pull request's head (refs/pull/7/head,
// refs/merge-requests/3/head), which the branches and tags every fetch
// brings do not include when it comes from a fork. The ref is looked up
// in ListRefs's answer, asked afresh when the answer kept lacks it; it is
// fetched only when its commit is not in the clone yet. A ref the remote
// does not advertise is ErrRevisionNotFound.
// Checkout and Changed then find the commit without a fetch of their own.
func (c *Cache) FetchRef(ctx context.Context, repoURL, ref string) (string, error) {
	if !strings.HasPrefix(ref, "refs/") || strings.ContainsAny(ref, ":*^~ \\") || strings.Contains(ref, "..") {
		return "", fmt.Errorf("fetch %s: %q is not a full ref name", RedactURL(repoURL), ref)
	}
	refs, err := c.ListRefs(ctx, repoURL)
	if err != nil {
		return "", err
	}
	sha, ok := refs.byName[ref]
	if !ok {
		// The caller heard of the ref from the forge: the answer kept may
		// predate it.
		c.Forget(repoURL)
		if refs, err = c.ListRefs(ctx, repoURL); err != nil {
			return "", err
		}
		if sha, ok = refs.byName[ref]; !ok {
			return "", fmt.Errorf("fetch %s: %w: %s", RedactURL(repoURL), ErrRevisionNotFound, ref)
		}
	}
	r, err := c.repo(repoURL)
	if err != nil {
		return "", err
	}
	return c.withClone(ctx, r, func(g *git.Repository) (string, error) {
		if _, err := g.CommitObject(plumbing.NewHash(sha)); err == nil {
			return sha, nil
		}
		spec := config.RefSpec("+" + ref + ":" + reviewRefs + strings.TrimPrefix(ref, "refs/"))
		if err := c.fetchRemote(ctx, r, g, []config.RefSpec{spec}); err != nil {
			return "", err
		}
		if _, err := g.CommitObject(plumbing.NewHash(sha)); err != nil {
			return "", fmt.Errorf("fetch %s: %w: %s moved while it was fetched", r.name(), ErrRevisionNotFound, ref)
		}
		return sha, nil
	})
}

// MaxChanged bounds the paths Changed lists: a change of more files is
// answered with ErrTooLarge, and the caller treats it as touching
// everything.
const MaxChanged = 10_000

// Changed lists the paths that head changes against its merge base with
// base (what a pull request from head into base changes, as the forge
// shows it), sorted, each once: added, modified and removed files, and
// both sides of a rename. A commit not in the clone yet is fetched with
// the branches and tags, as Checkout does; a fork's head must have come
// with FetchRef. A change of more than MaxChanged paths is an error
// wrapping ErrTooLarge.
func (c *Cache) Changed(ctx context.Context, repoURL, base, head string) ([]string, error) {
	if !isFullSHA(base) || !isFullSHA(head) {
		return nil, fmt.Errorf("changes in %s: want two full commit shas, got %q and %q", RedactURL(repoURL), base, head)
	}
	r, err := c.repo(repoURL)
	if err != nil {
		return nil, err
	}
	var out []string
	from, to := plumbing.NewHash(strings.ToLower(base)), plumbing.NewHash(strings.ToLower(head))
	_, err = c.withClone(ctx, r, func(g *git.Repository) (string, error) {
		for _, h := range []plumbing.Hash{from, to} {
			if _, err := g.CommitObject(h); err != nil {
				if err := c.fetch(ctx, r, g); err != nil {
					return "", err
				}
				break
			}
		}
		out, err = changedFiles(ctx, g, from, to)
		return "", err
	})
	if err != nil {
		return nil, fmt.Errorf("changes in %s from %s to %s: %w", r.name(), ShortCommit(base), ShortCommit(head), err)
	}
	return out, nil
}

// changedFiles is Changed on the opened clone.
func changedFiles(ctx context.Context, g *git.Repository, base, head plumbing.Hash) ([]string, error) {
	baseCommit, err := g.CommitObject(base)
	if err != nil {
		return nil, fmt.Errorf("%w: commit %s", ErrRevisionNotFound, base)
	}
	headCommit, err := g.CommitObject(head)
	if err != nil {
		return nil, fmt.Errorf("%w: commit %s", ErrRevisionNotFound, head)
	}
	from := baseCommit
	// Several merge bases (criss-cross merges) are all ancestors of head;
	// any one shows what head brings. None (unrelated histories): the
	// whole of head is new.
	if bases, err := headCommit.MergeBase(baseCommit); err == nil && len(bases) > 0 {
		from = bases[0]
	}
	fromTree, err := from.Tree()
	if err != nil {
		return nil, err
	}
	headTree, err := headCommit.Tree()
	if err != nil {
		return nil, err
	}
	changes, err := object.DiffTreeWithOptions(ctx, fromTree, headTree, object.DefaultDiffTreeOptions)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ch := range changes {
		for _, name := range []string{ch.From.Name, ch.To.Name} {
			if name != "" {
				out = append(out, name)
			}
		}
		if len(out) > 2*MaxChanged {
			break
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxChanged {
		return nil, fmt.Errorf("%w: more than %d paths changed", ErrTooLarge, MaxChanged)
	}
	return out, nil
}

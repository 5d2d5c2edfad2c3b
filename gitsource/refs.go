package gitsource

import (
	"errors"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// Refs is one ls-remote answer: every ref the remote advertised, with
// annotated tags peeled to the commit they point at. It is an immutable
// value, safe to share between goroutines; the zero value has no refs.
// Cache.ListRefs returns it and Cache.Resolve reads it.
type Refs struct {
	byName map[string]string // ref name → commit sha; never written after newRefs
	head   string            // the branch HEAD names ("main"), "" when not advertised
}

// newRefs indexes an ls-remote answer. With git.AppendPeeled the remote
// lists an annotated tag twice: "refs/tags/v1" naming the tag object and
// "refs/tags/v1^{}" naming the commit; the commit wins, since only commits
// can be checked out. Symbolic refs (HEAD → refs/heads/main) take their
// target's commit; one whose target was not advertised is left out.
func newRefs(list []*plumbing.Reference) Refs {
	r := Refs{byName: make(map[string]string, len(list))}
	peeled := map[string]string{}
	var symbolic []*plumbing.Reference
	for _, ref := range list {
		name := ref.Name().String()
		switch {
		case ref.Type() == plumbing.SymbolicReference:
			symbolic = append(symbolic, ref)
		case strings.HasSuffix(name, "^{}"):
			peeled[strings.TrimSuffix(name, "^{}")] = ref.Hash().String()
		default:
			r.byName[name] = ref.Hash().String()
		}
	}
	for name, sha := range peeled {
		r.byName[name] = sha
	}
	for _, ref := range symbolic {
		if sha, ok := r.byName[ref.Target().String()]; ok {
			r.byName[ref.Name().String()] = sha
		}
		if ref.Name() == plumbing.HEAD {
			r.head = strings.TrimPrefix(ref.Target().String(), "refs/heads/")
		}
	}
	return r
}

// Branches returns every branch the remote advertised, by short name
// ("feature/a"), with its head commit, as a new map.
func (r Refs) Branches() map[string]string {
	out := map[string]string{}
	for name, sha := range r.byName {
		if b, ok := strings.CutPrefix(name, "refs/heads/"); ok {
			out[b] = sha
		}
	}
	return out
}

// PullRequests returns the pull- and merge-request heads the remote
// advertises (refs/pull/<n>/head as GitHub and Gitea keep them,
// refs/merge-requests/<n>/head as GitLab does), by full ref name, as a new
// map.
func (r Refs) PullRequests() map[string]string {
	out := map[string]string{}
	for name, sha := range r.byName {
		if (strings.HasPrefix(name, "refs/pull/") || strings.HasPrefix(name, "refs/merge-requests/")) && strings.HasSuffix(name, "/head") {
			out[name] = sha
		}
	}
	return out
}

// DefaultBranch returns the branch the remote's HEAD names, or "" when the
// remote did not say.
func (r Refs) DefaultBranch() string { return r.head }

// resolve returns the commit sha that revision names, looking only at what
// the remote advertised:
//   - "" or "HEAD": the remote's default branch;
//   - a full ref name ("refs/heads/x", "refs/tags/v1");
//   - a tag name, then a branch name (git's own order);
//   - a commit sha, full or abbreviated (at least 7 hex digits), that some
//     ref points at.
//
// Anything else is ErrRevisionNotFound. A sha that no ref points at may
// still exist in history: Cache.Resolve fetches to find out.
func (r Refs) resolve(revision string) (string, error) {
	if sha, ok := r.lookupName(revision); ok {
		return sha, nil
	}
	if isSHA(revision) {
		sha, n := r.lookupSHA(revision)
		switch {
		case n == 1:
			return sha, nil
		case n > 1:
			return "", errors.New("abbreviated sha is ambiguous")
		}
	}
	return "", ErrRevisionNotFound
}

// lookupName finds revision among the advertised names, in git's order of
// precedence (git rev-parse tries refs/tags before refs/heads).
func (r Refs) lookupName(revision string) (string, bool) {
	if revision == "" || revision == "HEAD" {
		sha, ok := r.byName["HEAD"]
		return sha, ok
	}
	if strings.HasPrefix(revision, "refs/") {
		sha, ok := r.byName[revision]
		return sha, ok
	}
	for _, p := range []string{"refs/tags/", "refs/heads/"} {
		if sha, ok := r.byName[p+revision]; ok {
			return sha, true
		}
	}
	return "", false
}

// lookupSHA returns the advertised commit starting with prefix and how many
// distinct commits do.
func (r Refs) lookupSHA(prefix string) (string, int) {
	prefix = strings.ToLower(prefix)
	found := map[string]bool{}
	for _, sha := range r.byName {
		if strings.HasPrefix(sha, prefix) {
			found[sha] = true
		}
	}
	// Several refs may point at one commit; only distinct commits make a
	// prefix ambiguous.
	for sha := range found {
		return sha, len(found)
	}
	return "", 0
}

// isSHA reports whether s can be a (possibly abbreviated) commit sha.
func isSHA(s string) bool {
	if len(s) < 7 || len(s) > 40 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// isFullSHA reports whether s is a full SHA-1 commit id, the only form
// Checkout takes: go-git reads SHA-1 repositories only.
func isFullSHA(s string) bool { return len(s) == 40 && isSHA(s) }

package api

import "slices"

// Push is what a webhook delivery says moved: a hint, never trusted beyond
// naming which repository and ref to re-read.
type Push struct {
	// Repositories are the URLs the payload gives for one repository
	// (clone, ssh, web); any may match an application's repo.
	Repositories []string
	// Refs are the refs that moved ("refs/heads/main", or a bare branch
	// name); empty when the payload did not say, which matches any.
	Refs []string
}

// Matches reports whether p can move a source that tracks revision in
// repo: the repositories compare by RepoKey and any ref by RefMatches.
func (p Push) Matches(repo, revision string) bool {
	key := RepoKey(repo)
	if key == "" || !slices.ContainsFunc(p.Repositories, func(r string) bool { return RepoKey(r) == key }) {
		return false
	}
	if len(p.Refs) == 0 {
		return RefMatches(revision, "")
	}
	return slices.ContainsFunc(p.Refs, func(ref string) bool { return RefMatches(revision, ref) })
}

// Refreshed says what a push refreshed.
type Refreshed struct {
	// Applications names the applications whose repository was refreshed
	// and a tick queued.
	Applications []string
	// AppSet is true when the push moved the app set's own source.
	AppSet bool
}

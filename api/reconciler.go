package api

import (
	"context"
	"errors"
	"net/url"
	"path"
	"strings"

	"github.com/skep-cd/skep/wire"
)

// Reconciler is what the API asks of the controller. *reconcile.Controller
// implements it; an alternative reconciler can too, depending only on this
// package. Every method is called concurrently from many requests and must
// be safe for it; ctx carries the caller's display name (notify.ActorFrom),
// which an implementation uses only to label what it records and raises.
//
// Errors that wrap ErrNotFound, ErrInvalid, ErrConflict or ErrUnavailable
// answer 404, 400, 409 and 503; any other error answers 500.
type Reconciler interface {
	// ListApplications lists every application, with live counts read in one
	// pass over the swarm (not one call per application).
	ListApplications(ctx context.Context) (wire.ApplicationList, error)
	// Application returns one application with its releases, services
	// and tasks.
	Application(ctx context.Context, name string) (wire.ApplicationDetail, error)
	// Diff plans the application at revision ("" = what it tracks now)
	// without writing anything.
	Diff(ctx context.Context, name, revision string) (wire.Diff, error)
	// History returns the recorded revisions of each release.
	History(ctx context.Context, name string) (wire.History, error)
	// Sync queues a sync (coalesced with one already queued) and returns at
	// once; a dry run plans synchronously instead.
	Sync(ctx context.Context, name string, opts wire.SyncOptions) (wire.SyncResponse, error)
	// Rollback queues a sync to the commit of a recorded revision and holds
	// the application there.
	Rollback(ctx context.Context, name string, opts wire.RollbackOptions) (wire.SyncResponse, error)
	// Unhold releases a hold and queues a tick.
	Unhold(ctx context.Context, name string) error
	// Canary asks the application's running canary to be promoted or
	// aborted ("promote", "abort"); ErrConflict when none runs.
	Canary(ctx context.Context, name, action string) (wire.SyncResponse, error)
	// Refresh forgets what is known of the application's repository and
	// queues a tick: git is re-read; nothing is applied unless automated.
	Refresh(ctx context.Context, name string) error
	// RefreshRepository refreshes every application (and the app set) whose
	// repository and revision the push names.
	RefreshRepository(ctx context.Context, push Push) (Refreshed, error)
	// MatchPush says what RefreshRepository would refresh for push, without
	// doing it; it does no I/O.
	MatchPush(push Push) Refreshed
	// Status describes the controller; details are filled in always and
	// dropped by the handler for non-admins.
	Status(ctx context.Context) (wire.ControllerStatus, error)
	// Ready returns nil once the first app set is loaded and the swarm
	// answers, and an error saying what is missing otherwise.
	Ready(ctx context.Context) error
}

// Errors a Reconciler wraps to choose the status code. The wrapping error's
// message is shown to the client, so it must hold no secret.
var (
	// ErrNotFound: no such application, release or revision (404).
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the request cannot be served as asked (400).
	ErrInvalid = errors.New("invalid request")
	// ErrUnavailable: the swarm or the app set is not there yet (503);
	// the client may retry.
	ErrUnavailable = errors.New("unavailable")
	// ErrConflict: the application's state refuses the request now, as a
	// sync window allowing no manual sync does (409); it may pass later.
	ErrConflict = errors.New("conflict")
)

// RepoKey normalises a repository URL for matching a webhook's repository
// against an application's: scheme, user, port, a trailing ".git" and "/"
// and letter case are dropped, so https://Host/o/r.git, ssh://git@host:22/o/r
// and git@host:o/r all give "host/o/r". It is for matching hints only,
// never for fetching. An empty or unparsable URL gives "".
func RepoKey(repo string) string {
	s := strings.TrimSpace(repo)
	if s == "" {
		return ""
	}
	var host, p string
	switch {
	case strings.Contains(s, "://"):
		u, err := url.Parse(s)
		if err != nil {
			return ""
		}
		host, p = u.Hostname(), u.Path
	case strings.HasPrefix(s, "/"):
		p = s
	default:
		// scp-like user@host:path: the host ends at the first ':', and a
		// user, if any, ends at the last '@' before it.
		at := strings.LastIndex(s[:max(strings.Index(s, ":"), 0)], "@")
		rest := s[at+1:]
		i := strings.Index(rest, ":")
		if i < 0 {
			return ""
		}
		host, p = rest[:i], rest[i+1:]
	}
	// A payload's web URL has no ".git" and its clone URL has one; both
	// must give the key of the application's repo, however it is written.
	p = path.Clean("/" + p)
	p = strings.TrimSuffix(strings.TrimSuffix(p, "/"), ".git")
	return strings.ToLower(host + p)
}

// RefMatches reports whether a push of ref (a full ref such as
// refs/heads/main, or "") can move an application that tracks revision. An
// unknown ref, the default branch ("HEAD" or "") and a branch or tag of the
// same name match; a full commit id never does, since a push cannot move it.
func RefMatches(revision, ref string) bool {
	if ref == "" || revision == "" || revision == "HEAD" {
		return !isCommitID(revision)
	}
	if isCommitID(revision) {
		return false
	}
	if revision == ref {
		return true
	}
	short := strings.TrimPrefix(strings.TrimPrefix(ref, "refs/heads/"), "refs/tags/")
	return short == revision
}

// isCommitID reports whether s is a full object name as git prints it:
// lower-case hex, 40 digits for SHA-1 or 64 for SHA-256 repositories.
func isCommitID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

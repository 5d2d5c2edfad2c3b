// Package gitsource resolves revisions of git repositories and hands out
// the files of exact commits, from one shared clone per repository URL.
//
// A tick asks each remote for its refs once (ListRefs, cached for
// Options.RefsMaxAge and shared by every application of the repository),
// resolves revisions against that answer, and fetches only when a commit is
// not in the local clone yet; over HTTP such a fetch starts from that
// answer rather than asking for the refs again. Over HTTP an ls-remote is
// one net/http GET on the Cache's transport, whose connections are kept,
// and an answer the same as the one before is not decoded again; a remote
// that redirects is listed through go-git, whose policy keeps credentials
// from another origin. Every HTTP connection of a Cache, go-git's and each
// redirect's included, is made by Options.DialContext (the controller's
// egress policy), so a redirect reaches no address a direct URL could not.
//
// Checkout pins a commit for one reconcile: its files are exported once
// to an immutable directory keyed by sha and shared by every reader. Symlinks are kept as symlinks; Tree.ReadFile and
// Cache.ReadFile refuse ".." and any symlink leading out of the tree.
//
// A fetch is bounded while it is received (Options.MaxFileBytes per object,
// read from each object's header before go-git would hold it whole, and
// Options.MaxPackBytes per fetch), and an export by MaxFileBytes,
// MaxTreeBytes and MaxTreeFiles; a repository over a cap is refused with a
// *LimitError and nothing of it is kept.
//
// Remotes: https/http (basic auth or bearer token), ssh (private key, host
// keys always checked against known_hosts), git://, file:// and local paths
// to repositories, bare or not. Credentials are matched by the longest URL
// prefix. Only commits reachable from a branch or tag can be checked out.
//
// This package must never put a secret in an error or a log line: URLs lose
// their userinfo (RedactURL) before they are wrapped, URLs with a password
// are refused, and credential types print and log redacted. It never writes
// to a remote.
//
// Layout under Options.Dir, one directory per repository named by a hash of
// its normalised URL: "git/" (a bare clone), "trees/<sha>/" (exports) and
// "repository" (the redacted URL, for people). One Cache owns a Dir.
package gitsource

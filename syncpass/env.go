package syncpass

import (
	"context"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/hook"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/prune"
	"github.com/skep-cd/skep/sops"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// Engine is what a pass asks of its destination's manager: apply's
// writes, prune's deletions and re-labelling, what hooks run and read
// with, and what explains a failed task (CauseReader). *swarm.Client
// implements it.
type Engine interface {
	apply.Engine
	prune.Deleter
	prune.Relabeler
	hook.Engine
	CauseReader
}

// ChartSource fetches charts from chart repositories; *chartrepo.Repos
// implements it.
type ChartSource interface {
	// Fetch returns the files of chart name at exactly version from the
	// repository at repoURL, and the directory of the chart within them.
	Fetch(ctx context.Context, repoURL, name, version string) (fs.FS, string, error)
}

// Env is what every pass on one destination works with. It is built once
// per destination and never changed by a pass; passes of several
// applications share it concurrently. Every field but Live, Charts, Keys,
// CheckAddress and the funcs of Fleet is required.
type Env struct {
	// Swarm names the destination ("" is the controller's own swarm) and
	// Owner is the controller label value stamped on what is created there.
	Swarm string
	Owner string
	// Engine is the destination's client, its writes limited.
	Engine Engine
	// Live is the destination's live snapshot; nil without one (skep
	// deploy): then there is no health, live drift, write gate or prune.
	Live    *swarm.Watcher
	Digests *apply.DigestCache
	Git     *gitsource.Cache
	Images  artifact.Images
	// Platforms reads an image's platforms for the placement check before
	// a write; nil checks no image's platform.
	Platforms ImagePlatforms
	// Rebalance is whether the applications that do not say (appset's
	// rebalance) have their services rebalanced once a node is back;
	// Rebalancing holds the one rebalance the swarm allows at a time (a
	// channel of capacity one, shared by every pass here): nil rebalances
	// nothing.
	Rebalance   bool
	Rebalancing chan struct{}
	// Charts fetches charts from chart repositories; nil stalls an
	// application naming one, with a clear error.
	Charts ChartSource
	// Keys decrypt SOPS-encrypted files; nil stalls a release using one.
	Keys *sops.Keys
	// Self is the swarm service the controller runs as (zero: none) and
	// OwnStack the stack it runs in: neither is ever pruned.
	Self     swarm.Self
	OwnStack string
	// AppSetRepo is the repository of a git app set, where artifact files
	// are read when an application names no repository of its own.
	AppSetRepo string
	// CheckAddress judges each host a render would make the Engine
	// connect to; nil checks none.
	CheckAddress func(ctx context.Context, host string) error
	Notifier     *notify.Registry
	// Analysis is the HTTP client a canary's analysis measures with
	// (Prometheus and web metrics); nil means http.DefaultClient.
	Analysis *http.Client
	// Now is the calendar clock: event stamps and TTLs. Wall is the clock
	// durations and write instants are read from (time.Now in production):
	// the live snapshot's TakenAt is on it.
	Now  func() time.Time
	Wall func() time.Time
	Log  *slog.Logger
	// Fleet is how a pass reaches the loop that runs it.
	Fleet Fleet
	// Term is the leader term the controller runs in, stamped on the
	// revisions it records; 0 without leader election.
	Term int64
}

// Fleet is what a pass asks of, or tells, the loop that keeps every
// application: each func names one reason to reach outside the pass. Each
// takes the application, so one Fleet serves every pass on a destination;
// each must be safe for concurrent use. A nil func is a loop that does
// not listen (or knows nothing, for the questions).
type Fleet struct {
	// Applying marks app as writing to the swarm, as its first write starts.
	Applying func(app string)
	// BeginWrite records that a write of app starts and returns the func
	// that records its end; what a later snapshot must show depends on it.
	BeginWrite func(app string) (end func())
	// SeenWrites reports whether a snapshot taken at taken shows every
	// write of app; with ended, the writes still in flight are left out (a
	// wait inside an apply is one of them).
	SeenWrites func(app string, taken time.Time, ended bool) bool
	// LeftUnseen reports whether an application that left the app set
	// wrote after a snapshot taken at taken, or writes still: what it
	// created may be missing from that snapshot, and what a renamed
	// application left behind must not be re-stamped from it.
	LeftUnseen func(taken time.Time) bool
	// Remember keeps rel, the release app renders, for health between
	// passes (see Kept), and refreshes app's health.
	Remember func(app appset.Application, rel stack.Release)
	// RefreshHealth recomputes app's health from what Remember kept.
	RefreshHealth func(app appset.Application)
	// MovedFrom says where else app's release was recorded, "" when nowhere.
	MovedFrom func(app appset.Application) string
	// Gates are prune's safety gates for release of app; ReleaseGates
	// those for a whole release, whose snapshot taken at taken must show
	// every write of its application.
	Gates        func(app, release string) prune.Gates
	ReleaseGates func(owner stack.Owner, taken time.Time) prune.Gates
	// AppNames lists the running app set's applications.
	AppNames func() []string
	// PruneRelease deletes a whole release this controller recorded, then
	// its records (a preview whose branch went).
	PruneRelease func(ctx context.Context, owner stack.Owner, snap swarm.Snapshot, why string)
	// NotePreview tells notifiers' look-ups that app deploys commit as the
	// preview of branch at domain.
	NotePreview func(app, commit, branch, domain string)
	// Newer returns a channel closed once a request that may bring app a
	// newer commit is queued behind the running pass (a webhook, a sync,
	// a tick; not a wake by the swarm): a failing rollout gives way to it.
	Newer func(app string) <-chan struct{}
	// Fence says whether this controller may write now (a replica's
	// leader lease): asked before each step of a write plan; an error
	// stops the write there (ErrFenced).
	Fence func() error
}

// Ask is what whoever started a pass asked of it. The zero value is a
// plain tick: compare, and write only when the application is automated.
type Ask struct {
	// Sync writes even when the application is not automated.
	Sync  bool
	Actor string
	// Revision is a commit to deploy instead of what the application tracks.
	Revision string
	// Prune turns resource pruning on or off; nil keeps the policy.
	Prune *bool
	// Force re-applies every service even when nothing changed.
	Force bool
	// Release marks one release of a release file: no previews.
	Release bool
	// Live marks a wake by the application's own objects on its swarm: git
	// is not asked again (Memo keeps the commit last resolved).
	Live bool
	// Webhook marks a wake by a forge's push webhook.
	Webhook bool
	// Rollback marks a sync back to a revision someone named (skep app
	// rollback, a sync to a revision, a tick of an application held
	// there): a failed rollout of it is never rolled back.
	Rollback bool
	// Canary asks a running canary to be promoted or aborted; "" asks
	// nothing of it.
	Canary CanaryAction
}

// Input is one pass's question and the world as it starts. Its slices are
// the pass's own.
type Input struct {
	App appset.Application
	Ask Ask
	// Now is the one calendar reading of the pass: windows and TTLs.
	Now time.Time
	// Live is the destination's snapshot, taken before any write; the zero
	// value when Env.Live is nil. SeenWrites says it shows every write of
	// the application (see Fleet.SeenWrites).
	Live       swarm.Snapshot
	SeenWrites bool
	// NotReady are the dependsOn entries not synced and healthy yet.
	NotReady []Dependency
	// Previews counts the previews the status lists for the application.
	Previews int
	// Renders are the application's other releases on its swarm, by name,
	// and the generation of the loop's renders (the quiet key).
	Renders Renders
	// AppGen is the generation of the app set the definition was read
	// from; 0 keeps no part of the quiet key between passes.
	AppGen uint64
	// Memo is what the last pass of this release left.
	Memo Memo
	// Held is the application's hold as the loop keeps it (the zero Hold:
	// none): Failed names a commit automated syncs must not apply again.
	Held apply.Hold
}

// Dependency is one application of dependsOn that is not ready, and why.
type Dependency struct{ Name, Why string }

// Renders is what the loop keeps of an application's renders that the
// quiet key reads.
type Renders struct {
	Gen      uint64
	Releases []string // the application's releases on its swarm other than App.Release
}

// Outcome is all a pass found and changed besides the swarm.
type Outcome struct {
	Result Result
	// Err is classed with package outcome; nil when the pass succeeded.
	Err error
	// Memo is what the next pass of this release starts from.
	Memo  Memo
	Found Found
	// Quiet is set when the pass's inputs were those of the last one that
	// found nothing to do: it rendered and compared nothing.
	Quiet bool
	// GitTook is what resolving and fetching took; GitFailed says either
	// failed.
	GitTook   time.Duration
	GitFailed bool
}

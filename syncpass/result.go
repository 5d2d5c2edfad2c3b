package syncpass

import (
	"time"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/window"
)

// Result is what one pass of one release found and did.
type Result struct {
	Commit   string
	Plan     plan.Release
	Applied  bool
	Applying apply.Result
	Recorded *apply.Revision
	// Artifacts are the release artifacts as this pass resolved them.
	Artifacts []artifact.Object
	// Warnings are the render's warnings (options Swarm ignores) and the
	// revision records skipped because they do not decode.
	Warnings []string
	// ApplyTook is what the write took; zero when nothing was written.
	ApplyTook time.Duration
	// Synced is the sync this pass made; Trigger "" when none.
	Synced Sync
	// LiveDrift says the swarm moved and is not corrected (yet).
	LiveDrift bool
	// Moved says, for a release being installed on a new destination,
	// where it was before and what becomes of it there; "" otherwise.
	Moved string
	// Unplaceable says, one line per service, what no node satisfies (see
	// package placement), as the check before a write or a dry run found
	// it; nil when every service can be placed or nothing was checked.
	Unplaceable []string
	// Requeue is how soon the pass asks to run again (a canary's next
	// step or measurement); 0 leaves it to the application's schedule.
	Requeue time.Duration
}

// Sync is one sync that wrote a release: what, who asked and what started it.
type Sync struct {
	Revision string
	Actor    string
	Trigger  Trigger
}

// Trigger says what started a sync. The zero value means no sync.
type Trigger string

// Triggers. Only TriggerSync is someone's request; the others are the
// controller acting on its own.
const (
	// TriggerSync: a sync someone asked for (the API, the CLI, the UI, a
	// rollback); the sync's actor names who.
	TriggerSync Trigger = "sync"
	// TriggerWebhook: a forge's push webhook woke the application and the
	// controller applied what git now holds.
	TriggerWebhook Trigger = "webhook"
	// TriggerGit: the controller's own look at git found a commit other
	// than the one deployed (or none deployed yet) and applied it.
	TriggerGit Trigger = "git"
	// TriggerInterval: the controller's own reconcile (its interval, an
	// app-set change) applied a change that came with no new commit: an
	// artifact's image arrived, or the application's definition changed.
	TriggerInterval Trigger = "interval"
	// TriggerDriftCorrection: the controller put back what was changed on
	// the swarm behind its back (driftDetection: live).
	TriggerDriftCorrection Trigger = "drift-correction"
)

// triggerOf says what started a sync of commit that ask made, recorded
// being the release's revision before it (nil: none).
func triggerOf(ask Ask, recorded *apply.Revision, commit string) Trigger {
	switch {
	case ask.Sync:
		return TriggerSync
	case ask.Webhook:
		return TriggerWebhook
	case recorded == nil || recorded.Commit != commit:
		return TriggerGit
	default:
		return TriggerInterval
	}
}

// Found is what a pass found that the status shows. A nil field was not
// looked at by this pass: the status keeps what an earlier one found.
type Found struct {
	// Window is the sync windows' verdict at Input.Now.
	Window *window.Verdict
	// Findings are the live drift findings of an unchanged release.
	Findings *[]plan.Finding
	// WaitingFor names the dependencies a sync waits for (empty: none).
	WaitingFor *[]string
	// Unmanaged names what sits in the release's namespace without this
	// application's proof of ownership.
	Unmanaged *[]string
	// Previews are the application's previews and why branches have none.
	Previews *Previews
	// Cause is the root cause of the last failed rollout; the zero Cause
	// once a sync succeeded.
	Cause *Cause
	// Held is the hold the pass recorded or lifted (the zero Hold).
	Held *apply.Hold
	// Canary is the release's canary as the pass left it.
	Canary *CanaryStatus
}

// Previews is what a pass found of an application's previews.
type Previews struct {
	Statuses []PreviewStatus
	Problems []string
}

// ptr returns a pointer to a copy of v: a Found field that was looked at.
func ptr[T any](v T) *T { return &v }

package syncpass

import (
	"context"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
)

// Memo is what one release's passes remember from one to the next: what
// was raised once, refusals not to retry, and the caches of a quiet pass.
// It is a value the loop keeps and hands back, never reads; the zero value
// remembers nothing.
type Memo struct {
	notices notices
	// foreign is the last write refused because someone else's objects
	// hold the release: not tried again, nor reported again, until git
	// (its key) or the release's namespace on the swarm changes.
	foreign refusal
	// hookFailed is the last sync a pre-sync hook stopped: not tried
	// again, nor reported again, until git changes or a sync is asked for.
	hookFailed refusal
	// failedRollout is the key (commit and versions) of the last write
	// whose rollout failed and stayed as it was (not rolled back): a pass
	// that finds it healthy after all raises sync-succeeded, once.
	failedRollout string
	// healthyRevision is the number of the release's revision last seen
	// running healthy: after a sync that waited for health, or by a pass
	// of an unchanged release. A rollback goes back to it (lastHealthy).
	healthyRevision int
	// resolved is the commit the last pass that asked git found, for the
	// wakes that do not ask (Ask.Live).
	resolved resolvedCommit
	// quiet is the last pass that found nothing to do, for the next one;
	// templateFailed the last whose chart templates failed.
	quiet          quietTick
	templateFailed templateFailure
	quietInputs    quietInputs
	// rebalanced is the nodes (NodesKey) the last rebalance of the
	// release was judged at: it is judged again once they change.
	rebalanced string
}

// refusal is one write refused by a rule that holds until its key (the
// commit and versions, desired.key) changes. The zero value is none.
type refusal struct {
	key string
	err error
	// namespace is namespaceState as first seen after the refusal;
	// observed says it was.
	namespace string
	observed  bool
}

// holds reports whether r refuses key again: r is set for key, and no
// sync was asked for.
func (r refusal) holds(key string, ask Ask) bool {
	return r.key != "" && r.key == key && !ask.Sync
}

// resolvedCommit is the commit that revision of repo named when git was
// last asked.
type resolvedCommit struct{ repo, revision, commit string }

// known returns the commit a pass of app for ask may take without asking
// git: one resolved before for the same source, when ask is a wake by the
// swarm; "" otherwise.
func (m Memo) known(app appset.Application, ask Ask) string {
	r := m.resolved
	if !ask.Live || ask.Revision != "" || r.repo != app.Source.Repo || r.revision != app.Source.Revision {
		return ""
	}
	return r.commit
}

// Report raises sync-failed for a stalled err of a pass of app that
// reached commit ("" when the revision did not resolve), once per commit
// and again when a sync was asked for; a nil err forgets what was raised,
// so the next stalled commit is raised again. The loop calls it for what
// it reads before any pass (a release file).
func (m *Memo) Report(ctx context.Context, env Env, app appset.Application, sync bool, commit string, err error) {
	if err == nil {
		m.notices.raise(noticeStalled, "")
		return
	}
	if outcome.Of(err) != outcome.Stalled {
		return
	}
	if m.notices.raise(noticeStalled, stalledKey(commit, err)) || sync {
		emit(ctx, env, app, notify.SyncFailed, commit, err.Error())
	}
}

// stalledKey names what a stalled failure is about, so that it is
// reported once: the commit that cannot be rendered, or, when the revision
// did not even resolve to a commit (a deleted branch or tag), the error
// itself. An empty key would read as "nothing reported yet" and never be
// reported (see TestFaultGitServerFailuresChangeNothingAndConverge).
func stalledKey(commit string, err error) string {
	if commit != "" {
		return commit
	}
	return "unresolved: " + err.Error()
}

// noticeKind is a finding that is raised once, not on every pass.
type noticeKind int

// The findings raised once. What makes each raise again is the key the
// pass sees it with, and the passes that forget it (raise with ""):
// TestNoticesAreRaisedOnceAndForgottenByTheirOwnRule names each rule.
const (
	// noticeStalled: a commit that does not resolve or render (key: the
	// commit); forgotten by a pass that renders.
	noticeStalled noticeKind = iota
	// noticeGitDrift: git moved and nothing syncs it (key: commit and
	// versions, with the plan); never forgotten: a new key raises.
	noticeGitDrift
	// noticeWindow: a sync window holds a change (key: commit and
	// versions); forgotten by a pass no window holds, or a requested sync.
	noticeWindow
	// noticeLiveDrift: the swarm moved (key: the findings); forgotten by
	// a pass that finds none, or corrects them.
	noticeLiveDrift
	// noticeRolledBack: Swarm rolled this commit's rollout back (key:
	// commit and versions); never forgotten.
	noticeRolledBack
	// noticeArtifactWait: artifacts wait for their images (key: which and
	// why); forgotten by a pass where none waits.
	noticeArtifactWait
	// noticeWarning: render warnings logged (key: commit, versions and
	// warnings); forgotten by a pass without warnings.
	noticeWarning
	// noticePlacement: a release no node can place (key: commit and
	// versions); forgotten by a pass whose check places it.
	noticePlacement
	noticeKinds
)

// notices holds, per kind, the key the finding was last seen with.
type notices [noticeKinds]string

// raise records key ("" for none) as kind's finding now, and reports
// whether it is one to raise: present, and not the one seen last.
func (n *notices) raise(kind noticeKind, key string) bool {
	was := n[kind]
	n[kind] = key
	return key != "" && key != was
}

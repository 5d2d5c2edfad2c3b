package reconcile

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/preview"
	"github.com/skep-cd/skep/prune"
	"github.com/skep-cd/skep/stack"
)

// PreviewStatus is one preview release of an application as the last
// reconcile saw it.
type PreviewStatus struct {
	Branch  string
	Hash    string
	Release string
	// Commit is the branch head the preview's version comes from.
	Commit string
	Domain string
	// Artifacts are the preview's artifact versions (the branch's for the
	// previewed artifacts, the main release's for the others).
	Artifacts []artifact.Object
	// Health is the preview release's health; Deployed says whether any
	// version of it runs.
	Health   health.State
	Deployed bool
	// Error says why the preview is not at its branch's version: its image
	// is not pushed yet, or the deploy failed.
	Error string
}

// previewName matches the release names of app's previews.
func previewName(release string) *regexp.Regexp {
	return regexp.MustCompile("^" + regexp.QuoteMeta(release) + "-[0-9a-f]{8}$")
}

// previewBranch is one branch with a preview: its head commit per
// previewed artifact.
type previewBranch struct {
	preview.Branch
	commits map[string]string // artifact name → head commit of the branch in its source
}

// reconcilePreviews keeps one preview release per branch of the previewed
// artifacts' sources (service artifacts with preview: true): each renders
// the application at its current commit with the branch's version of those
// artifacts, once the branch's image exists, and is removed when its
// branch goes. Failures are recorded per preview and never fail the main
// release.
func (c *Controller) reconcilePreviews(ctx context.Context, app appset.Application, d desired) {
	if app.Artifacts == nil || c.liveOf(app) == nil {
		return
	}
	cfg := app.Artifacts.Previews
	var previewed []artifact.Object
	for _, o := range d.artifacts {
		if o.Entry.Kind == artifact.Service && o.Entry.Deploy.Preview {
			previewed = append(previewed, o)
		}
	}
	var ignored []string
	if len(previewed) > 0 && !slices.Contains(cfg.Environments, app.Artifacts.Environment) {
		for _, o := range previewed {
			ignored = append(ignored, fmt.Sprintf("artifact %s: preview: true is ignored in environment %s; previews run in %s",
				o.Entry.Name, app.Artifacts.Environment, strings.Join(cfg.Environments, ", ")))
		}
		previewed = nil
	}
	branches, problems := c.previewBranches(ctx, cfg, previewed)
	problems = append(ignored, problems...)
	// Slots are handed out in branch order but kept by the previews that
	// hold one, so a preview's shifted ports never move while it lives.
	var statuses []PreviewStatus
	wanted := map[string]bool{}
	slots := preview.Slots(previewNames(app.Release, branches), c.previewSlots(app))
	for _, b := range branches {
		// One branch's failure is its own: it is recorded in its status and
		// never stops the others nor the main release.
		st := c.deployPreview(ctx, app, d, cfg, b, slots[preview.Name(app.Release, b.Name)])
		if c.expired(ctx, app, cfg, st) {
			c.log.Info("preview expired", "app", app.Name, "release", st.Release, "branch", b.Name, "ttl", cfg.TTL)
			continue
		}
		wanted[st.Release] = true
		statuses = append(statuses, st)
	}
	c.prunePreviews(ctx, app, wanted)
	c.status.Update(app.Name, func(s *AppStatus) {
		s.Previews, s.PreviewProblems = statuses, problems
	})
}

// previewBranches lists the branches previews are made for: for each
// previewed artifact, the branches of its source chosen by cfg, but never
// the default branch nor the branch the artifact tracks. A branch of
// several artifacts' sources is one preview.
func (c *Controller) previewBranches(ctx context.Context, cfg appset.Previews, previewed []artifact.Object) ([]previewBranch, []string) {
	byName := map[string]*previewBranch{}
	var problems []string
	for _, o := range previewed {
		refs, err := c.git.ListRefs(ctx, o.Entry.Source)
		if err != nil {
			problems = append(problems, fmt.Sprintf("artifact %s: list branches of %s: %v", o.Entry.Name, gitsource.RedactURL(o.Entry.Source), err))
			continue
		}
		candidates := refs.Branches()
		if cfg.PullRequests {
			maps.Copy(candidates, refs.PullRequests())
		}
		chosen, over, collisions := preview.Select(candidates, preview.Selection{
			Include: cfg.Branches, Ignore: cfg.Ignore, Max: cfg.Max,
			Exclude: []string{refs.DefaultBranch(), o.Entry.Deploy.Branch},
		})
		for _, err := range collisions {
			problems = append(problems, fmt.Sprintf("artifact %s: %v", o.Entry.Name, err))
		}
		if len(over) > 0 {
			problems = append(problems, fmt.Sprintf("artifact %s: more than %d branches to preview; left out: %s", o.Entry.Name, cfg.Max, strings.Join(over, ", ")))
		}
		for _, b := range chosen {
			pb, ok := byName[b.Name]
			if !ok {
				pb = &previewBranch{Branch: b, commits: map[string]string{}}
				byName[b.Name] = pb
			}
			pb.commits[o.Entry.Name] = b.Commit
		}
	}
	out := make([]previewBranch, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, *byName[name])
	}
	return out, problems
}

// previewNames lists the release names of the previews of branches.
func previewNames(release string, branches []previewBranch) []string {
	out := make([]string, 0, len(branches))
	for _, b := range branches {
		out = append(out, preview.Name(release, b.Name))
	}
	return out
}

// previewSlots reads the port slots the live previews of app hold.
func (c *Controller) previewSlots(app appset.Application) map[string]int {
	out := map[string]int{}
	for _, s := range c.liveOf(app).Current().Services() {
		l := s.Spec.Labels
		if l[stack.LabelController] == c.destOf(app).owner && l[stack.LabelApplication] == app.Name && l[labelPreviewSlot] != "" {
			out[l[stack.LabelRelease]] = preview.SlotOf(l[labelPreviewSlot])
		}
	}
	return out
}

// labelPreviewSlot records a preview's port slot on its services, so the
// slot, and its ports, stay while the preview lives.
const labelPreviewSlot = "io.skep.preview.slot"

// deployPreview renders and, when it changed, applies the preview of one
// branch, and reports what it found.
func (c *Controller) deployPreview(ctx context.Context, app appset.Application, d desired, cfg appset.Previews, b previewBranch, slot int) PreviewStatus {
	name := preview.Name(app.Release, b.Name)
	owner := stack.Owner{Controller: c.destOf(app).owner, Application: app.Name, Release: name}
	st := PreviewStatus{Branch: b.Name, Hash: b.Hash, Release: name, Commit: b.Commit}
	// The previewed artifacts track the branch; the others keep the main
	// release's versions.
	var entries []artifact.Entry
	for _, o := range d.artifacts {
		if _, ok := b.commits[o.Entry.Name]; ok {
			e := o.Entry
			e.Deploy = artifact.Deploy{Branch: b.Name, Preview: true}
			entries = append(entries, e)
		}
	}
	opts := artifact.ResolveOptions{Git: c.git, Current: c.currentVersions(ctx, app, owner, entries), TagTemplate: app.Artifacts.TagTemplate}
	if app.Artifacts.CheckImages {
		opts.Images = c.images
	}
	branchObjs := artifact.Resolve(ctx, entries, opts)
	pd := d
	pd.artifacts = slices.Clone(d.artifacts)
	for _, bo := range branchObjs {
		i := slices.IndexFunc(pd.artifacts, func(o artifact.Object) bool { return o.Entry.Name == bo.Entry.Name })
		pd.artifacts[i] = bo
		if st.Domain == "" {
			st.Domain = preview.Domain(cfg.Domain, preview.DomainVars{Hash: b.Hash, Artifact: bo.Entry.Name,
				Environment: app.Artifacts.Environment, BaseDomain: cfg.BaseDomain, Branch: b.Name})
		}
	}
	st.Artifacts = pd.artifacts
	// No image for the branch yet is a render that waits, as for the main
	// release: a preview never runs a version its registry does not have.
	rel, err := c.renderPreview(ctx, app, pd, owner, b, st.Domain, cfg, slot)
	if err != nil {
		st.Error = err.Error()
		st.Deployed = len(c.releaseServices(ctx, app, name)) > 0
		return st
	}
	snap := c.liveOf(app).Current()
	st.Health, st.Deployed = releaseHealth(rel, snap).State, len(servicesOf(snap, name)) > 0
	recorded, err := apply.LatestRevision(ctx, c.revisionSource(app), owner)
	if err != nil {
		st.Error = fmt.Sprintf("read recorded revision of %s: %v", name, err)
		return st
	}
	var before *stack.Release
	if recorded != nil {
		before = &recorded.Release
	}
	// As for the main release, nothing is written while the render matches
	// what was recorded: a no-op tick makes no Engine write per preview.
	p := plan.Compare(apply.RedactSecrets(rel), before, plan.Options{})
	if !p.Changed() {
		return st
	}
	if err := c.gate(app, rel); err != nil {
		st.Error = err.Error()
		return st
	}
	what := fmt.Sprintf("preview %s of branch %s", name, b.Name)
	if st.Domain != "" {
		what += " (" + st.Domain + ")"
	}
	c.notePreview(app.Name, b.Commit, b.Name, st.Domain)
	c.emit(ctx, app, notify.SyncStarted, b.Commit, what+": "+p.Summary())
	defer c.beginWrite(app.Name)()
	res, err := apply.Apply(ctx, c.engineOf(app), rel, apply.Options{
		Digests:      c.destOf(app).digests,
		Owner:        owner,
		ResolveImage: apply.ResolveImage(app.SyncPolicy.ResolveImage),
		Commit:       b.Commit,
		Actor:        notify.ActorFrom(ctx),
		// Apply adds the release itself; a second "release" would be a
		// duplicate key in JSON logs (TestPreviewPerBranchFollowsItsImageAndGoesWithTheBranch).
		Logger: c.log.With("app", app.Name),
	})
	if err != nil {
		st.Error = fmt.Sprintf("apply %s: %v", what, err)
		c.syncFailed(ctx, app, b.Commit, st.Error)
		return st
	}
	st.Deployed = true
	c.emit(ctx, app, notify.SyncSucceeded, b.Commit, what+": "+applySummary(name, res))
	return st
}

// renderPreview renders the preview release of branch b from the
// application's repository at the main release's commit.
func (c *Controller) renderPreview(ctx context.Context, app appset.Application, pd desired, owner stack.Owner, b previewBranch, domain string, cfg appset.Previews, slot int) (stack.Release, error) {
	tree, err := c.git.Checkout(ctx, pd.source.Repo, pd.commit)
	if err != nil {
		return stack.Release{}, classifyGit(fmt.Errorf("fetch %s at %s: %w", gitsource.RedactURL(pd.source.Repo), gitsource.ShortCommit(pd.commit), err))
	}
	defer tree.Release()
	extra := map[string]string{"PREVIEW_DOMAIN": domain, "PREVIEW_HASH": b.Hash, "PREVIEW_BRANCH": b.Name}
	rel, _, err := c.compose(ctx, app, tree.Dir(), pd, extra, owner)
	if err != nil {
		return stack.Release{}, err
	}
	rel = preview.Make(rel, preview.Options{Name: owner.Release, Branch: b.Branch, Domain: domain,
		Replicas: uint64(max(cfg.Replicas, 1)), PortShift: cfg.PortShift, Slot: slot})
	for name, s := range rel.Services {
		s.Labels[labelPreviewSlot] = fmt.Sprint(slot)
		rel.Services[name] = s
	}
	return rel, nil
}

// expired reports whether a preview outlived cfg.TTL: its branch has not
// moved since its last deploy, longer ago than the TTL.
func (c *Controller) expired(ctx context.Context, app appset.Application, cfg appset.Previews, st PreviewStatus) bool {
	if cfg.TTL <= 0 {
		return false
	}
	owner := stack.Owner{Controller: c.destOf(app).owner, Application: app.Name, Release: st.Release}
	rev, err := apply.LatestRevision(ctx, c.revisionSource(app), owner)
	if err != nil || rev == nil {
		return false
	}
	return rev.Commit == st.Commit && c.now().Sub(rev.AppliedAt) > cfg.TTL
}

// prunePreviews removes every recorded preview of app that is not wanted
// any more (its branch is gone, it expired, or previews were turned off),
// with everything this controller provably created for it.
func (c *Controller) prunePreviews(ctx context.Context, app appset.Application, wanted map[string]bool) {
	snap := c.liveOf(app).Current()
	if snap.ReadFailed() {
		return
	}
	match := previewName(app.Release)
	for _, owner := range c.recordedOwners(c.destOf(app), snap) {
		if owner.Application != app.Name || !match.MatchString(owner.Release) || wanted[owner.Release] {
			continue
		}
		if err := prune.Allowed(c.releaseGates(owner, snap.TakenAt())); err != nil {
			c.log.Warn("preview prune held", "app", app.Name, "release", owner.Release, "err", err)
			continue
		}
		c.pruneRelease(ctx, owner, app.Destination.Swarm, snap, "preview "+owner.Release+" (its branch is gone)")
	}
}

// previewRef is what PreviewAt answers for one deployed commit.
type previewRef struct{ branch, domain string }

// notePreview records that app deploys commit as the preview of branch, so
// a notifier asking about the events it raises is answered even before the
// status lists the preview. Only the latest few per application are kept.
func (c *Controller) notePreview(app, commit, branch, domain string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.previewAt == nil {
		c.previewAt = map[string]previewRef{}
	}
	if len(c.previewAt) > 1000 {
		clear(c.previewAt) // a bound, not a cache policy: old answers are only for late notifiers
	}
	c.previewAt[app+"@"+commit] = previewRef{branch: branch, domain: domain}
}

// PreviewAt reports the branch and domain of the preview application app
// deploys at commit, and false when commit is not deployed as a preview.
// It is safe for concurrent use.
func (c *Controller) PreviewAt(app, commit string) (branch, domain string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.previewAt[app+"@"+commit]
	return r.branch, r.domain, ok
}

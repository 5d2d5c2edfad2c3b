package syncpass

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
	"github.com/skep-cd/skep/swarm"
)

// PreviewStatus is one preview release of an application as the last
// pass saw it.
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

// PreviewName matches the release names of the previews of release.
func PreviewName(release string) *regexp.Regexp {
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
// release. It returns nil when the application has no previews to look at.
func reconcilePreviews(ctx context.Context, env Env, in Input, d desired) *Previews {
	app := in.App
	if app.Artifacts == nil || env.Live == nil {
		return nil
	}
	cfg := app.Artifacts.Previews
	previewed, problems := previewedArtifacts(app, d.artifacts)
	branches, more := previewBranches(ctx, env, cfg, previewed)
	problems = append(problems, more...)
	// Slots are handed out in branch order but kept by the previews that
	// hold one, so a preview's shifted ports never move while it lives.
	var statuses []PreviewStatus
	wanted := map[string]bool{}
	slots := preview.Slots(previewNames(app.Release, branches), previewSlots(env, app, env.Live.Current()))
	for _, b := range branches {
		// One branch's failure is its own: it is recorded in its status and
		// never stops the others nor the main release.
		st := deployPreview(ctx, env, in, d, b, slots[preview.Name(app.Release, b.Name)])
		if expired(ctx, env, in, st) {
			env.Log.Info("preview expired", "app", app.Name, "release", st.Release, "branch", b.Name, "ttl", cfg.TTL)
			continue
		}
		wanted[st.Release] = true
		statuses = append(statuses, st)
	}
	prunePreviews(ctx, env, app, wanted)
	return &Previews{Statuses: statuses, Problems: problems}
}

// previewedArtifacts returns the service artifacts with preview: true, and
// why they are ignored when the application's environment has no previews.
func previewedArtifacts(app appset.Application, objs []artifact.Object) ([]artifact.Object, []string) {
	cfg := app.Artifacts.Previews
	var previewed []artifact.Object
	for _, o := range objs {
		if o.Entry.Kind == artifact.Service && o.Entry.Deploy.Preview {
			previewed = append(previewed, o)
		}
	}
	if len(previewed) == 0 || slices.Contains(cfg.Environments, app.Artifacts.Environment) {
		return previewed, nil
	}
	var ignored []string
	for _, o := range previewed {
		ignored = append(ignored, fmt.Sprintf("artifact %s: preview: true is ignored in environment %s; previews run in %s",
			o.Entry.Name, app.Artifacts.Environment, strings.Join(cfg.Environments, ", ")))
	}
	return nil, ignored
}

// previewBranches lists the branches previews are made for: for each
// previewed artifact, the branches of its source chosen by cfg, but never
// the default branch nor the branch the artifact tracks. A branch of
// several artifacts' sources is one preview.
func previewBranches(ctx context.Context, env Env, cfg appset.Previews, previewed []artifact.Object) ([]previewBranch, []string) {
	byName := map[string]*previewBranch{}
	var problems []string
	for _, o := range previewed {
		refs, err := env.Git.ListRefs(ctx, o.Entry.Source)
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
func previewSlots(env Env, app appset.Application, snap swarm.Snapshot) map[string]int {
	out := map[string]int{}
	for _, s := range snap.Services() {
		l := s.Spec.Labels
		if l[stack.LabelController] == env.Owner && l[stack.LabelApplication] == app.Name && l[labelPreviewSlot] != "" {
			out[l[stack.LabelRelease]] = preview.SlotOf(l[labelPreviewSlot])
		}
	}
	return out
}

// labelPreviewSlot records a preview's port slot on its services, so the
// slot, and its ports, stay while the preview lives.
const labelPreviewSlot = "io.skep.preview.slot"

// deployPreview renders and, when it changed, writes the preview of one
// branch, and reports what it found.
func deployPreview(ctx context.Context, env Env, in Input, d desired, b previewBranch, slot int) PreviewStatus {
	app := in.App
	name := preview.Name(app.Release, b.Name)
	owner := stack.Owner{Controller: env.Owner, Application: app.Name, Release: name}
	st := PreviewStatus{Branch: b.Name, Hash: b.Hash, Release: name, Commit: b.Commit}
	pd := previewDesired(ctx, env, app, d, b, owner, &st)
	// No image for the branch yet is a render that waits, as for the main
	// release: a preview never runs a version its registry does not have.
	rel, err := renderPreview(ctx, env, app, pd, owner, b, st.Domain, slot)
	if err != nil {
		st.Error = err.Error()
		st.Deployed = len(releaseServices(ctx, env, env.look(app.Name), name)) > 0
		return st
	}
	v := env.look(app.Name)
	st.Health, st.Deployed = Health(rel, v.snap).State, len(servicesOf(v.snap, name)) > 0
	// As for the main release, nothing is written while the render matches
	// what was recorded: a no-op tick makes no Engine write per preview.
	p, _, err := compare(ctx, env, v, owner, rel)
	switch why := Rollout(rel, v.snap); {
	case err != nil:
		st.Error = err.Error()
	case !p.Changed():
	case why != "":
		st.Error = rolloutWait(rel.Name, why).Error()
	default:
		writePreview(ctx, env, app, rel, owner, b, p, &st)
	}
	return st
}

// previewDesired is d with the previewed artifacts at branch b's versions
// (the others keep the main release's), and st given its domain and
// artifacts.
func previewDesired(ctx context.Context, env Env, app appset.Application, d desired, b previewBranch, owner stack.Owner, st *PreviewStatus) desired {
	cfg := app.Artifacts.Previews
	var entries []artifact.Entry
	for _, o := range d.artifacts {
		if _, ok := b.commits[o.Entry.Name]; ok {
			e := o.Entry
			e.Deploy = artifact.Deploy{Branch: b.Name, Preview: true}
			entries = append(entries, e)
		}
	}
	opts := artifact.ResolveOptions{Git: env.Git, Current: currentVersions(ctx, env, env.look(app.Name), owner, entries), TagTemplate: app.Artifacts.TagTemplate}
	if app.Artifacts.CheckImages {
		opts.Images = env.Images
	}
	pd := d
	pd.artifacts = slices.Clone(d.artifacts)
	for _, bo := range artifact.Resolve(ctx, entries, opts) {
		i := slices.IndexFunc(pd.artifacts, func(o artifact.Object) bool { return o.Entry.Name == bo.Entry.Name })
		pd.artifacts[i] = bo
		if st.Domain == "" {
			st.Domain = preview.Domain(cfg.Domain, preview.DomainVars{Hash: b.Hash, Artifact: bo.Entry.Name,
				Environment: app.Artifacts.Environment, BaseDomain: cfg.BaseDomain, Branch: b.Name})
		}
	}
	st.Artifacts = pd.artifacts
	return pd
}

// writePreview writes a preview release that changed, raising
// sync-started and sync-succeeded or sync-failed, and records the outcome
// in st.
func writePreview(ctx context.Context, env Env, app appset.Application, rel stack.Release, owner stack.Owner, b previewBranch, p plan.Release, st *PreviewStatus) {
	what := fmt.Sprintf("preview %s of branch %s", owner.Release, b.Name)
	if st.Domain != "" {
		what += " (" + st.Domain + ")"
	}
	if env.Fleet.NotePreview != nil {
		env.Fleet.NotePreview(app.Name, b.Commit, b.Name, st.Domain)
	}
	emit(ctx, env, app, notify.SyncStarted, b.Commit, what+": "+p.Summary())
	defer env.beginWrite(app.Name)()
	res, err := apply.Apply(ctx, env.Engine, rel, apply.Options{
		Digests:      env.Digests,
		Owner:        owner,
		ResolveImage: apply.ResolveImage(app.SyncPolicy.ResolveImage),
		Commit:       b.Commit,
		Actor:        notify.ActorFrom(ctx),
		// Apply adds the release itself; a second "release" would be a
		// duplicate key in JSON logs (TestPreviewPerBranchFollowsItsImageAndGoesWithTheBranch).
		Logger: env.Log.With("app", app.Name),
	})
	if err != nil {
		err = fmt.Errorf("apply %s: %w", what, err)
		st.Error = err.Error()
		syncFailed(ctx, env, app, b.Commit, err)
		return
	}
	st.Deployed = true
	emit(ctx, env, app, notify.SyncSucceeded, b.Commit, what+": "+applySummary(owner.Release, res))
}

// renderPreview renders the preview release of branch b from the
// application's repository at the main release's commit.
func renderPreview(ctx context.Context, env Env, app appset.Application, pd desired, owner stack.Owner, b previewBranch, domain string, slot int) (stack.Release, error) {
	tree, err := env.Git.Checkout(ctx, pd.source.Repo, pd.commit)
	if err != nil {
		return stack.Release{}, classifyGit(fmt.Errorf("fetch %s at %s: %w", gitsource.RedactURL(pd.source.Repo), gitsource.ShortCommit(pd.commit), err))
	}
	defer tree.Release()
	extra := map[string]string{"PREVIEW_DOMAIN": domain, "PREVIEW_HASH": b.Hash, "PREVIEW_BRANCH": b.Name}
	rel, _, err := compose(ctx, env, app, env.look(app.Name), tree.Dir(), pd, extra, owner)
	if err != nil {
		return stack.Release{}, err
	}
	cfg := app.Artifacts.Previews
	rel = preview.Make(rel, preview.Options{Name: owner.Release, Branch: b.Branch, Domain: domain,
		Replicas: uint64(max(cfg.Replicas, 1)), PortShift: cfg.PortShift, Slot: slot})
	for name, s := range rel.Services {
		s.Labels[labelPreviewSlot] = fmt.Sprint(slot)
		rel.Services[name] = s
	}
	return rel, nil
}

// expired reports whether a preview outlived its TTL at in.Now: its branch
// has not moved since its last deploy, longer ago than the TTL.
func expired(ctx context.Context, env Env, in Input, st PreviewStatus) bool {
	ttl := in.App.Artifacts.Previews.TTL
	if ttl <= 0 {
		return false
	}
	owner := stack.Owner{Controller: env.Owner, Application: in.App.Name, Release: st.Release}
	rev, err := apply.LatestRevision(ctx, revisionSource(env, env.look(in.App.Name)), owner)
	if err != nil || rev == nil {
		return false
	}
	return rev.Commit == st.Commit && in.Now.Sub(rev.AppliedAt) > ttl
}

// prunePreviews removes every recorded preview of app that is not wanted
// any more (its branch is gone, it expired, or previews were turned off),
// with everything this controller provably created for it.
func prunePreviews(ctx context.Context, env Env, app appset.Application, wanted map[string]bool) {
	snap := env.Live.Current()
	if snap.ReadFailed() {
		return
	}
	match := PreviewName(app.Release)
	for _, owner := range RecordedOwners(env.Owner, snap) {
		if owner.Application != app.Name || !match.MatchString(owner.Release) || wanted[owner.Release] {
			continue
		}
		if env.Fleet.ReleaseGates != nil {
			if err := prune.Allowed(env.Fleet.ReleaseGates(owner, snap.TakenAt())); err != nil {
				env.Log.Warn("preview prune held", "app", app.Name, "release", owner.Release, "err", err)
				continue
			}
		}
		env.pruneRelease(ctx, owner, snap, "preview "+owner.Release+" (its branch is gone)")
	}
}

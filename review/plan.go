package review

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"reflect"
	"slices"
	"strings"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/wire"
)

// result is the plan of one pull request's head.
type result struct {
	// head is the commit planned, full; the event's head when it could
	// not be fetched.
	head string
	// plans are the applications planned, by name.
	plans []appPlan
	// left names the applications the head's app set no longer declares.
	left []string
}

// appPlan is one application's plan of a head.
type appPlan struct {
	name     string
	proposal wire.Proposal
	releases []plan.Release // the plans that rendered, for the comment's text
}

// target is the application definition a merge would leave, and how the
// pull request reaches it.
type target struct {
	app      appset.Application
	source   bool // the pull request merges into the application's source
	arts     bool // into its artifact files
	redefine bool // the head's app set changes its definition
}

// candidates names, without I/O, the running applications whose source
// or artifact repository pr names, and whether it names the app set's:
// a hint for the answer to the forge, checked with the branches when
// planned.
func (r *Reviewer) candidates(pr api.PullRequest) (apps []string, appSet bool) {
	push := api.Push{Repositories: pr.Repositories}
	for _, a := range r.opts.Controller.Applications() {
		if push.Matches(a.Source.Repo, "") || a.Artifacts != nil && push.Matches(r.artifactsRepo(a), "") {
			apps = append(apps, a.Name)
		}
	}
	return apps, r.opts.AppSet != nil && push.Matches(r.opts.AppSet.Repo, "")
}

// artifactsRepo is where app's artifact files are read, as syncpass reads
// them: their own repository, else the app set's, else the source's.
func (r *Reviewer) artifactsRepo(app appset.Application) string {
	switch {
	case app.Artifacts.Repo != "":
		return app.Artifacts.Repo
	case r.opts.AppSet != nil:
		return r.opts.AppSet.Repo
	}
	return app.Source.Repo
}

// planPull plans each application whose inputs pr's head changes.
func (r *Reviewer) planPull(ctx context.Context, pr api.PullRequest) result {
	running := r.opts.Controller.Applications()
	merges := func(repo, revision string) bool { return r.mergesInto(ctx, pr, repo, revision) }
	appSet := r.opts.AppSet != nil && merges(r.opts.AppSet.Repo, r.opts.AppSet.Revision)
	var targets []target
	for _, a := range running {
		t := target{app: a, source: merges(a.Source.Repo, a.Source.Revision)}
		t.arts = a.Artifacts != nil && merges(r.artifactsRepo(a), a.Artifacts.Revision)
		if t.source || t.arts {
			targets = append(targets, t)
		}
	}
	if len(targets) == 0 && !appSet {
		return result{head: pr.Head}
	}
	repo := r.repoOf(pr, targets)
	head, changed, err := r.changes(ctx, pr, repo)
	if err != nil {
		return failAll(pr.Head, targets, err)
	}
	out := result{head: head}
	if appSet && touches(changed, r.opts.AppSet.Path) {
		defs, left, err := r.headAppSet(ctx, head, running)
		if err != nil {
			return failAll(head, targets, err)
		}
		out.left = left
		targets = retarget(defs, running, merges, r.artifactsRepo)
	}
	for _, t := range targets {
		artsInSource := t.app.Artifacts != nil && api.RepoKey(r.artifactsRepo(t.app)) == api.RepoKey(t.app.Source.Repo)
		if !t.redefine && !touchesApp(t, changed, artsInSource) {
			continue
		}
		out.plans = append(out.plans, r.planApp(ctx, pr, head, repo, t, running))
	}
	slices.SortFunc(out.plans, func(a, b appPlan) int { return strings.Compare(a.name, b.name) })
	return out
}

// mergesInto reports whether pr merges into revision of repo: its
// repository, and its base branch (the default branch for an application
// that tracks "HEAD", which is asked of git).
func (r *Reviewer) mergesInto(ctx context.Context, pr api.PullRequest, repo, revision string) bool {
	if !(api.Push{Repositories: pr.Repositories}).Matches(repo, "") {
		return false
	}
	if revision == "" || revision == "HEAD" {
		refs, err := r.opts.Git.ListRefs(ctx, repo)
		return err == nil && refs.DefaultBranch() == pr.Base
	}
	return api.RefMatches(revision, "refs/heads/"+pr.Base)
}

// repoOf is the spelling of pr's repository the controller reads it by.
func (r *Reviewer) repoOf(pr api.PullRequest, targets []target) string {
	for _, t := range targets {
		if t.source {
			return t.app.Source.Repo
		}
	}
	for _, t := range targets {
		if t.arts {
			return r.artifactsRepo(t.app)
		}
	}
	return r.opts.AppSet.Repo
}

// changes brings pr's head into the clone of repo and lists the paths it
// changes since it left the base; nil paths with no error means too many
// to list (everything is treated as changed).
func (r *Reviewer) changes(ctx context.Context, pr api.PullRequest, repo string) (string, []string, error) {
	head, err := r.fetchHead(ctx, pr, repo)
	if err != nil {
		return "", nil, err
	}
	base, err := r.opts.Git.Resolve(ctx, repo, pr.Base)
	if err != nil {
		return head, nil, fmt.Errorf("base branch %s: %w", pr.Base, err)
	}
	changed, err := r.opts.Git.Changed(ctx, repo, base, head)
	if errors.Is(err, gitsource.ErrTooLarge) {
		return head, nil, nil
	}
	if changed == nil {
		changed = []string{}
	}
	return head, changed, err
}

// fetchHead brings pr's head into the clone of repo, from the base
// repository only: the ref the forge keeps of it there, else (not a fork)
// the commit on its branch. It returns the commit, which is the ref's now
// when it moved since the event.
func (r *Reviewer) fetchHead(ctx context.Context, pr api.PullRequest, repo string) (string, error) {
	if pr.Ref != "" {
		head, err := r.opts.Git.FetchRef(ctx, repo, pr.Ref)
		if err == nil && !sameCommit(head, pr.Head) {
			// The refs were listed before the push the event reports.
			r.opts.Git.Forget(repo)
			head, err = r.opts.Git.FetchRef(ctx, repo, pr.Ref)
		}
		if !errors.Is(err, gitsource.ErrRevisionNotFound) {
			return head, err
		}
	}
	if pr.Fork {
		return "", fmt.Errorf("the head %s of a pull request from a fork is not in %s: the forge keeps no ref of it there", gitsource.ShortCommit(pr.Head), gitsource.RedactURL(repo))
	}
	return r.opts.Git.Resolve(ctx, repo, pr.Head)
}

// touches reports whether a changed path is dir or under it; "" and "."
// are the whole repository, and nil changes (too many) touch everything.
func touches(changed []string, dirs ...string) bool {
	if changed == nil {
		return true
	}
	for _, d := range dirs {
		d = strings.Trim(path.Clean("/"+d), "/")
		if d == "" {
			return true
		}
		if slices.ContainsFunc(changed, func(p string) bool { return p == d || strings.HasPrefix(p, d+"/") }) {
			return true
		}
	}
	return false
}

// touchesApp reports whether the changed paths touch t's inputs in the
// pull request's repository: the compose directory, or the chart and its
// values files (a release file may name any chart: it is always planned),
// and the artifact environment.
func touchesApp(t target, changed []string, artsInSource bool) bool {
	a := t.app
	if t.source {
		switch {
		case a.Chart == nil:
			if touches(changed, a.Source.Path) {
				return true
			}
		case a.Chart.Releases != "":
			return true
		default:
			if a.Chart.Path != "" && touches(changed, a.Chart.Path) || touches(changed, a.Chart.Values...) && len(a.Chart.Values) > 0 {
				return true
			}
		}
	}
	if (t.arts || t.source && artsInSource) && a.Artifacts != nil {
		return touches(changed, path.Join(a.Artifacts.Path, a.Artifacts.Environment))
	}
	return false
}

// planApp plans one application at head: its source at head when the pull
// request merges into it, its artifact files at head when they are in the
// pull request (not a fork's, which could name any repository), sealed for
// a fork.
func (r *Reviewer) planApp(ctx context.Context, pr api.PullRequest, head, repo string, t target, running []appset.Application) appPlan {
	a := t.app
	out := appPlan{name: a.Name, proposal: wire.Proposal{Application: a.Name, Sealed: pr.Fork, Releases: []wire.ProposedRelease{}}}
	if pr.Fork && t.redefine {
		if err := readsOnlyKnown(a, running, r); err != nil {
			return failed(out, a.Release, err)
		}
	}
	if pr.Fork && t.arts && !t.source && !t.redefine {
		return failed(out, a.Release, errors.New("a pull request from a fork is not planned for its artifact files: they name repositories and registries the controller would reach with its credentials; merged, they deploy as usual"))
	}
	commit := ""
	if t.source {
		commit = head
		if a.Source.Repo != repo && pr.Ref != "" {
			// Another spelling may be another clone: the head must be in it.
			if _, err := r.opts.Git.FetchRef(ctx, a.Source.Repo, pr.Ref); err != nil && !errors.Is(err, gitsource.ErrRevisionNotFound) {
				return failed(out, a.Release, err)
			}
		}
	}
	if t.arts && !pr.Fork {
		arts := *a.Artifacts
		arts.Revision = head
		a.Artifacts = &arts
	}
	proposed := r.opts.Controller.Propose(ctx, a, reconcile.Proposal{Commit: commit, Sealed: pr.Fork})
	if pr.Fork {
		proposed = r.withoutSealing(ctx, a, proposed)
	}
	return fill(out, proposed)
}

// withoutSealing takes out of sealed plans what sealing alone changes: an
// encrypted value stands in by a digest of its ciphertext, never equal to
// the recorded digest of its plain value, so every encrypted secret and
// value would read as changed. The commit the swarm runs, rendered sealed
// as well, shows exactly those changes where the head left the ciphertext
// alone; they go, and what the head re-encrypted stays.
func (r *Reviewer) withoutSealing(ctx context.Context, app appset.Application, proposed []reconcile.Proposed) []reconcile.Proposed {
	byCommit := map[string][]reconcile.Proposed{}
	for i, p := range proposed {
		rec := p.Result.Recorded
		if p.Err != nil || rec == nil || rec.Commit == "" || !p.Result.Plan.Changed() {
			continue
		}
		if _, ok := byCommit[rec.Commit]; !ok {
			byCommit[rec.Commit] = r.opts.Controller.Propose(ctx, app, reconcile.Proposal{Commit: rec.Commit, Sealed: true})
		}
		for _, base := range byCommit[rec.Commit] {
			if base.Release == p.Release && base.Err == nil {
				proposed[i].Result.Plan = withPairs(p.Result.Plan, p.Result.Plan.Without(sealingOf(base.Result.Plan)))
			}
		}
	}
	return proposed
}

// withPairs is kept, a part of the plan all, with the deletion of each
// secret whose new content kept creates: the two halves of one change.
func withPairs(all, kept plan.Release) plan.Release {
	created := map[string]bool{}
	for _, c := range kept.Changes {
		if c.Kind == plan.KindSecret && c.Op == plan.Create {
			created[contentSuffix.ReplaceAllString(c.Name, "")] = true
		}
	}
	out := kept
	out.Changes = nil
	for _, c := range all.Changes {
		paired := c.Kind == plan.KindSecret && c.Op == plan.Delete && created[contentSuffix.ReplaceAllString(c.Name, "")]
		i := slices.IndexFunc(kept.Changes, func(k plan.Change) bool { return k.Kind == c.Kind && k.Name == c.Name && k.Op == c.Op })
		switch {
		case i >= 0:
			out.Changes = append(out.Changes, kept.Changes[i])
		case paired:
			out.Changes = append(out.Changes, c)
		}
	}
	if out.Changes == nil {
		out.Changes = []plan.Change{}
	}
	return out
}

// sealingOf keeps of a sealed plan what sealing can change: secrets, a
// service's references to them, and masked values.
func sealingOf(p plan.Release) plan.Release {
	out := plan.Release{Name: p.Name, Action: p.Action}
	for _, c := range p.Changes {
		switch {
		case c.Kind == plan.KindSecret:
			out.Changes = append(out.Changes, c)
		case c.Op == plan.Update:
			c.Fields = slices.DeleteFunc(slices.Clone(c.Fields), func(f plan.FieldDiff) bool {
				return !strings.Contains(f.Path, ".Secrets[") && !strings.Contains(f.Old+f.New, "(sops:")
			})
			if len(c.Fields) > 0 {
				out.Changes = append(out.Changes, c)
			}
		}
	}
	return out
}

// fill adds each release's plan or error to out.
func fill(out appPlan, proposed []reconcile.Proposed) appPlan {
	for _, p := range proposed {
		out.proposal.Revision = p.Result.Commit
		rel := wire.ProposedRelease{ReleasePlan: api.PlanView(p.Result.Plan)}
		rel.Name = p.Release
		if p.Err != nil {
			rel.Error = p.Err.Error()
			if out.proposal.Error == "" {
				out.proposal.Error = located(rel.Error)
			}
		} else {
			out.releases = append(out.releases, p.Result.Plan)
			out.proposal.Changes += len(p.Result.Plan.Changes)
		}
		out.proposal.Releases = append(out.proposal.Releases, rel)
	}
	return out
}

// failed is out with err as release's error.
func failed(out appPlan, release string, err error) appPlan {
	return fill(out, []reconcile.Proposed{{Release: release, Err: err}})
}

// failAll is the result of a head that could not be read: each target
// fails with err.
func failAll(head string, targets []target, err error) result {
	out := result{head: head}
	for _, t := range targets {
		p := appPlan{name: t.app.Name, proposal: wire.Proposal{Application: t.app.Name, Releases: []wire.ProposedRelease{}}}
		out.plans = append(out.plans, failed(p, t.app.Release, err))
	}
	return out
}

// headAppSet reads the app set at head and returns the definitions a merge
// would leave (a generated application keeps its running definition: its
// generator reads other directories) and the applications it drops.
func (r *Reviewer) headAppSet(ctx context.Context, head string, running []appset.Application) ([]appset.Application, []string, error) {
	src := r.opts.AppSet
	tree, err := r.opts.Git.Checkout(ctx, src.Repo, head)
	if err != nil {
		return nil, nil, fmt.Errorf("app set at %s: %w", gitsource.ShortCommit(head), err)
	}
	defer tree.Release()
	root, err := os.OpenRoot(tree.Dir())
	if err != nil {
		return nil, nil, fmt.Errorf("app set at %s: %w", gitsource.ShortCommit(head), err)
	}
	defer root.Close()
	files, err := appset.ReadFiles(root.FS(), cmp.Or(src.Path, "."))
	if err != nil {
		return nil, nil, fmt.Errorf("app set at %s: %w", gitsource.ShortCommit(head), err)
	}
	set, err := appset.ParseFiles(files)
	if err != nil {
		return nil, nil, fmt.Errorf("app set at %s: %w", gitsource.ShortCommit(head), err)
	}
	defs := set.Applications()
	var left []string
	for _, a := range running {
		_, declared := set.Lookup(a.Name)
		switch {
		case a.Generator != "" && !declared:
			defs = append(defs, a)
		case !declared:
			left = append(left, a.Name)
		}
	}
	return defs, left, nil
}

// retarget turns the head's definitions into targets: those the pull
// request merges into, and those whose definition it changes.
func retarget(defs, running []appset.Application, merges func(repo, revision string) bool, artsRepo func(appset.Application) string) []target {
	var out []target
	for _, a := range defs {
		t := target{app: a, source: merges(a.Source.Repo, a.Source.Revision)}
		t.arts = a.Artifacts != nil && merges(artsRepo(a), a.Artifacts.Revision)
		i := slices.IndexFunc(running, func(r appset.Application) bool { return r.Name == a.Name })
		t.redefine = i < 0 || !reflect.DeepEqual(running[i], a)
		if t.source || t.arts || t.redefine {
			out = append(out, t)
		}
	}
	return out
}

// readsOnlyKnown refuses a definition from a fork that would make the
// controller read a repository (git or chart) the running app set does not
// name: it would read it with the controller's credentials, and show what
// it read in the plan.
func readsOnlyKnown(a appset.Application, running []appset.Application, r *Reviewer) error {
	known := map[string]bool{}
	add := func(u string) {
		if k := api.RepoKey(u); k != "" {
			known[k] = true
		}
	}
	if r.opts.AppSet != nil {
		add(r.opts.AppSet.Repo)
	}
	for _, k := range running {
		add(k.Source.Repo)
		if k.Artifacts != nil {
			add(r.artifactsRepo(k))
		}
		if k.Chart != nil {
			add(k.Chart.Repo)
		}
	}
	repos := []string{a.Source.Repo}
	if a.Artifacts != nil {
		repos = append(repos, r.artifactsRepo(a))
	}
	if a.Chart != nil && a.Chart.Repo != "" {
		repos = append(repos, a.Chart.Repo)
	}
	for _, u := range repos {
		if !known[api.RepoKey(u)] {
			return fmt.Errorf("a pull request from a fork may not make the controller read %s, which the running app set does not name", gitsource.RedactURL(u))
		}
	}
	return nil
}

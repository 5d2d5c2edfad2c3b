package review_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/review"
)

// fakeController plans nothing itself: it records what it was asked to
// propose and answers one release without changes.
type fakeController struct {
	apps []appset.Application

	mu    sync.Mutex
	asked []proposal
}

// proposal is one Propose call.
type proposal struct {
	app appset.Application
	p   reconcile.Proposal
}

func (f *fakeController) ID() string                         { return "ctl" }
func (f *fakeController) Applications() []appset.Application { return slices.Clone(f.apps) }

func (f *fakeController) Propose(_ context.Context, app appset.Application, p reconcile.Proposal) []reconcile.Proposed {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, proposal{app: app, p: p})
	return []reconcile.Proposed{{Release: app.Release, Result: reconcile.Result{Commit: p.Commit,
		Plan: plan.Release{Name: app.Release, Action: plan.Unchanged, Changes: []plan.Change{}}}}}
}

func (f *fakeController) proposals() []proposal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked)
}

// rig is a reviewer over a real git server and a fake controller.
type rig struct {
	repo *harness.Repo
	ctrl *fakeController
	r    *review.Reviewer
	run  func() // starts the worker
}

func newRig(t *testing.T, opts review.Options, files map[string]string, apps func(repo string) []appset.Application) *rig {
	t.Helper()
	git := harness.StartGitServer(t, harness.GitServerOptions{})
	g := &rig{repo: git.CreateRepo(t, "shop")}
	g.repo.Commit(t, "main", files)
	g.ctrl = &fakeController{apps: apps(g.repo.URL)}
	cache, err := gitsource.New(gitsource.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	opts.Controller, opts.Git, opts.Logger = g.ctrl, cache, slog.New(slog.NewTextHandler(t.Output(), nil))
	if opts.AppSet != nil {
		opts.AppSet.Repo = g.repo.URL
	}
	if g.r, err = review.New(opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan struct{})
	g.run = func() { go func() { defer close(done); g.r.Run(ctx) }() }
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the reviewer did not stop")
		}
	})
	return g
}

// webApp is the application of the shop's compose directory.
func webApp(repo string) []appset.Application {
	return []appset.Application{{Name: "web", Release: "web", Source: appset.AppSource{Repo: repo, Revision: "main", Path: "."}}}
}

// event is pull request number's event at head, kept as refs/pull/N/head.
func (g *rig) event(t *testing.T, action api.PullAction, number int64, branch string, fork bool) api.PullRequest {
	t.Helper()
	head := g.repo.Head(t, branch)
	g.repo.SetRef(t, fmt.Sprintf("refs/pull/%d/head", number), head)
	return api.PullRequest{Provider: "github", Action: action, Number: number, Repository: "acme/shop", Repositories: []string{g.repo.URL},
		Base: "main", Branch: branch, Head: head, Ref: fmt.Sprintf("refs/pull/%d/head", number), Fork: fork}
}

// waitPlanned waits until the worker planned pull request number at head.
func (g *rig) waitPlanned(t *testing.T, number int64, head string) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		pulls, err := g.r.PullRequests("web")
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pulls {
			if p.Number == number && p.Plan != nil && p.Plan.Revision == head {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", pulls)
	})
}

// A storm of force-pushes queued while the worker is busy is one plan of
// the last head; a head already planned is not planned again, whatever
// event names it; and the queue holds at most Queue pull requests.
func TestAForcePushStormPlansEachHeadOnce(t *testing.T) {
	g := newRig(t, review.Options{Queue: 2}, map[string]string{"compose.yaml": "services: {}\n"}, webApp)
	var last api.PullRequest
	for i := range 20 {
		g.repo.CreateBranch(t, fmt.Sprintf("push-%d", i), "main")
		g.repo.Commit(t, fmt.Sprintf("push-%d", i), map[string]string{"compose.yaml": fmt.Sprintf("services: {} # %d\n", i)})
		last = g.event(t, api.PullSynchronized, 1, fmt.Sprintf("push-%d", i), false)
		if apps, err := g.r.Review(last); err != nil || !slices.Equal(apps, []string{"web"}) {
			t.Fatalf("Review = %v, %v", apps, err)
		}
	}
	if _, err := g.r.Review(g.event(t, api.PullOpened, 2, "main", false)); err != nil {
		t.Fatalf("a second pull request: %v", err)
	}
	if _, err := g.r.Review(g.event(t, api.PullOpened, 3, "main", false)); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("a third pull request past Queue 2 = %v, want ErrUnavailable", err)
	}
	g.run()
	g.waitPlanned(t, 1, last.Head)
	g.waitPlanned(t, 2, g.repo.Head(t, "main"))
	if got := g.ctrl.proposals(); len(got) != 2 || got[0].p.Commit != last.Head {
		t.Fatalf("proposals = %+v, want one per pull request, #1 at its last head %s", got, last.Head)
	}
	// A redelivery, a reopen and a label name the head planned already.
	for _, action := range []api.PullAction{api.PullSynchronized, api.PullReopened} {
		if _, err := g.r.Review(g.event(t, action, 1, "push-19", false)); err != nil {
			t.Fatal(err)
		}
	}
	g.repo.Commit(t, "push-19", map[string]string{"compose.yaml": "services: {} # new\n"})
	next := g.event(t, api.PullSynchronized, 1, "push-19", false)
	if _, err := g.r.Review(next); err != nil {
		t.Fatal(err)
	}
	g.waitPlanned(t, 1, next.Head)
	if got := g.ctrl.proposals(); len(got) != 3 {
		t.Errorf("proposals = %d, want 3: the same head is planned once", len(got))
	}
}

// A fork's head is fetched from the base repository's ref of it and
// planned sealed; its artifact files are the tracked ones, not its own.
func TestAForksHeadIsPlannedSealedWithTheTrackedArtifacts(t *testing.T) {
	apps := func(repo string) []appset.Application {
		a := webApp(repo)
		a[0].Artifacts = &appset.Artifacts{Revision: "main", Path: "artifacts", Environment: "testing"}
		return a
	}
	g := newRig(t, review.Options{}, map[string]string{"compose.yaml": "services: {}\n", "artifacts/testing/web.yaml": "x: 1\n"}, apps)
	g.repo.CreateBranch(t, "stranger", "main")
	g.repo.Commit(t, "stranger", map[string]string{"compose.yaml": "services: {a: {image: a}}\n", "artifacts/testing/web.yaml": "x: 2\n"})
	pr := g.event(t, api.PullOpened, 4, "stranger", true)
	g.repo.DeleteBranch(t, "stranger") // only the pull request's ref reaches it now, as a fork's
	g.run()
	if _, err := g.r.Review(pr); err != nil {
		t.Fatal(err)
	}
	g.waitPlanned(t, 4, pr.Head)
	got := g.ctrl.proposals()
	if len(got) != 1 || !got[0].p.Sealed || got[0].p.Commit != pr.Head || got[0].app.Artifacts.Revision != "main" {
		t.Fatalf("proposals = %+v, want one sealed at the fork's head with the artifacts as tracked", got)
	}
	// The same head from the base repository's own branch reads its
	// artifact files at the head.
	g.repo.CreateBranch(t, "own", pr.Head)
	own := g.event(t, api.PullOpened, 5, "own", false)
	if _, err := g.r.Review(own); err != nil {
		t.Fatal(err)
	}
	g.waitPlanned(t, 5, own.Head)
	if got := g.ctrl.proposals(); len(got) != 2 || got[1].p.Sealed || got[1].app.Artifacts.Revision != own.Head {
		t.Errorf("proposal of the base's own branch = %+v, want unsealed with the artifacts at the head", got[1:])
	}
}

// A pull request into the app set's repository plans the definitions of
// its head; a fork's new definition may not name a repository the running
// set does not, and one touching nothing of an application is not planned.
func TestTheAppSetAtTheHeadDefinesWhatIsPlanned(t *testing.T) {
	set := "apiVersion: skep/v1\napplications:\n  - name: web\n    release: web\n    source: {repo: %s, revision: main, path: web}\n    syncPolicy: {automated: false}\n%s"
	var running []appset.Application
	apps := func(repo string) []appset.Application {
		s, err := appset.Parse("apps.yaml", fmt.Appendf(nil, set, repo, ""))
		if err != nil {
			t.Fatal(err)
		}
		running = s.Applications()
		return running
	}
	g := newRig(t, review.Options{AppSet: &review.AppSet{Revision: "main", Path: "apps.yaml"}},
		map[string]string{"web/compose.yaml": "services: {}\n", "docs/README": "x\n", "apps.yaml": "placeholder"}, apps)
	g.repo.Commit(t, "main", map[string]string{"apps.yaml": fmt.Sprintf(set, g.repo.URL, "")})
	g.run()

	g.repo.CreateBranch(t, "docs", "main")
	g.repo.Commit(t, "docs", map[string]string{"docs/README": "y\n"})
	docs := g.event(t, api.PullOpened, 6, "docs", false)
	if _, err := g.r.Review(docs); err != nil {
		t.Fatal(err)
	}

	g.repo.CreateBranch(t, "vars", "main")
	g.repo.Commit(t, "vars", map[string]string{"apps.yaml": fmt.Sprintf(set, g.repo.URL, "")[:0] +
		fmt.Sprintf("apiVersion: skep/v1\napplications:\n  - name: web\n    release: web\n    source: {repo: %s, revision: main, path: web, variables: {TAG: v2}}\n    syncPolicy: {automated: false}\n", g.repo.URL)})
	vars := g.event(t, api.PullOpened, 7, "vars", false)
	if _, err := g.r.Review(vars); err != nil {
		t.Fatal(err)
	}
	g.waitPlanned(t, 7, vars.Head)
	got := g.ctrl.proposals()
	if len(got) != 1 || got[0].app.Source.Variables["TAG"] != "v2" {
		t.Fatalf("proposals = %+v, want web once, with the head's variables (the docs change plans nothing)", got)
	}

	g.repo.CreateBranch(t, "steal", "main")
	g.repo.Commit(t, "steal", map[string]string{"apps.yaml": fmt.Sprintf(set, g.repo.URL,
		"  - name: loot\n    release: loot\n    source: {repo: https://git.example.org/private/secrets.git, revision: main}\n")})
	steal := g.event(t, api.PullOpened, 8, "steal", true)
	if _, err := g.r.Review(steal); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		pulls, _ := g.r.PullRequests("web")
		for _, p := range pulls {
			if p.Number == 8 && p.State == "planned" {
				return true, ""
			}
		}
		return false, fmt.Sprint(pulls)
	})
	for _, p := range g.ctrl.proposals() {
		if p.app.Name == "loot" {
			t.Errorf("a fork's new application naming an unknown repository was proposed: %+v", p)
		}
	}
}

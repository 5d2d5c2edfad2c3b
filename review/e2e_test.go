package review_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/review"
	skepswarm "github.com/skep-cd/skep/swarm"
	"github.com/skep-cd/skep/wire"
)

const (
	hookSecret    = "pr-hook-secret"
	deployerToken = "deployer-token"
)

// shop is one test's controller on the real swarm, its API, its reviewer
// and the forge it posts to.
type shop struct {
	cli        *client.Client
	ns         string
	repo       *harness.Repo
	api        *httptest.Server
	forge      *fakeGitHub
	ctrl       *reconcile.Controller
	v1, v2     string
	deliveries atomic.Int64
}

// composeOf is the shop's compose file: one service on image at replicas,
// with a secret from a file of the repository.
func composeOf(image string, replicas int) string {
	return fmt.Sprintf(`services:
  web:
    image: %s
    secrets: [db_password]
    deploy:
      endpoint_mode: dnsrr
      replicas: %d
secrets:
  db_password:
    file: ./db-password.txt
`, image, replicas)
}

// startShop deploys the shop (automated) from a real git server and
// serves the API with a reviewer posting to a local forge.
func startShop(t *testing.T) *shop {
	t.Helper()
	cli := harness.RequireSwarm(t)
	git := harness.StartGitServer(t, harness.GitServerOptions{})
	s := &shop{cli: cli, ns: harness.Name(t, "pr"), forge: newFakeGitHub(t),
		v1: harness.TestImage(t, cli, harness.ImageOptions{Version: "v1"}),
		v2: harness.TestImage(t, cli, harness.ImageOptions{Version: "v2"})}
	harness.CleanupStack(t, cli, s.ns)
	s.repo = git.CreateRepo(t, "shop")
	s.repo.Commit(t, "main", map[string]string{"compose.yaml": composeOf(s.v1, 1), "db-password.txt": "s3cret-one\n", "README.md": "The shop.\n"})
	apps := fmt.Sprintf(`apiVersion: skep/v1
applications:
  - name: web
    release: %s
    source: {repo: %s, revision: main}
    syncPolicy: {automated: true, interval: 1h, resolveImage: never}
`, s.ns, s.repo.URL)
	appsFile := filepath.Join(t.TempDir(), "apps.yaml")
	if err := os.WriteFile(appsFile, []byte(apps), 0o644); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	cache, err := gitsource.New(gitsource.Options{Dir: t.TempDir(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := skepswarm.Connect(t.Context(), skepswarm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close() })
	s.ctrl, err = reconcile.New(reconcile.Options{ControllerID: harness.Name(t, "ctl"), AppSet: appset.FileSource{Path: appsFile},
		AppSetInterval: time.Hour, Git: cache, Destinations: map[string]reconcile.Remote{"": {Engine: engine, Live: skepswarm.NewWatcher(engine, skepswarm.WatcherOptions{Logger: logger})}}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	forge, err := notify.NewForge(notify.ForgeOptions{Name: "github", Provider: notify.GitHub, URL: s.forge.URL, Token: forgeToken,
		Repositories: map[string]string{"web": "acme/shop"}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	reviews, err := review.New(review.Options{Controller: s.ctrl, Git: cache, Forges: []review.Forge{forge}, UI: "https://skep.example.org", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := api.NewWebhooks([]api.WebhookSpec{{Provider: api.ProviderGitHub, Secret: wire.NewToken(hookSecret)}}, api.WebhooksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := api.NewTokens(api.TokenSpec{Name: "ci", Role: api.RoleDeployer, Digest: wire.NewToken(deployerToken).Digest()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Reconciler: api.NewController(s.ctrl), Authorizer: tokens, Webhooks: hooks, Reviews: reviews, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); _ = s.ctrl.Run(ctx) }()
	go func() { defer wg.Done(); srv.Run(ctx) }()
	go func() { defer wg.Done(); reviews.Run(ctx) }()
	s.api = httptest.NewServer(srv)
	t.Cleanup(func() {
		s.api.Close()
		cancel()
		wg.Wait()
	})
	main := s.repo.Head(t, "main")
	harness.Eventually(t, 2*time.Minute, func(context.Context) (bool, string) {
		st, _ := s.ctrl.Statuses().Get("web")
		return st.DeployedRevision == main, fmt.Sprintf("deployed %q, sync %s, error %s", st.DeployedRevision, st.Sync, st.LastError)
	})
	return s
}

// pullRequest is a GitHub pull_request event in its documented shape.
func (s *shop) pullRequest(t *testing.T, action string, number int64, branch, head string, merged bool) []byte {
	t.Helper()
	repo := map[string]any{"id": 42, "name": "shop", "full_name": "acme/shop", "private": false,
		"html_url": "https://github.example.org/acme/shop", "clone_url": s.repo.URL, "ssh_url": "git@github.example.org:acme/shop.git",
		"default_branch": "main"}
	body, _ := json.Marshal(map[string]any{
		"action": action, "number": number,
		"pull_request": map[string]any{
			"url": fmt.Sprintf("https://api.github.example.org/repos/acme/shop/pulls/%d", number), "id": 1000 + number, "number": number,
			"state": map[bool]string{true: "closed", false: "open"}[action == "closed"], "title": "Change " + branch,
			"html_url": fmt.Sprintf("https://github.example.org/acme/shop/pull/%d", number), "merged": merged,
			"head": map[string]any{"label": "acme:" + branch, "ref": branch, "sha": head, "repo": headRepo(repo, branch)},
			"base": map[string]any{"label": "acme:main", "ref": "main", "sha": s.repo.Head(t, "main"), "repo": repo},
		},
		"repository": repo,
		"sender":     map[string]any{"login": "octocat", "id": 1},
	})
	return body
}

// headRepo is the repository a branch comes from: a stranger's fork for
// a branch named fork-…, else the base repository.
func headRepo(base map[string]any, branch string) map[string]any {
	if !strings.HasPrefix(branch, "fork-") {
		return base
	}
	return map[string]any{"id": 99, "name": "shop", "full_name": "stranger/shop", "fork": true,
		"html_url": "https://github.example.org/stranger/shop", "clone_url": "https://github.example.org/stranger/shop.git"}
}

// deliver posts a pull_request event signed with secret and returns the
// answer's status and body.
func (s *shop) deliver(t *testing.T, body []byte, secret string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", s.api.URL+"/api/v1/webhooks/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("delivery-%d", s.deliveries.Add(1)))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(api.Sign(body, wire.NewToken(secret))))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}

// open opens (or synchronizes) pull request number at branch's head,
// which the forge keeps as refs/pull/<number>/head, and waits until the
// forge has its head's statuses.
func (s *shop) open(t *testing.T, action string, number int64, branch string) string {
	t.Helper()
	head := s.repo.Head(t, branch)
	s.repo.SetRef(t, fmt.Sprintf("refs/pull/%d/head", number), head)
	if code, answer := s.deliver(t, s.pullRequest(t, action, number, branch, head, false), hookSecret); code != http.StatusAccepted {
		t.Fatalf("pull request delivery = %d %s, want 202", code, answer)
	}
	harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		got := s.forge.statuses(head)
		return len(got) > 0, fmt.Sprintf("statuses of %s: %v", head, got)
	})
	return head
}

// onlyStatus returns the one status set on head, failing otherwise.
func (s *shop) onlyStatus(t *testing.T, head string) map[string]any {
	t.Helper()
	got := s.forge.statuses(head)
	if len(got) != 1 {
		t.Fatalf("statuses of %s = %v, want one", head, got)
	}
	return got[0]
}

func TestPullRequestsArePlannedAgainstTheSwarmAndPostedToTheForge(t *testing.T) {
	s := startShop(t)
	marker := "<!-- skep-plan:"

	var firstHead string
	var commentID int64
	t.Run("a tag and a replica count changed: both in the comment, for the release, and a success", func(t *testing.T) {
		s.repo.Commit(t, "feature", map[string]string{"compose.yaml": composeOf(s.v2, 2)})
		firstHead = s.open(t, "opened", 1, "feature")
		want := map[string]any{"state": "success", "context": "skep/plan/web", "description": "1 change",
			"target_url": "https://skep.example.org/#/app/web/pulls"}
		if got := s.onlyStatus(t, firstHead); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("status = %v, want %v", got, want)
		}
		comments := s.forge.commentsOf(1)
		if len(comments) != 1 {
			t.Fatalf("comments = %+v, want one", comments)
		}
		commentID = comments[0].ID
		body := comments[0].Body
		for _, want := range []string{marker, "`" + s.ns + "`", "service " + s.ns + "_web", "TaskTemplate.ContainerSpec.Image",
			fmt.Sprintf("%q → %q", s.v1, s.v2), "Mode.Replicated.Replicas: 1 → 2", "https://skep.example.org/#/app/web/pulls"} {
			if !strings.Contains(body, want) {
				t.Errorf("comment lacks %q:\n%s", want, body)
			}
		}
	})

	t.Run("a new commit edits the same comment", func(t *testing.T) {
		before := s.forge.count()
		s.repo.Commit(t, "feature", map[string]string{"compose.yaml": composeOf(s.v2, 3)})
		head := s.open(t, "synchronize", 1, "feature")
		comments := s.forge.commentsOf(1)
		if len(comments) != 1 || comments[0].ID != commentID || !strings.Contains(comments[0].Body, "Mode.Replicated.Replicas: 1 → 3") ||
			!strings.Contains(comments[0].Body, head[:7]) {
			t.Fatalf("comments after a new commit = %+v, want comment %d edited to the new head", comments, commentID)
		}
		for _, r := range s.forge.since(before) {
			if r.Method == "POST" && strings.HasSuffix(r.URI, "/comments") {
				t.Errorf("a new commit posted a second comment: %s %s", r.Method, r.URI)
			}
		}
	})

	t.Run("a broken compose file fails, naming file and line", func(t *testing.T) {
		s.repo.CreateBranch(t, "broken", "main")
		s.repo.Commit(t, "broken", map[string]string{"compose.yaml": "services:\n  web:\n    image: " + s.v1 + "\n    deploy:\n      replicas: many\n"})
		head := s.open(t, "opened", 2, "broken")
		got := s.onlyStatus(t, head)
		if got["state"] != "failure" || !strings.HasPrefix(fmt.Sprint(got["description"]), "compose.yaml:5") {
			t.Errorf("status = %v, want a failure naming compose.yaml:5", got)
		}
	})

	t.Run("a head no node can run fails, saying why it cannot be placed", func(t *testing.T) {
		s.repo.CreateBranch(t, "nowhere", "main")
		s.repo.Commit(t, "nowhere", map[string]string{"compose.yaml": strings.Replace(composeOf(s.v1, 1),
			"      replicas: 1\n", "      replicas: 1\n      placement:\n        constraints: [node.labels.skep-zone == nowhere]\n", 1)})
		head := s.open(t, "opened", 5, "nowhere")
		got := s.onlyStatus(t, head)
		if desc := fmt.Sprint(got["description"]); got["state"] != "failure" || !strings.Contains(desc, "cannot be placed") {
			t.Errorf("status = %v, want a failure saying it cannot be placed", got)
		}
	})

	t.Run("a change of nothing deployable is no change", func(t *testing.T) {
		s.repo.CreateBranch(t, "docs", "main")
		s.repo.Commit(t, "docs", map[string]string{"README.md": "The shop, documented.\n"})
		head := s.open(t, "opened", 3, "docs")
		if got := s.onlyStatus(t, head); got["state"] != "success" || got["description"] != "no change" {
			t.Errorf("status = %v, want success: no change", got)
		}
	})

	t.Run("a changed secret shows as changed without its value", func(t *testing.T) {
		s.repo.CreateBranch(t, "rotate", "main")
		s.repo.Commit(t, "rotate", map[string]string{"db-password.txt": "s3cret-two\n"})
		head := s.open(t, "opened", 4, "rotate")
		if got := s.onlyStatus(t, head); got["state"] != "success" || got["description"] == "no change" {
			t.Errorf("status = %v, want success with changes", got)
		}
		body := s.forge.commentsOf(4)[0].Body
		if !strings.Contains(body, "secret "+s.ns+"_db_password changed") || strings.Contains(body, "s3cret") {
			t.Errorf("comment should show the secret changed and never its value:\n%s", body)
		}
	})

	t.Run("a fork's head comes from the base repository's ref of it, planned sealed", func(t *testing.T) {
		s.repo.CreateBranch(t, "fork-scale", "main")
		head := s.repo.Commit(t, "fork-scale", map[string]string{"compose.yaml": composeOf(s.v1, 4)})
		s.repo.SetRef(t, "refs/pull/6/head", head)
		s.repo.DeleteBranch(t, "fork-scale") // a fork's branch is not the base's: only refs/pull/6/head reaches it
		if code, answer := s.deliver(t, s.pullRequest(t, "opened", 6, "fork-scale", head, false), hookSecret); code != http.StatusAccepted {
			t.Fatalf("delivery = %d %s", code, answer)
		}
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			return len(s.forge.statuses(head)) > 0, "no status yet"
		})
		if got := s.onlyStatus(t, head); got["state"] != "success" || got["description"] != "1 change" {
			t.Errorf("status = %v, want success: 1 change", got)
		}
		body := s.forge.commentsOf(6)[0].Body
		if !strings.Contains(body, "From a fork") || !strings.Contains(body, "Mode.Replicated.Replicas: 1 → 4") {
			t.Errorf("a fork's comment:\n%s", body)
		}
	})

	t.Run("the API lists the open pull requests with their plans", func(t *testing.T) {
		var list wire.PullRequestList
		s.get(t, "/api/v1/applications/web/pulls", &list)
		if len(list.PullRequests) != 6 {
			t.Fatalf("pulls = %+v, want 6", list)
		}
		for _, p := range list.PullRequests {
			if p.Plan == nil || p.State != wire.PullPlanned || p.Plan.Revision != p.Head {
				t.Errorf("pull %d = %+v, want planned at its head", p.Number, p)
			}
		}
	})

	t.Run("a merged pull request's comment says so and nothing more is posted", func(t *testing.T) {
		before := s.forge.count()
		if code, answer := s.deliver(t, s.pullRequest(t, "closed", 1, "feature", s.repo.Head(t, "feature"), true), hookSecret); code != http.StatusAccepted {
			t.Fatalf("closed delivery = %d %s", code, answer)
		}
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			c := s.forge.commentsOf(1)
			return len(c) == 1 && strings.Contains(c[0].Body, "was merged"), fmt.Sprint(c)
		})
		for _, r := range s.forge.since(before) {
			if r.Method == "POST" {
				t.Errorf("closing posted %s %s", r.Method, r.URI)
			}
		}
		var list wire.PullRequestList
		s.get(t, "/api/v1/applications/web/pulls", &list)
		if len(list.PullRequests) != 5 || slices.ContainsFunc(list.PullRequests, func(p wire.PullRequest) bool { return p.Number == 1 }) {
			t.Errorf("pulls after one merged = %+v, want 5 without #1", list.PullRequests)
		}
	})

	t.Run("a forged signature is refused with 401 and plans nothing", func(t *testing.T) {
		s.repo.CreateBranch(t, "forged", "main")
		forged := s.repo.Commit(t, "forged", map[string]string{"compose.yaml": composeOf(s.v2, 5)})
		s.repo.SetRef(t, "refs/pull/9/head", forged)
		code, _ := s.deliver(t, s.pullRequest(t, "opened", 9, "forged", forged, false), "not-the-secret")
		if code != http.StatusUnauthorized {
			t.Fatalf("forged delivery = %d, want 401", code)
		}
		// Plans are made one after the other in arrival order: once a
		// later, genuine pull request is planned, a queued forged one
		// would have been too.
		s.repo.CreateBranch(t, "later", "main")
		s.repo.Commit(t, "later", map[string]string{"README.md": "Later.\n"})
		s.open(t, "opened", 10, "later")
		if got := s.forge.statuses(forged); len(got) != 0 || len(s.forge.commentsOf(9)) != 0 {
			t.Errorf("the forged pull request got statuses %v and comments %v", got, s.forge.commentsOf(9))
		}
	})

	t.Run("no plan wrote to the swarm", func(t *testing.T) {
		if image, replicas := s.running(t); image != s.v1 || replicas != 1 {
			t.Errorf("the swarm runs %s with %d replicas, want %s with 1: a plan wrote", image, replicas, s.v1)
		}
		revs, err := s.ctrl.Revisions(t.Context(), "web", "")
		if err != nil || len(revs) != 1 {
			t.Errorf("revisions = %d, %v; want the one deploy of main", len(revs), err)
		}
	})

	t.Run("the plan route plans a revision for CI, exactly as a pull request", func(t *testing.T) {
		var p wire.Proposal
		s.post(t, "/api/v1/applications/web/plan", `{"revision":"rotate"}`, &p)
		if p.Changes == 0 || p.Error != "" || p.Revision != s.repo.Head(t, "rotate") {
			t.Errorf("plan of rotate = %+v", p)
		}
		s.post(t, "/api/v1/applications/web/plan", `{"revision":"refs/pull/2/head"}`, &p)
		if !strings.HasPrefix(p.Error, "compose.yaml:5") || !p.Sealed {
			t.Errorf("plan of a pull request's ref = %+v, want sealed and failing at compose.yaml:5", p)
		}
	})
}

// running returns the live service's image and replicas.
func (s *shop) running(t *testing.T) (string, uint64) {
	t.Helper()
	svc, err := harness.ServiceNamed(t.Context(), s.cli, s.ns+"_web")
	if err != nil || svc == nil {
		t.Fatalf("service %s_web: %v", s.ns, err)
	}
	return svc.Spec.TaskTemplate.ContainerSpec.Image, *svc.Spec.Mode.Replicated.Replicas
}

func (s *shop) get(t *testing.T, path string, v any) {
	t.Helper()
	s.call(t, "GET", path, "", v)
}

func (s *shop) post(t *testing.T, path, body string, v any) {
	t.Helper()
	s.call(t, "POST", path, body, v)
}

func (s *shop) call(t *testing.T, method, path, body string, v any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, s.api.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+deployerToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
}

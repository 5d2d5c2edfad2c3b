package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	stdhttp "net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
)

func TestTestImageFromRegistryRunsAsSwarmService(t *testing.T) {
	cli := RequireSwarm(t)
	reg := StartRegistry(t)
	local := TestImage(t, cli, ImageOptions{Version: "v7"})
	ref := reg.Push(t, cli, local, "harness/testapp", "v7")

	name := Name(t, "hs")
	CleanupStack(t, cli, name)
	port := FreePort(t)
	replicas := uint64(1)
	resp, err := cli.ServiceCreate(t.Context(), swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: name + "_web", Labels: map[string]string{"com.docker.stack.namespace": name}},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{Image: ref},
		},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &replicas}},
		EndpointSpec: PublishHostPort(port),
	}, swarm.ServiceCreateOptions{})
	if err != nil {
		t.Fatalf("create service from %s: %v", ref, err)
	}
	WaitRunning(t, cli, resp.ID, 1, 2*time.Minute)

	body := HTTPGet(t, fmt.Sprintf("http://127.0.0.1:%d/", port), time.Minute)
	var got struct{ Version, Hostname string }
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	if got.Version != "v7" || got.Hostname == "" {
		t.Fatalf("GET / = %+v, want version v7 and a hostname", got)
	}
	svc, _, err := cli.ServiceInspectWithRaw(t.Context(), resp.ID, swarm.ServiceInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := svc.Spec.TaskTemplate.ContainerSpec.Image; !strings.HasPrefix(img, reg.Host+"/") {
		t.Fatalf("service image = %q, want it from the test registry %s", img, reg.Host)
	}
}

func TestTestImageIsCachedByContent(t *testing.T) {
	cli := RequireSwarm(t)
	a := TestImage(t, cli, ImageOptions{Version: "v1"})
	b := TestImage(t, cli, ImageOptions{Version: "v1"})
	c := TestImage(t, cli, ImageOptions{Version: "v1", Unhealthy: true})
	if a != b {
		t.Errorf("same content built twice under different refs: %s, %s", a, b)
	}
	if a == c {
		t.Errorf("unhealthy image shares the healthy ref %s", a)
	}
	inspect, err := cli.ImageInspect(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if hc := inspect.Config.Healthcheck; hc == nil || len(hc.Test) == 0 || hc.Test[len(hc.Test)-1] != "health" {
		t.Errorf("image healthcheck = %+v, want the testapp health subcommand", hc)
	}
}

func TestGitServerServesCloneAndPushOverSmartHTTP(t *testing.T) {
	srv := StartGitServer(t, GitServerOptions{Username: "skep", Password: "s3cret"})
	repo := srv.CreateRepo(t, "app")
	first := repo.Commit(t, "main", map[string]string{"compose.yaml": "services: {}\n"})

	auth := &http.BasicAuth{Username: "skep", Password: "s3cret"}
	dir := t.TempDir()
	clone, err := git.PlainCloneContext(t.Context(), dir, false, &git.CloneOptions{URL: repo.URL, Auth: auth})
	if err != nil {
		t.Fatalf("clone %s: %v", repo.URL, err)
	}
	head, err := clone.Head()
	if err != nil {
		t.Fatal(err)
	}
	if head.Hash().String() != first {
		t.Fatalf("cloned head = %s, want %s", head.Hash(), first)
	}

	second := repo.Commit(t, "main", map[string]string{"compose.yaml": "services: {web: {image: x}}\n"})
	if err := clone.FetchContext(t.Context(), &git.FetchOptions{Auth: auth}); err != nil {
		t.Fatalf("fetch after push: %v", err)
	}
	ref, err := clone.Reference("refs/remotes/origin/main", true)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Hash().String() != second {
		t.Fatalf("fetched origin/main = %s, want the pushed %s", ref.Hash(), second)
	}

	_, err = git.PlainCloneContext(t.Context(), t.TempDir(), false, &git.CloneOptions{
		URL: repo.URL, Auth: &http.BasicAuth{Username: "skep", Password: "wrong"}})
	if err == nil {
		t.Fatal("clone with a wrong password succeeded")
	}
}

func TestGitServerMovesBranchesAndTags(t *testing.T) {
	srv := StartGitServer(t, GitServerOptions{})
	repo := srv.CreateRepo(t, "refs")
	first := repo.Commit(t, "main", map[string]string{"a": "1"})
	second := repo.Commit(t, "main", map[string]string{"a": "2"})
	repo.CreateBranch(t, "feature", first)
	repo.Tag(t, "v1.0.0", first, "release v1.0.0")
	repo.MoveBranch(t, "main", first)
	feature := repo.Commit(t, "feature", map[string]string{"b": "1"}, "a")

	remote, err := git.PlainOpen(repo.Path)
	if err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{"refs/heads/main": first, "refs/heads/feature": feature} {
		got, err := remote.Reference(plumbingName(ref), true)
		if err != nil || got.Hash().String() != want {
			t.Errorf("%s = %v (%v), want %s", ref, got, err, want)
		}
	}
	tag, err := remote.Tag("v1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if obj, err := remote.TagObject(tag.Hash()); err != nil || obj.Target.String() != first {
		t.Errorf("annotated tag v1.0.0 = %v (%v), want it to point at %s", obj, err, first)
	}
	repo.DeleteBranch(t, "feature")
	if _, err := remote.Reference(plumbingName("refs/heads/feature"), true); err == nil {
		t.Error("feature branch still exists after DeleteBranch")
	}
	_ = second
	if _, err := os.Stat(filepath.Join(repo.Path, "HEAD")); err != nil {
		t.Errorf("bare repo has no HEAD: %v", err)
	}
}

func TestGitServerFailsHangsAndHeals(t *testing.T) {
	srv := StartGitServer(t, GitServerOptions{})
	repo := srv.CreateRepo(t, "faults")
	repo.Commit(t, "main", map[string]string{"a": "1"})
	lsRemote := func(ctx context.Context) error {
		_, err := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{repo.URL}}).ListContext(ctx, &git.ListOptions{})
		return err
	}
	if err := lsRemote(t.Context()); err != nil {
		t.Fatalf("healthy server: %v", err)
	}
	srv.Fail(stdhttp.StatusInternalServerError)
	if err := lsRemote(t.Context()); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("ls-remote while failing = %v, want a 500", err)
	}
	srv.Heal()
	srv.Hang()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := lsRemote(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ls-remote while hanging = %v, want it to wait past its deadline", err)
	}
	srv.Heal()
	if err := lsRemote(t.Context()); err != nil {
		t.Errorf("ls-remote once healed: %v", err)
	}
}

// fakeTB records how RequireSwarm ended a test without ending ours.
type fakeTB struct {
	testing.TB
	mu              sync.Mutex
	failed, skipped bool
	msg             string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.mu.Lock()
	f.skipped, f.msg = true, fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func TestRequireSwarmFailsWhenRequiredAndNoEngineAnswers(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	for _, tc := range []struct {
		name        string
		require     string
		wantFailed  bool
		wantSkipped bool
	}{
		{name: "required fails", require: "1", wantFailed: true},
		{name: "not required skips", require: "", wantSkipped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvRequireSwarm, tc.require)
			f := &fakeTB{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				RequireSwarm(f)
			}()
			<-done
			if f.failed != tc.wantFailed || f.skipped != tc.wantSkipped {
				t.Fatalf("RequireSwarm: failed=%v skipped=%v (%s), want failed=%v skipped=%v",
					f.failed, f.skipped, f.msg, tc.wantFailed, tc.wantSkipped)
			}
			if !strings.Contains(f.msg, "no-docker.sock") {
				t.Errorf("message %q does not name the engine address it tried", f.msg)
			}
		})
	}
}

func plumbingName(s string) plumbing.ReferenceName { return plumbing.ReferenceName(s) }

func TestGitServerProcessServesTheRepositoriesAndCountsItsCPU(t *testing.T) {
	srv := StartGitServer(t, GitServerOptions{})
	repo := srv.CreateRepo(t, "app")
	head := repo.Commit(t, "main", map[string]string{"compose.yaml": "services: {}\n"})
	proc := StartGitServerProcess(t, srv.Root)
	if proc.URL == srv.URL {
		t.Fatalf("the process serves at the in-process server's address %s", proc.URL)
	}
	before := proc.CPU(t)
	url := strings.Replace(repo.URL, srv.URL, proc.URL, 1)
	for range 20 {
		remote := git.NewRemote(nil, &config.RemoteConfig{Name: "origin", URLs: []string{url}})
		refs, err := remote.ListContext(t.Context(), &git.ListOptions{})
		if err != nil {
			t.Fatalf("ls-remote %s: %v", url, err)
		}
		found := false
		for _, r := range refs {
			found = found || r.Name() == plumbing.NewBranchReferenceName("main") && r.Hash().String() == head
		}
		if !found {
			t.Fatalf("ls-remote %s: no main at %s in %v", url, head, refs)
		}
	}
	if srv.RefAdvertisements() != 0 {
		t.Errorf("the in-process server answered %d ref advertisements, want 0", srv.RefAdvertisements())
	}
	// 20 ref advertisements, each a `git http-backend` the process waited
	// for, take more than the clock tick of /proc's accounting.
	if after := proc.CPU(t); after <= before {
		t.Errorf("server process CPU %s after 20 ls-remotes, %s before: not counted", after, before)
	}
}

func TestMain(m *testing.M) {
	if ServeGitProcess() {
		return
	}
	os.Exit(m.Run())
}

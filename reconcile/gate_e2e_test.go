package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/preview"
	"github.com/skep-cd/skep/reconcile"
	skepswarm "github.com/skep-cd/skep/swarm"
)

// forgeStatuses is a local GitHub that records the state of every commit
// status a forge notifier sets.
type forgeStatuses struct {
	mu     sync.Mutex
	states []string
}

func (f *forgeStatuses) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		State string `json:"state"`
	}
	if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/statuses/") && json.NewDecoder(r.Body).Decode(&body) == nil {
		f.mu.Lock()
		f.states = append(f.states, body.State)
		f.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte("{}"))
}

func (f *forgeStatuses) all() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.states)
}

// withForge registers a forge notifier on e that reports app's syncs to a
// local GitHub, and returns what that GitHub was told.
func (e *env) withForge(t *testing.T, app string) *forgeStatuses {
	t.Helper()
	got := &forgeStatuses{}
	srv := httptest.NewServer(got)
	t.Cleanup(srv.Close)
	f, err := notify.NewForge(notify.ForgeOptions{Name: "forge", Provider: notify.GitHub, URL: srv.URL, Token: "t0ken",
		Repositories: map[string]string{app: "team/web"}})
	if err != nil {
		t.Fatal(err)
	}
	runNotifier(t, f)
	e.notifiers = append(e.notifiers, f)
	return got
}

// runNotifier runs n's delivery until the test ends, and waits for it.
func runNotifier(t *testing.T, n notify.Runner) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = n.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// The documented shape, `image: ${WEB_IMAGE}`, with an artifact whose
// image is not pushed yet: the first deploy waits (no stalled render, no
// sync-failed, no failure status on the commit), says which image it
// waits for, and deploys once the image is pushed.
func TestArtifactWithoutItsImageWaitsAndDeploysOnceItIsPushed(t *testing.T) {
	e := newArtifactEnv(t)
	port := harness.FreePort(t)
	e.source.Commit(t, "main", map[string]string{"README": "web\n"})
	e.source.Tag(t, "v1", "main", "v1")
	files := e.webArtifact("release: v1")
	files["compose.yaml"], files["settings.txt"] = imageCompose(port), "one\n"
	commit := e.repo.Commit(t, "main", files)
	forge := e.withForge(t, "web")
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.artifactApp("")))})
	run(t, ctrl)

	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Revision == commit && s.LastError != "" })
	want := "image " + e.image + ":v1 is not in the registry yet"
	if st.LastErrorClass != outcome.Waiting || !strings.Contains(st.LastError, want) {
		t.Errorf("before the push: error %q (%s), want waiting naming %q", st.LastError, st.LastErrorClass, want)
	}
	if s, _ := e.service(t.Context(), "web"); s != nil {
		t.Errorf("a service runs before its image exists: %s", s.Spec.TaskTemplate.ContainerSpec.Image)
	}

	e.registry.Push(t, e.cli, e.v1, "team/web", "v1")
	e.waitImagePrefix(t, e.image+":v1@sha256:", time.Minute)
	st = waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Sync == reconcile.Synced })
	if st.LastError != "" {
		t.Errorf("after the push: error %q (%s), want none", st.LastError, st.LastErrorClass)
	}
	if failed := e.events.of(notify.SyncFailed); len(failed) != 0 {
		t.Errorf("sync-failed events = %+v, want none: waiting is not a failure", failed)
	}
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		got := forge.all()
		return slices.Contains(got, "success"), fmt.Sprintf("commit statuses %q, want a success", got)
	})
	if got := forge.all(); slices.Contains(got, "failure") {
		t.Errorf("commit statuses %q: a waiting application marked its commit failed", got)
	}
}

// A preview whose branch image is not pushed says so: its error names the
// image the registry does not have yet, not a render problem.
func TestPreviewWithoutItsBranchImageSaysTheImageIsNotPushedYet(t *testing.T) {
	e := newArtifactEnv(t)
	port := harness.FreePort(t)
	head := e.source.Commit(t, "main", map[string]string{"README": "main\n"})
	e.registry.Push(t, e.cli, e.v1, "team/web", head)
	files := e.webArtifact("branch: main\n    preview: true")
	files["compose.yaml"], files["settings.txt"] = imageCompose(port), "one\n"
	e.repo.Commit(t, "main", files)
	feature := e.source.Commit(t, "feature/login", map[string]string{"README": "feature\n"})
	release := preview.Name(e.ns, "feature/login")
	harness.CleanupStack(t, e.cli, release)
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.artifactApp("")))})
	run(t, ctrl)
	e.waitImagePrefix(t, e.image+":"+head+"@sha256:", 2*time.Minute)

	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return len(s.Previews) == 1 && s.Previews[0].Error != "" })
	want := "image " + e.image + ":" + feature + " is not in the registry yet"
	if p := st.Previews[0]; !strings.Contains(p.Error, want) || p.Deployed {
		t.Errorf("preview status = %+v, want it not deployed with an error naming %q", p, want)
	}
	if s, _ := e.previewService(t.Context(), release); s != nil {
		t.Errorf("a preview runs before its branch image exists: %s", s.Spec.TaskTemplate.ContainerSpec.Image)
	}
}

// A chart reading .Artifacts.web.Image of an artifact whose image is not
// pushed yet waits as a compose file does, naming the image.
func TestChartWithAnArtifactWithoutItsImageWaits(t *testing.T) {
	e := newArtifactEnv(t)
	port := harness.FreePort(t)
	e.source.Commit(t, "main", map[string]string{"README": "web\n"})
	e.source.Tag(t, "v1", "main", "v1")
	files := chartFiles(port, "unused", 1)
	files["charts/web/templates/web.yaml"] = strings.Replace(files["charts/web/templates/web.yaml"], "{{ .Values.image }}", "{{ .Artifacts.web.Image }}", 1)
	maps.Copy(files, e.webArtifact("release: v1"))
	commit := e.repo.Commit(t, "main", files)
	app := e.artifactApp("") + "    chart:\n      path: charts/web\n      values: [envs/testing/values.yaml]\n"
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(app))})
	run(t, ctrl)

	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Revision == commit && s.LastError != "" })
	want := "image " + e.image + ":v1 is not in the registry yet"
	if st.LastErrorClass != outcome.Waiting || !strings.Contains(st.LastError, want) {
		t.Errorf("before the push: error %q (%s), want waiting naming %q", st.LastError, st.LastErrorClass, want)
	}
	e.registry.Push(t, e.cli, e.v1, "team/web", "v1")
	e.waitImagePrefix(t, e.image+":v1@sha256:", time.Minute)
	if failed := e.events.of(notify.SyncFailed); len(failed) != 0 {
		t.Errorf("sync-failed events = %+v, want none", failed)
	}
}

// stuckLists is a Reader whose service lists after the first hang until
// the test ends: a relist of a big swarm that takes long, during which
// the snapshot predates every write.
type stuckLists struct {
	skepswarm.Reader
	mu    sync.Mutex
	calls int
}

func (s *stuckLists) ServiceList(ctx context.Context, opts swarm.ServiceListOptions) ([]swarm.Service, error) {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	s.mu.Unlock()
	if !first {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Reader.ServiceList(ctx, opts)
}

// The current version of an artifact is what the swarm runs even while the
// live snapshot predates the deploy that started it: the pin moved to a
// version not pushed yet keeps the one just deployed, never nothing.
func TestArtifactCurrentVersionIsReadFromTheEngineWhileTheSnapshotPredatesTheDeploy(t *testing.T) {
	e := newArtifactEnv(t)
	e.watch = func(r skepswarm.Reader) skepswarm.Reader { return &stuckLists{Reader: r} }
	port := harness.FreePort(t)
	e.source.Commit(t, "main", map[string]string{"README": "web\n"})
	e.source.Tag(t, "v1", "main", "v1")
	e.registry.Push(t, e.cli, e.v1, "team/web", "v1")
	files := e.webArtifact("release: v1")
	files["compose.yaml"], files["settings.txt"] = imageCompose(port), "one\n"
	e.repo.Commit(t, "main", files)
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.artifactApp("")))})
	run(t, ctrl)
	e.waitImagePrefix(t, e.image+":v1@sha256:", 2*time.Minute)

	e.source.Tag(t, "v2", "main", "v2")
	pin := e.repo.Commit(t, "main", e.webArtifact("release: v2"))
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
		o, ok := artifactOf(s, "web")
		return s.Revision == pin && ok && o.Desired == "v2" && o.Condition == artifact.Waiting
	})
	if o, _ := artifactOf(st, "web"); o.Current != "v1" || o.Version() != "v1" || st.LastError != "" {
		t.Errorf("while v2 waits: artifact current %q, used %q, error %q (%s); want v1 running and used, no error",
			o.Current, o.Version(), st.LastError, st.LastErrorClass)
	}
}

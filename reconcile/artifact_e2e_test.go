package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
)

// artifactEnv is an env with a registry and a git repository that defines
// the web service's versions.
type artifactEnv struct {
	*env
	registry *harness.Registry
	source   *harness.Repo
	image    string // the artifact's OCI repository, without tag
}

func newArtifactEnv(t *testing.T) *artifactEnv {
	t.Helper()
	e := &artifactEnv{env: newEnv(t), registry: harness.StartRegistry(t)}
	e.source = e.git.CreateRepo(t, "web-source")
	e.image = e.registry.Host + "/team/web"
	return e
}

// artifactApp is an automated application whose web image comes from its
// release artifacts in the same repository (releases/testing).
func (e *artifactEnv) artifactApp(tagTemplate string) string {
	s := e.app("web", true) + "    artifacts:\n      path: releases\n      environment: testing\n"
	if tagTemplate != "" {
		s += "      tagTemplate: \"" + tagTemplate + "\"\n"
	}
	return s
}

// webArtifact is the artifact file pinning or tracking web.
func (e *artifactEnv) webArtifact(deploy string) map[string]string {
	return map[string]string{"releases/testing/web.yaml": fmt.Sprintf(`- kind: service
  name: web
  image: %s
  source: %s
  deploy:
    %s
`, e.image, e.source.URL, deploy)}
}

// imageCompose is a one-service stack whose image is the artifact's.
func imageCompose(port uint32) string {
	return strings.Replace(compose(port), "image: ${IMAGE}", "image: ${WEB_IMAGE}", 1)
}

// waitImagePrefix waits until the web service runs an image starting with
// prefix (a tag, then a pinned digest).
func (e *artifactEnv) waitImagePrefix(t *testing.T, prefix string, timeout time.Duration) string {
	t.Helper()
	var img string
	harness.Eventually(t, timeout, func(ctx context.Context) (bool, string) {
		s, err := e.service(ctx, "web")
		if err != nil || s == nil {
			return false, fmt.Sprintf("service web: %v (absent)", err)
		}
		img = s.Spec.TaskTemplate.ContainerSpec.Image
		return strings.HasPrefix(img, prefix), "image is " + img
	})
	return img
}

func artifactOf(st reconcile.AppStatus, name string) (artifact.Object, bool) {
	for _, o := range st.Artifacts {
		if o.Entry.Name == name {
			return o, true
		}
	}
	return artifact.Object{}, false
}

func TestArtifactPinMovedBeforeItsImageKeepsTheRunningVersionUntilPushed(t *testing.T) {
	e := newArtifactEnv(t)
	port := harness.FreePort(t)
	e.source.Commit(t, "main", map[string]string{"README": "web\n"})
	e.source.Tag(t, "v1", "main", "v1")
	e.registry.Push(t, e.cli, e.v1, "team/web", "v1")
	files := e.webArtifact("release: v1")
	files["compose.yaml"], files["settings.txt"] = imageCompose(port), "one\n"
	e.repo.Commit(t, "main", files)
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.artifactApp("")))})
	run(t, ctrl)

	img := e.waitImagePrefix(t, e.image+":v1@sha256:", 2*time.Minute)
	t.Logf("v1 deployed as %s", img)

	// The pin moves to v2, tagged in git, whose image is not pushed yet.
	e.source.Tag(t, "v2", "main", "v2")
	pin := e.repo.Commit(t, "main", e.webArtifact("release: v2"))
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
		o, ok := artifactOf(s, "web")
		return s.Revision == pin && ok && o.Desired == "v2" && o.Condition == artifact.Waiting
	})
	if o, _ := artifactOf(st, "web"); o.Current != "v1" || o.Version() != "v1" || st.Drift != reconcile.DriftArtifact {
		t.Errorf("while v2 waits: artifact %+v, drift %q; want current and used v1, drift artifact", o, st.Drift)
	}
	s, err := e.service(t.Context(), "web")
	if err != nil || s == nil || !strings.HasPrefix(s.Spec.TaskTemplate.ContainerSpec.Image, e.image+":v1@") {
		t.Fatalf("the service moved before v2 was pushed: %v %v", s, err)
	}
	// Let a few more ticks pass: still one drift-detected, no sync.
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
		return s.LastReconcile.After(st.LastReconcile.Add(11 * time.Second))
	})
	var waiting []notify.Event
	for _, ev := range e.events.of(notify.DriftDetected) {
		if strings.Contains(ev.Message, "waiting for their image") {
			waiting = append(waiting, ev)
		}
	}
	if len(waiting) != 1 || !strings.Contains(waiting[0].Message, "web v2") {
		t.Errorf("drift-detected events while waiting = %+v, want one naming web v2", waiting)
	}

	e.registry.Push(t, e.cli, e.v2, "team/web", "v2")
	e.waitImagePrefix(t, e.image+":v2@sha256:", 2*time.Minute)
	st = waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
		o, _ := artifactOf(s, "web")
		return o.Current == "v2"
	})
	if st.Sync != reconcile.Synced {
		t.Errorf("after v2 was pushed and deployed: %+v, want synced", st)
	}
}

func TestArtifactBranchDeploysEachCommitOnceItsImageExists(t *testing.T) {
	e := newArtifactEnv(t)
	port := harness.FreePort(t)
	first := e.source.Commit(t, "main", map[string]string{"README": "one\n"})
	e.registry.Push(t, e.cli, e.v1, "team/web", "sha-"+first[:12])
	files := e.webArtifact("branch: main")
	files["compose.yaml"], files["settings.txt"] = imageCompose(port), "one\n"
	e.repo.Commit(t, "main", files)
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.artifactApp("sha-{short}")))})
	run(t, ctrl)
	e.waitImagePrefix(t, e.image+":sha-"+first[:12]+"@sha256:", 2*time.Minute)

	second := e.source.Commit(t, "main", map[string]string{"README": "two\n"})
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
		o, _ := artifactOf(s, "web")
		return o.Desired == "sha-"+second[:12] && o.Condition == artifact.Waiting
	})
	if s, _ := e.service(t.Context(), "web"); s == nil || !strings.Contains(s.Spec.TaskTemplate.ContainerSpec.Image, first[:12]) {
		t.Fatalf("a commit without its image was deployed: %v", s)
	}
	e.registry.Push(t, e.cli, e.v2, "team/web", "sha-"+second[:12])
	e.waitImagePrefix(t, e.image+":sha-"+second[:12]+"@sha256:", 2*time.Minute)
}

func TestArtifactSuspendFreezesTheRunningVersion(t *testing.T) {
	e := newArtifactEnv(t)
	port := harness.FreePort(t)
	e.source.Commit(t, "main", map[string]string{"README": "web\n"})
	e.source.Tag(t, "v1", "main", "v1")
	e.source.Tag(t, "v2", "main", "v2")
	e.registry.Push(t, e.cli, e.v1, "team/web", "v1")
	e.registry.Push(t, e.cli, e.v2, "team/web", "v2")
	files := e.webArtifact("release: v1")
	files["compose.yaml"], files["settings.txt"] = imageCompose(port), "one\n"
	e.repo.Commit(t, "main", files)
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.artifactApp("")))})
	run(t, ctrl)
	before := e.waitImagePrefix(t, e.image+":v1@sha256:", 2*time.Minute)

	// Suspended, the artifact keeps v1 although v2 exists in git and in
	// the registry.
	frozen := e.repo.Commit(t, "main", e.webArtifact("suspend: true"))
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Revision == frozen })
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
		return s.LastReconcile.After(st.LastReconcile.Add(11 * time.Second))
	})
	o, _ := artifactOf(st, "web")
	if !o.Suspended() || o.Version() != "v1" || o.Drift(false) {
		t.Errorf("suspended artifact = %+v (version %q), want suspended at v1 with no drift", o, o.Version())
	}
	s, err := e.service(t.Context(), "web")
	if err != nil || s == nil || s.Spec.TaskTemplate.ContainerSpec.Image != before {
		t.Errorf("the suspended service changed: %v %v, want %s", s, err, before)
	}
}

func TestArtifactInfrastructureNamesTheStackRevisionAndFallsBackToTheDeployedOne(t *testing.T) {
	e := newArtifactEnv(t)
	port := harness.FreePort(t)
	// The stack definitions live in their own repository, versioned by tags.
	stacks := e.git.CreateRepo(t, "stacks")
	v1 := stacks.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	stacks.Tag(t, "v1.0.0", "main", "")
	v2 := stacks.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
	stacks.Tag(t, "v1.1.0", "main", "")
	infra := func(tag string) map[string]string {
		return map[string]string{"releases/testing/infrastructure.yaml": fmt.Sprintf(`- kind: infrastructure
  name: infrastructure
  source: %s
  deploy:
    release: %s
`, stacks.URL, tag)}
	}
	e.repo.Commit(t, "main", infra("v1.0.0"))
	app := strings.Replace(e.artifactApp(""), "      repo: "+e.repo.URL+"\n", "", 1)
	app = strings.Replace(app, "    artifacts:\n", "    artifacts:\n      repo: "+e.repo.URL+"\n", 1)
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(app))})
	run(t, ctrl)
	e.waitImage(t, e.v1, 2*time.Minute)
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.DeployedRevision == v1 })

	e.repo.Commit(t, "main", infra("v1.1.0"))
	e.waitImage(t, e.v2, 2*time.Minute)
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.DeployedRevision == v2 })

	// A tag git does not have: the deployed revision stays, never nothing.
	e.repo.Commit(t, "main", infra("v9.9.9"))
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
		o, ok := artifactOf(s, "infrastructure")
		return ok && o.Condition == artifact.Failed
	})
	if o, _ := artifactOf(st, "infrastructure"); o.Version() != v2 || o.Current != v2 {
		t.Errorf("infrastructure with an unknown tag = %+v (version %q), want the deployed %s kept", o, o.Version(), v2)
	}
	if st.Revision != v2 || st.LastErrorClass != "" {
		t.Errorf("status = revision %s, error %q (%s); want %s compared and no error", st.Revision, st.LastError, st.LastErrorClass, v2)
	}
	if s, _ := e.service(t.Context(), "web"); s == nil || s.Spec.TaskTemplate.ContainerSpec.Image != e.v2 {
		t.Errorf("the service moved off v2: %v", s)
	}
}

package reconcile_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
)

// A generator makes one application per directory: a directory pushed
// becomes a deployed application at the next app-set read, and one
// removed takes its application and (prune on) its release with it,
// leaving the others untouched.
func TestGeneratedApplicationsFollowTheDirectoriesOfTheRepository(t *testing.T) {
	e := newEnv(t)
	a, b, c := e.ns+"-a", e.ns+"-b", e.ns+"-c"
	for _, ns := range []string{a, b, c} {
		harness.CleanupStack(t, e.cli, ns)
	}
	dir := func(name string) map[string]string {
		return map[string]string{"stacks/" + name + "/compose.yaml": oneService, "stacks/" + name + "/.env": "IMAGE=" + e.v1 + "\n"}
	}
	first := dir(a)
	for k, v := range dir(b) {
		first[k] = v
	}
	first["README.md"] = "not a stack\n"
	e.repo.Commit(t, "main", first)
	apps := fmt.Sprintf(`apiVersion: skep/v1
applications: []
generators:
  - name: stacks
    repo: %s
    revision: main
    directories: ["stacks/*"]
    template:
      syncPolicy: {automated: true, prune: true, interval: 10s, resolveImage: never}
`, e.repo.URL)
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", apps)})
	run(t, ctrl)

	waitService(t, e, a+"_app", e.v1)
	before := waitService(t, e, b+"_app", e.v1)
	got, err := ctrl.Application(a)
	if err != nil || got.Generator != "stacks" || got.Source.Path != "stacks/"+a || got.Release != a {
		t.Fatalf("generated application %s = %+v, %v; want it from generator stacks, deploying stacks/%s as release %s", a, got, err, a, a)
	}

	// A directory pushed is an application at the next read.
	e.repo.Commit(t, "main", dir(c))
	waitService(t, e, c+"_app", e.v1)

	// A directory removed: its application leaves and its release is pruned.
	e.repo.Commit(t, "main", nil, "stacks/"+a+"/compose.yaml", "stacks/"+a+"/.env")
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		s, err := e.serviceNamed(t, a+"_app")
		names := []string{}
		for _, app := range ctrl.Applications() {
			names = append(names, app.Name)
		}
		return err == nil && s == nil && !slices.Contains(names, a), fmt.Sprintf("service %v (%v), applications %v", s != nil, err, names)
	})
	// The event follows the deletions it reports: wait for it, then check
	// it is the only one.
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		return len(e.events.of(notify.ResourcesPruned)) > 0, "no resources-pruned event yet"
	})
	pruned := e.events.of(notify.ResourcesPruned)
	if len(pruned) != 1 || pruned[0].Application != a || !strings.Contains(pruned[0].Message, "left generator stacks") {
		t.Errorf("resources-pruned events = %+v, want one for %s naming the generator", pruned, a)
	}
	for _, name := range []string{b, c} {
		if _, err := ctrl.Application(name); err != nil {
			t.Errorf("application %s left with another directory: %v", name, err)
		}
	}
	if s, err := e.serviceNamed(t, b+"_app"); err != nil || !unwritten(before, s) {
		t.Errorf("%s was touched when another directory left: %v, %v", b, s, err)
	}
}

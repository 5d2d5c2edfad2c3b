package reconcile_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/reconcile"
)

// oneService is a compose file of one service on ${IMAGE}, without ports.
const oneService = `services:
  app:
    image: ${IMAGE}
    deploy:
      endpoint_mode: dnsrr
      replicas: 1
`

// dependentApp is an automated application of the test's repository at
// path, deploying release, after the applications named.
func (e *env) dependentApp(name, release, path string, dependsOn ...string) string {
	s := fmt.Sprintf(`  - name: %s
    release: %s
    source: {repo: %s, revision: main, path: %s}
    syncPolicy: {automated: true, interval: 10s, resolveImage: never}
`, name, release, e.repo.URL, path)
	if len(dependsOn) > 0 {
		s += "    dependsOn: [" + strings.Join(dependsOn, ", ") + "]\n"
	}
	return s
}

// An application waits, saying for what, while the one it depends on is
// not healthy, and is created only after that one's task runs: the order
// comes from the swarm's own timestamps.
func TestDependsOnWaitsForTheDependencyToBeSyncedAndHealthy(t *testing.T) {
	e := newEnv(t)
	db, web := e.ns+"-db", e.ns+"-web"
	harness.CleanupStack(t, e.cli, db)
	harness.CleanupStack(t, e.cli, web)
	sick := harness.TestImage(t, e.cli, harness.ImageOptions{Version: "sick", Unhealthy: true})
	e.repo.Commit(t, "main", map[string]string{
		"db/compose.yaml": oneService, "db/.env": "IMAGE=" + sick + "\n",
		"web/compose.yaml": oneService, "web/.env": "IMAGE=" + e.v1 + "\n",
	})
	apps := appSet(e.dependentApp("web", web, "web", "db"), e.dependentApp("db", db, "db"))
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", apps)})
	run(t, ctrl)

	// db deploys but never gets healthy: web waits and says for what.
	waitService(t, e, db+"_app", sick)
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return slices.Equal(s.WaitingFor, []string{"db"}) })
	if !strings.Contains(st.LastError, "waiting for db (") || st.LastErrorClass != "waiting" {
		t.Errorf("web's status error = %q (%s), want a waiting error naming db", st.LastError, st.LastErrorClass)
	}
	if s, err := e.serviceNamed(t, web+"_app"); err != nil || s != nil {
		t.Fatalf("web was deployed before db was healthy: %v, %v", s, err)
	}

	// db is fixed; web follows once db's task runs healthy.
	e.repo.Commit(t, "main", map[string]string{"db/.env": "IMAGE=" + e.v1 + "\n"})
	dbSvc := waitService(t, e, db+"_app", e.v1)
	webSvc := waitService(t, e, web+"_app", e.v1)
	tasks, err := e.cli.TaskList(t.Context(), swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", dbSvc.ID))})
	if err != nil {
		t.Fatal(err)
	}
	var healthy time.Time // when db's first task on the good image reached running
	for _, tk := range tasks {
		if tk.Spec.ContainerSpec.Image == e.v1 && tk.Status.State == swarm.TaskStateRunning && (healthy.IsZero() || tk.Status.Timestamp.Before(healthy)) {
			healthy = tk.Status.Timestamp
		}
	}
	if healthy.IsZero() || webSvc.CreatedAt.Before(healthy) {
		t.Errorf("web created at %s, db's task on %s running since %s: want web after db was healthy", webSvc.CreatedAt, e.v1, healthy)
	}
	st = waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Sync == reconcile.Synced })
	if st.WaitingFor != nil || st.LastError != "" {
		t.Errorf("web's status after the sync = waiting for %v, error %q; want neither", st.WaitingFor, st.LastError)
	}
}

package reconcile_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/chartrepo"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/stack"
)

// chartFiles is a one-service chart whose image and replica count come
// from values, with a testing values file.
func chartFiles(port uint32, image string, replicas int) map[string]string {
	return map[string]string{
		"charts/web/Chart.yaml":  "name: web\nversion: 1.2.0\nappVersion: \"1\"\n",
		"charts/web/values.yaml": "image: nginx\nreplicas: 1\nport: 80\n",
		"charts/web/templates/_helpers.tpl": `{{- define "web.labels" -}}
app: {{ .Release.Name }}
{{- end -}}
`,
		"charts/web/templates/web.yaml": `services:
  web:
    image: {{ .Values.image }}
    deploy:
      endpoint_mode: dnsrr
      replicas: {{ .Values.replicas }}
      labels:
        {{- include "web.labels" . | nindent 8 }}
    ports:
      - target: 8080
        published: {{ .Values.port }}
        mode: host
`,
		"envs/testing/values.yaml": fmt.Sprintf("image: %s\nreplicas: %d\nport: %d\n", image, replicas, port),
	}
}

func (e *env) chartApp(name string) string {
	return e.app(name, true) + "    chart:\n      path: charts/web\n      values: [envs/testing/values.yaml]\n"
}

func TestChartDeploysUpgradesAndRecordsItsRevision(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", chartFiles(port, e.v1, 1))
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.chartApp("web")))})
	run(t, ctrl)
	svc := e.waitImage(t, e.v1, 2*time.Minute)
	if got := svc.Spec.Labels["app"]; got != e.ns {
		t.Errorf("label from the named template = %q, want %q", got, e.ns)
	}

	// A value changes in git: the release upgrades and the new revision
	// records the chart, its version and the values.
	second := e.repo.Commit(t, "main", map[string]string{"envs/testing/values.yaml": fmt.Sprintf("image: %s\nreplicas: 1\nport: %d\n", e.v2, port)})
	e.waitImage(t, e.v2, 2*time.Minute)
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.DeployedRevision == second })
	revs, err := apply.Revisions(t.Context(), e.cli, stack.Owner{Controller: e.id, Application: "web", Release: e.ns})
	if err != nil || len(revs) < 2 {
		t.Fatalf("revisions = %d, %v; want 2", len(revs), err)
	}
	last := revs[len(revs)-1]
	if c := last.Chart; c == nil || c.Name != "web" || c.Version != "1.2.0" || !strings.Contains(c.Values, e.v2) ||
		len(c.ValuesFiles) != 1 || c.ValuesFiles[0] != "envs/testing/values.yaml" || !strings.Contains(c.Manifest, "services:") {
		t.Errorf("revision %d chart record = %+v, want web 1.2.0 with the values and manifest", last.Number, last.Chart)
	}

	// A template that does not render: nothing is written, and the error
	// names the template and its line.
	before, _ := e.service(t.Context(), "web")
	broken := e.repo.Commit(t, "main", map[string]string{"charts/web/templates/web.yaml": "services:\n  web:\n    image: {{ .Values.image \n"})
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Revision == broken && s.LastError != "" })
	if st.LastErrorClass != "stalled" || !strings.Contains(st.LastError, "web.yaml:3") {
		t.Errorf("broken chart: %q (%s), want a stalled error naming templates/web.yaml:3", st.LastError, st.LastErrorClass)
	}
	after, _ := e.service(t.Context(), "web")
	if !unwritten(before, after) {
		t.Errorf("the broken chart touched the service: %v → %v", before, after)
	}
	if got := e.events.of(notify.SyncFailed); len(got) == 0 || got[len(got)-1].Revision != broken {
		t.Errorf("sync-failed events = %+v, want one for the broken commit", got)
	}
}

// twoCharts is a release file of a db (wave 0) and a web (wave 1) release,
// each a copy of the one-service chart with its own values.
func twoCharts(dbPort, webPort uint32, dbImage, webImage string) map[string]string {
	files := map[string]string{"releases.yaml": `releases:
  - name: web
    chart: charts/web
    values: [envs/testing/web.yaml]
    wave: 1
  - name: db
    chart: charts/db
    values: [envs/testing/db.yaml]
    wave: 0
`}
	for name, content := range chartFiles(webPort, webImage, 1) {
		switch {
		case name == "envs/testing/values.yaml":
			files["envs/testing/web.yaml"] = content
		default:
			files[name] = content
			files[strings.Replace(name, "charts/web/", "charts/db/", 1)] = content
		}
	}
	files["envs/testing/db.yaml"] = fmt.Sprintf("image: %s\nreplicas: 1\nport: %d\n", dbImage, dbPort)
	return files
}

func TestReleaseFileDeploysWavesInOrderAndAFailingWaveStopsTheNext(t *testing.T) {
	e := newEnv(t)
	dbPort, webPort := harness.FreePort(t), harness.FreePort(t)
	db, web := e.ns+"-db", e.ns+"-web"
	harness.CleanupStack(t, e.cli, db)
	harness.CleanupStack(t, e.cli, web)
	e.repo.Commit(t, "main", twoCharts(dbPort, webPort, e.v1, e.v1))
	app := e.app("web", true) + "    chart:\n      releases: releases.yaml\n"
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(app))})
	run(t, ctrl)

	webSvc := waitService(t, e, web+"_web", e.v1)
	dbSvc := waitService(t, e, db+"_web", e.v1)
	// Order from the swarm's own records: web's service was created only
	// after a db task was running.
	tasks, err := e.cli.TaskList(t.Context(), swarm.TaskListOptions{Filters: filters.NewArgs(filters.Arg("service", dbSvc.ID))})
	if err != nil || len(tasks) == 0 {
		t.Fatalf("db tasks: %v %v", tasks, err)
	}
	firstRunning := tasks[0].Status.Timestamp
	for _, tk := range tasks {
		if tk.Status.Timestamp.Before(firstRunning) {
			firstRunning = tk.Status.Timestamp
		}
	}
	if !webSvc.CreatedAt.After(dbSvc.CreatedAt) || webSvc.CreatedAt.Before(firstRunning) {
		t.Errorf("web created at %s, db created at %s, db's first task state at %s: want web after db converged",
			webSvc.CreatedAt, dbSvc.CreatedAt, firstRunning)
	}
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return len(s.Plan) == 2 && s.Sync == reconcile.Synced })
	if st.LastError != "" {
		t.Errorf("status error %q after two good waves", st.LastError)
	}

	// Wave 0 breaks while wave 1 asks for a new image: web stays as it is.
	broken := e.repo.Commit(t, "main", map[string]string{
		"charts/db/templates/web.yaml": "services:\n  web:\n    image: {{ .Values.image \n",
		"envs/testing/web.yaml":        fmt.Sprintf("image: %s\nreplicas: 1\nport: %d\n", e.v2, webPort),
	})
	st = waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.Revision == broken && s.LastError != "" })
	if !strings.Contains(st.LastError, "wave 0, release "+db) {
		t.Errorf("status error %q, want it to name wave 0 and %s", st.LastError, db)
	}
	if s, _ := e.serviceNamed(t, web+"_web"); s == nil || s.Spec.TaskTemplate.ContainerSpec.Image != e.v1 || !unwritten(webSvc, s) {
		t.Errorf("the later wave was touched after the first failed: %v", s)
	}
}

// serviceNamed returns the live service called name, or nil.
func (e *env) serviceNamed(t *testing.T, name string) (*swarm.Service, error) {
	t.Helper()
	list, err := e.cli.ServiceList(t.Context(), swarm.ServiceListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return nil, err
	}
	for _, s := range list {
		if s.Spec.Name == name {
			return &s, nil
		}
	}
	return nil, nil
}

// waitService waits until the service called name runs image.
func waitService(t *testing.T, e *env, name, image string) *swarm.Service {
	t.Helper()
	var got *swarm.Service
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		s, err := e.serviceNamed(t, name)
		if err != nil || s == nil {
			return false, fmt.Sprintf("service %s: %v (absent)", name, err)
		}
		got = s
		return s.Spec.TaskTemplate.ContainerSpec.Image == image, "image " + s.Spec.TaskTemplate.ContainerSpec.Image
	})
	return got
}

// chartArchive packs files (path → content, under dir/) as a .tgz.
func chartArchive(t *testing.T, dir string, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		body := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: dir + "/" + name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestChartFromAChartRepositoryDeploys(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	files := map[string]string{}
	for name, content := range chartFiles(port, e.v1, 1) {
		if rest, ok := strings.CutPrefix(name, "charts/web/"); ok {
			files[rest] = content
		}
	}
	files["values.yaml"] = fmt.Sprintf("image: %s\nreplicas: 1\nport: %d\n", e.v1, port)
	archive := chartArchive(t, "web", files)
	sum := sha256.Sum256(archive)
	index := fmt.Sprintf("apiVersion: v1\nentries:\n  web:\n    - version: 1.2.0\n      urls: [web-1.2.0.tgz]\n      digest: %x\n", sum)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/index.yaml":
			_, _ = w.Write([]byte(index))
		case "/web-1.2.0.tgz":
			_, _ = w.Write(archive)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	charts, err := chartrepo.New(chartrepo.Options{Dir: t.TempDir(), Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	e.repo.Commit(t, "main", map[string]string{"README": "values come from the chart\n"})
	app := e.app("web", true) + fmt.Sprintf("    chart:\n      repo: %s\n      name: web\n      version: 1.2.0\n", srv.URL)
	ctrl := e.controllerWith(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(app))}, reconcile.Options{Charts: charts})
	run(t, ctrl)
	e.waitImage(t, e.v1, 2*time.Minute)
	revs, err := apply.Revisions(t.Context(), e.cli, stack.Owner{Controller: e.id, Application: "web", Release: e.ns})
	if err != nil || len(revs) == 0 || revs[0].Chart == nil || revs[0].Chart.Version != "1.2.0" {
		t.Errorf("revisions %+v, %v; want one recording chart web 1.2.0", revs, err)
	}
}

// A template that renders differently every time (here: a random label)
// deploys once, then is held instead of redeploying on every tick.
func TestUnstableChartIsHeldAfterItsFirstDeploy(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	files := chartFiles(port, e.v1, 1)
	files["charts/web/templates/web.yaml"] = strings.Replace(files["charts/web/templates/web.yaml"],
		"      labels:\n", "      labels:\n        nonce: {{ randAlphaNum 8 | quote }}\n", 1)
	e.repo.Commit(t, "main", files)
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.chartApp("web")))})
	run(t, ctrl)
	first := e.waitImage(t, e.v1, 2*time.Minute)
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.LastError != "" })
	if st.LastErrorClass != "stalled" || !strings.Contains(st.LastError, "renders differently each time") || !strings.Contains(st.LastError, "nonce") {
		t.Errorf("status = %q (%s), want the unstable chart held, naming the field", st.LastError, st.LastErrorClass)
	}
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.LastReconcile.After(st.LastReconcile.Add(11 * time.Second)) })
	if s, _ := e.service(t.Context(), "web"); !unwritten(first, s) {
		t.Errorf("the unstable chart was redeployed: %v → %v", first, s)
	}
}

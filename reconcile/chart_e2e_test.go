package reconcile_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
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
	if before == nil || after == nil || after.Version.Index != before.Version.Index {
		t.Errorf("the broken chart touched the service: %v → %v", before, after)
	}
	if got := e.events.of(notify.SyncFailed); len(got) == 0 || got[len(got)-1].Revision != broken {
		t.Errorf("sync-failed events = %+v, want one for the broken commit", got)
	}
}

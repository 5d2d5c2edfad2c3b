package reconcile_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/client"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/wire"
)

// edgeCharts are two charts in the layout published Swarm charts use: a
// templated requirements.yaml of mappings. edge joins one external overlay
// it asks to have created; strict needs one the operator provides and one
// the application may not use.
func edgeCharts(image string) map[string]string {
	return map[string]string{
		"charts/edge/Chart.yaml": "name: edge\ndescription: A service behind a shared overlay\nversion: 0.1.0\nappVersion: \"1\"\n" +
			"maintainers:\n  - name: Edge team\n    url: https://git.example.org/edge\nkeywords: [edge]\n",
		"charts/edge/values.yaml": fmt.Sprintf("image: %s\nnetwork: traefik-public\n", image),
		"charts/edge/requirements.yaml": `networks:
  - name: "{{ .Values.network }}"
    driver: overlay
    attachable: true
    autoCreate: true
    description: "Overlay network shared with the edge proxy"
secrets: []
configs: []
`,
		"charts/edge/templates/stack.yaml.tmpl": `version: "3.9"
services:
  web:
    image: {{ .Values.image }}
    networks: [{{ .Values.network }}]
    deploy:
      endpoint_mode: dnsrr
      replicas: 1
networks:
  {{ .Values.network }}:
    external: true
`,
		"charts/strict/Chart.yaml":  "name: strict\nversion: 0.1.0\n",
		"charts/strict/values.yaml": fmt.Sprintf("image: %s\n", image),
		"charts/strict/requirements.yaml": `networks:
  - name: "{{ .Values.provided }}"
    autoCreate: false
    description: "Provided by the platform team"
  - name: "{{ .Values.forbidden }}"
    description: "Not in the allow list"
`,
		"charts/strict/templates/stack.yaml.tmpl": `services:
  web:
    image: {{ .Values.image }}
    networks: [{{ .Values.provided }}, {{ .Values.forbidden }}]
    deploy: {endpoint_mode: dnsrr, replicas: 1}
networks:
  {{ .Values.provided }}: {external: true}
  {{ .Values.forbidden }}: {external: true}
`,
	}
}

// chartAppAllowing is an automated application of release rendering chart
// with values, whose allow list names networks.
func (e *env) chartAppAllowing(name, release, chart, values string, networks ...string) string {
	app := strings.Replace(e.app(name, true), "    release: "+e.ns+"\n", "    release: "+release+"\n", 1)
	return app + fmt.Sprintf("    chart: {path: %s, values: [%s]}\n    allow: {networks: [%s]}\n", chart, values, strings.Join(networks, ", "))
}

// networkNamed returns the network called exactly name, or nil.
func networkNamed(ctx context.Context, cli *client.Client, name string) (*network.Summary, error) {
	list, err := cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return nil, err
	}
	var out *network.Summary
	for i, n := range list {
		if n.Name == name {
			if out != nil {
				return nil, fmt.Errorf("two networks named %s", name)
			}
			out = &list[i]
		}
	}
	return out, nil
}

func TestRequiredNetworkIsCreatedOnceAndOutlivesItsCreator(t *testing.T) {
	e := newEnv(t)
	shared, provided, forbidden := e.ns+"-edge", e.ns+"-provided", e.ns+"-forbidden"
	relB, relC := e.ns+"-b", e.ns+"-c"
	t.Cleanup(func() {
		// The network is no stack's: remove it once every stack using it is gone.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
		defer cancel()
		for _, ns := range []string{e.ns, relB, relC} {
			if err := harness.RemoveStack(ctx, e.cli, ns); err != nil {
				t.Errorf("cleanup of stack %s: %v", ns, err)
			}
		}
		for ctx.Err() == nil {
			n, err := networkNamed(ctx, e.cli, shared)
			if err == nil && n == nil {
				return
			}
			if err == nil {
				if err = e.cli.NetworkRemove(ctx, n.ID); err == nil || cerrdefs.IsNotFound(err) {
					return
				}
			}
			time.Sleep(time.Second) // tasks still drain from the network
		}
		t.Errorf("cleanup of network %s: %v", shared, ctx.Err())
	})
	files := edgeCharts(e.v1)
	files["envs/a.yaml"] = "network: " + shared + "\n"
	files["envs/b.yaml"] = "network: " + shared + "\n"
	files["envs/c.yaml"] = fmt.Sprintf("provided: %s\nforbidden: %s\n", provided, forbidden)
	e.repo.Commit(t, "main", files)
	appB := e.chartAppAllowing("b", relB, "charts/edge", "envs/b.yaml", shared)
	appC := e.chartAppAllowing("c", relC, "charts/strict", "envs/c.yaml", provided)
	apps := writeFile(t, t.TempDir(), "apps.yaml", appSet(e.chartAppAllowing("a", e.ns, "charts/edge", "envs/a.yaml", shared), appB, appC))
	ctrl := e.controllerWith(t, appset.FileSource{Path: apps}, reconcile.Options{PruneApplications: true})
	run(t, ctrl)

	// The missing overlay is created with the given driver and
	// attachability, labelled as this controller's requirement, and both
	// releases deploy on it.
	svcA := waitService(t, e, e.ns+"_web", e.v1)
	svcB := waitService(t, e, relB+"_web", e.v1)
	net, err := networkNamed(t.Context(), e.cli, shared)
	if err != nil || net == nil {
		t.Fatalf("network %s: %v %v, want it created", shared, net, err)
	}
	if net.Driver != "overlay" || !net.Attachable || net.Scope != "swarm" {
		t.Errorf("network %s: driver %q, attachable %t, scope %q; want an attachable swarm overlay", shared, net.Driver, net.Attachable, net.Scope)
	}
	if l := net.Labels; l[stack.LabelController] != e.id || l[stack.LabelKind] != stack.KindRequirement || l[stack.LabelNamespace] != "" ||
		(l[stack.LabelRelease] != e.ns && l[stack.LabelRelease] != relB) {
		t.Errorf("network %s labels = %v, want this controller's requirement of a or b, in no stack namespace", shared, l)
	}
	for _, s := range []struct{ name, id string }{{"a", svcA.ID}, {"b", svcB.ID}} {
		svc, _, err := e.cli.ServiceInspectWithRaw(t.Context(), s.id, swarm.ServiceInspectOptions{})
		if err != nil || !slices.ContainsFunc(svc.Spec.TaskTemplate.Networks, func(a swarm.NetworkAttachmentConfig) bool { return a.Target == net.ID }) {
			t.Errorf("service of %s: %v, attached to %v; want %s", s.name, err, svc.Spec.TaskTemplate.Networks, net.ID)
		}
	}

	// The API shows what requirements.yaml says of the network.
	hist, err := api.NewController(ctrl).History(t.Context(), "b")
	if err != nil || len(hist.Releases) != 1 || len(hist.Releases[0].Revisions) == 0 {
		t.Fatalf("history of b = %+v, %v", hist, err)
	}
	revs := hist.Releases[0].Revisions
	want := []wire.RevisionRequirement{{Kind: "network", Name: shared, Description: "Overlay network shared with the edge proxy", AutoCreate: true}}
	if c := revs[len(revs)-1].Chart; c == nil || !slices.Equal(c.Requirements, want) {
		t.Errorf("history of b, chart = %+v, want requirements %+v", c, want)
	}

	// A network the chart does not ask to create, and one the application
	// may not use, stay missing: the sync stalls naming both.
	// The first tick may come before the live snapshot, which checks only
	// the allow list; the next one sees the swarm.
	st := waitStatus(t, ctrl, "c", 2*time.Minute, func(s reconcile.AppStatus) bool { return strings.Contains(s.LastError, provided) })
	for _, want := range []string{
		fmt.Sprintf("network %q (Provided by the platform team) does not exist on the swarm", provided),
		fmt.Sprintf("network %q (Not in the allow list) is not in the application's allow list", forbidden),
	} {
		if !strings.Contains(st.LastError, want) || st.LastErrorClass != "stalled" {
			t.Errorf("c: %q (%s), want a stalled error saying %q", st.LastError, st.LastErrorClass, want)
		}
	}
	for _, name := range []string{provided, forbidden} {
		if n, err := networkNamed(t.Context(), e.cli, name); err != nil || n != nil {
			t.Errorf("network %s = %v, %v; want it left uncreated", name, n, err)
		}
	}

	// a leaves the app set and its release is pruned; the network stays
	// for b, which keeps running on it. Both are healthy first, so the
	// controller's live snapshot holds a's service when the prune looks.
	for _, name := range []string{"a", "b"} {
		waitStatus(t, ctrl, name, 2*time.Minute, func(s reconcile.AppStatus) bool { return s.Health == health.Healthy })
	}
	writeFile(t, filepath.Dir(apps), "apps.yaml", appSet(appB, appC))
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		s, err := e.service(ctx, "web")
		return s == nil && err == nil, "a's service still deployed"
	})
	waitPruneChecks(t, ctrl, 2)
	if n, err := networkNamed(t.Context(), e.cli, shared); err != nil || n == nil || n.ID != net.ID {
		t.Errorf("network %s after a was pruned = %v, %v; want it kept for b", shared, n, err)
	}
	if s, err := e.serviceNamed(t, relB+"_web"); err != nil || s == nil || s.ID != svcB.ID {
		t.Errorf("b's service after a was pruned = %v, %v; want it untouched", s, err)
	}
}

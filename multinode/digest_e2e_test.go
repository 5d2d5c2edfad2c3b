package multinode_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/reconcile"
)

// digestCompose runs four tasks on four of the five nodes, each answering
// on its node's address: the fifth node has never pulled the image.
const digestCompose = `services:
  web:
    image: ${IMAGE}
    deploy:
      endpoint_mode: dnsrr
      replicas: 4
      placement: {max_replicas_per_node: 1}
    ports:
      - {target: 8080, published: %d, mode: host}
`

// TestATagMovedAfterTheDeployNeverGivesANodeOtherCode: the release names
// a tag; the controller pins it to the digest the registry gave at deploy
// time. The tag is then moved to another image, and a node that never ran
// the service starts a task (the swarm moves one there from a drained
// node): it pulls by digest and runs the same code as the others, and the
// move of the tag alone writes nothing.
func TestATagMovedAfterTheDeployNeverGivesANodeOtherCode(t *testing.T) {
	e := newEnv(t)
	repo := harness.Name(t, "moving")
	ref := e.cl.Registry.Push(t, e.main, harness.TestImage(t, e.main, harness.ImageOptions{Version: "first"}), repo, "live")
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": fmt.Sprintf(digestCompose, port), ".env": "IMAGE=" + ref + "\n"})
	ctrl := e.controller(t, e.app("web"))
	waitStatus(t, ctrl, "web", 3*time.Minute, func(s reconcile.AppStatus) bool {
		return s.Sync == reconcile.Synced && s.Health == health.Healthy
	})
	before := e.services(t)["web"]
	pinned := before.Spec.TaskTemplate.ContainerSpec.Image
	if !strings.HasPrefix(pinned, ref+"@sha256:") {
		t.Fatalf("web runs %s, want %s pinned to a digest", pinned, ref)
	}
	perNode := e.perNode(t, before)
	var busy, fresh string
	for _, n := range e.cl.Nodes {
		switch {
		case perNode[n.Name] == 0:
			fresh = n.Name
		case !n.Manager && busy == "":
			busy = n.Name
		}
	}
	if fresh == "" || busy == "" {
		t.Fatalf("tasks per node %v: want a node without a task and a worker with one", perNode)
	}
	seen := len(e.events.all())

	// The tag moves: the same reference now names another image.
	e.cl.Registry.Push(t, e.main, harness.TestImage(t, e.main, harness.ImageOptions{Version: "second"}), repo, "live")
	e.cl.Drain(t, e.cl.Node(t, busy))
	e.waitMoved(t, busy, 4)
	if got := e.perNode(t, before); got[fresh] != 1 {
		t.Fatalf("tasks per node %v after draining %s, want one on %s, which never ran web", got, busy, fresh)
	}
	for _, n := range e.cl.Nodes {
		if n.Name == busy || e.perNode(t, before)[n.Name] == 0 {
			continue
		}
		url := fmt.Sprintf("http://%s:%d/", n.Addr, port)
		harness.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			body := harness.HTTPGet(t, url, time.Minute)
			return strings.Contains(body, `"first"`), fmt.Sprintf("node %s answers %s", n.Name, body)
		})
	}
	if now := e.services(t)["web"]; !unwritten(before, now) {
		t.Errorf("web was written after the tag moved: image %s", now.Spec.TaskTemplate.ContainerSpec.Image)
	}
	for _, ev := range e.events.since(seen) {
		switch ev.Type {
		case notify.SyncStarted, notify.DriftDetected, notify.LiveDriftDetected, notify.DriftConverged:
			t.Errorf("event %s after the tag moved: %s", ev.Type, ev.Message)
		}
	}
}

package reconcile_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/volume"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/egress"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/reconcile"
	"github.com/skep-cd/skep/stack"
)

// Commits a hostile committer to an application's repository may push:
// each is refused before anything reaches the swarm, and the running
// release stays as it was (docs/security.md).
func TestHostileCommitsAreRefusedBeforeTheSwarm(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	// Another stack's data: a volume the release must not mount.
	victim := e.ns + "-victim_data"
	if _, err := e.cli.VolumeCreate(t.Context(), volume.CreateOptions{Name: victim}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.cli.VolumeRemove(context.WithoutCancel(t.Context()), victim, true) })
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	policy, err := egress.Parse(egress.DefaultAllow)
	if err != nil {
		t.Fatal(err)
	}
	ctrl := e.controllerWith(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.app("web", true)))},
		reconcile.Options{CheckAddress: policy.CheckHost})
	run(t, ctrl)
	before := e.waitImage(t, e.v1, 2*time.Minute)

	withVolume := func(mount, volumes string) string {
		return strings.Replace(compose(port), "    configs:\n      - source", "    volumes:\n      - "+mount+"\n    configs:\n      - source", 1) + "volumes:\n" + volumes
	}
	for _, tc := range []struct {
		name, compose, want string
	}{
		{
			name:    "the node's root through a local volume's rbind",
			compose: withVolume("root:/host", "  root:\n    driver_opts:\n      type: none\n      o: \"ro, rbind\"\n      device: /\n"),
			want:    "volumes.root.driver_opts.device: host path / is not allowed",
		},
		{
			name:    "another stack's volume by its real name",
			compose: withVolume("data:/var/lib/data", "  data:\n    name: "+victim+"\n"),
			want:    fmt.Sprintf("volumes.data: volume %q is outside release %s's namespace", victim, e.ns),
		},
		{
			name:    "a config forging a revision record",
			compose: strings.Replace(compose(port), "    file: ./settings.txt\n", "    file: ./settings.txt\n    labels:\n      io.skep.kind: revision\n      io.skep.revision: \"99\"\n", 1),
			want:    "compose.yaml:18: configs.settings.labels.io.skep.kind: label io.skep.kind is reserved for skep",
		},
		{
			name:    "a log driver sending to the metadata endpoint",
			compose: strings.Replace(compose(port), "    configs:\n      - source", "    logging:\n      driver: syslog\n      options:\n        syslog-address: tcp://169.254.169.254:514\n    configs:\n      - source", 1),
			want:    "services.web.logging.options.syslog-address: address refused: 169.254.169.254 is an internal address",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := e.repo.Commit(t, "main", map[string]string{"compose.yaml": tc.compose})
			st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
				return s.Revision == bad && s.LastError != ""
			})
			if !strings.Contains(st.LastError, tc.want) || st.LastErrorClass != "stalled" {
				t.Errorf("error = %q (%s), want a stalled error saying %q", st.LastError, st.LastErrorClass, tc.want)
			}
			live, err := e.service(t.Context(), "web")
			if err != nil || !unwritten(before, live) {
				t.Errorf("a refused commit touched the service: %v, %v", live, err)
			}
			forged, err := e.cli.ConfigList(t.Context(), swarm.ConfigListOptions{Filters: filters.NewArgs(
				filters.Arg("label", stack.LabelNamespace+"="+e.ns), filters.Arg("label", stack.LabelRevision+"=99"))})
			if err != nil || len(forged) > 0 {
				t.Errorf("configs labelled revision 99 = %d (%v), want none", len(forged), err)
			}
			e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port)})
		})
	}
}

// A config that carries the labels of a revision but holds none (as a
// commit could make before labels in skep's namespace were refused) is
// skipped and reported: the release keeps deploying, and its history
// still reads.
func TestARevisionRecordThatDoesNotDecodeIsSkippedNotAWedge(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port), "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.app("web", true)))})
	run(t, ctrl)
	e.waitImage(t, e.v1, 2*time.Minute)

	labels := stack.Owner{Controller: e.id, Application: "web", Release: e.ns}.Labels()
	labels[stack.LabelKind], labels[stack.LabelRevision] = stack.KindRevision, "99"
	forged := e.ns + "_forged-1a2b3c4d5e"
	if _, err := e.cli.ConfigCreate(t.Context(), swarm.ConfigSpec{Annotations: swarm.Annotations{Name: forged, Labels: labels}, Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	good := e.repo.Commit(t, "main", map[string]string{".env": "IMAGE=" + e.v2 + "\n"})
	e.waitImage(t, e.v2, time.Minute)
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return s.DeployedRevision == good && s.LastError == "" })
	if !strings.Contains(strings.Join(st.Warnings, "\n"), fmt.Sprintf("revision config %q: decode revision", forged)) {
		t.Errorf("status warnings = %q, want the skipped record named", st.Warnings)
	}
	revs, err := ctrl.Revisions(t.Context(), "web", "")
	if err != nil || len(revs) < 2 || revs[len(revs)-1].Commit != good {
		t.Errorf("history = %d revisions, %v; want the deployed ones, the newest at %s", len(revs), err, good)
	}
}

// syncBuffer is a log sink the controller writes while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

// Options Swarm has not (privileged, network_mode: host) are dropped as
// docker stack deploy drops them; the controller says so in its log once
// per commit, and in the status the API and the UI show.
func TestRenderWarningsReachTheLogOnceAndTheStatus(t *testing.T) {
	e := newEnv(t)
	port := harness.FreePort(t)
	dropped := strings.Replace(compose(port), "    configs:\n      - source", "    privileged: true\n    configs:\n      - source", 1)
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": dropped, "settings.txt": "one\n", ".env": "IMAGE=" + e.v1 + "\n"})
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctrl := e.controllerWith(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(e.app("web", true)))}, reconcile.Options{Logger: logger})
	run(t, ctrl)
	e.waitImage(t, e.v1, 2*time.Minute)
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return len(s.Warnings) > 0 })
	if want := "ignoring unsupported options: privileged"; len(st.Warnings) != 1 || st.Warnings[0] != want {
		t.Errorf("status warnings = %q, want [%q]", st.Warnings, want)
	}
	// Two more intervals (10s each) pass on the same commit.
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
		return s.LastReconcile.After(st.LastReconcile.Add(21 * time.Second))
	})
	const line = `level=WARN msg="render warning" app=web`
	if n := logs.count(line); n != 1 {
		t.Errorf("%q logged %d times over three ticks of one commit, want once", line, n)
	}
	if st, _ := ctrl.Statuses().Get("web"); len(st.Warnings) != 1 {
		t.Errorf("status warnings after quiet ticks = %q, want them kept", st.Warnings)
	}
	// A commit without the option clears them.
	e.repo.Commit(t, "main", map[string]string{"compose.yaml": compose(port)})
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return len(s.Warnings) == 0 && s.LastError == "" })
}

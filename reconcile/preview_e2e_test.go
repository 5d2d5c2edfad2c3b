package reconcile_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/harness"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/preview"
	"github.com/skep-cd/skep/reconcile"
)

// jsonLog collects what a JSON handler writes, as `--log-format json`
// makes it, and passes it on to the test's output.
type jsonLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
	out io.Writer
}

func (l *jsonLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	return l.out.Write(p)
}

// lines returns each record written so far, decoded, and every key one of
// them holds twice.
func (l *jsonLog) lines(t *testing.T) (records []map[string]any, duplicates []string) {
	t.Helper()
	l.mu.Lock()
	data := bytes.Clone(l.buf.Bytes())
	l.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, sc.Bytes())
		}
		records = append(records, rec)
		// Unmarshal keeps the last of two equal keys; the tokens show both.
		keys, err := topLevelKeys(sc.Bytes())
		if err != nil {
			t.Fatalf("log line %s: %v", sc.Bytes(), err)
		}
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[k] {
				duplicates = append(duplicates, fmt.Sprintf("%s twice: %s", k, sc.Bytes()))
			}
			seen[k] = true
		}
	}
	return records, duplicates
}

// topLevelKeys lists the keys of the JSON object line, in order, repeats
// included.
func topLevelKeys(line []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		keys = append(keys, key)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// previewService returns the web service of the preview release named, or
// nil.
func (e *artifactEnv) previewService(ctx context.Context, release string) (*swarm.Service, error) {
	return harness.ServiceNamed(ctx, e.cli, release+"_web")
}

func TestPreviewPerBranchFollowsItsImageAndGoesWithTheBranch(t *testing.T) {
	e := newArtifactEnv(t)
	main, other := harness.FreePort(t), harness.FreePort(t)
	if other < main {
		main, other = other, main
	}
	shift := other - main
	head := e.source.Commit(t, "main", map[string]string{"README": "main\n"})
	e.registry.Push(t, e.cli, e.v1, "team/web", head)
	files := e.webArtifact("branch: main\n    preview: true")
	files["compose.yaml"], files["settings.txt"] = imageCompose(main), "one\n"
	e.repo.Commit(t, "main", files)
	app := e.artifactApp("") + fmt.Sprintf("      previews:\n        baseDomain: example.org\n        portShift: %d\n", shift)
	logs := &jsonLog{out: t.Output()}
	ctrl := e.controllerWith(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(app))},
		reconcile.Options{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	run(t, ctrl)
	mainImage := e.waitImagePrefix(t, e.image+":"+head+"@sha256:", 2*time.Minute)
	mainSvc, err := e.service(t.Context(), "web")
	if err != nil || mainSvc == nil {
		t.Fatal(err)
	}

	// A branch with its image pushed gets a preview that answers on its own
	// (shifted) host port with the branch's version.
	feature := e.source.Commit(t, "feature/login", map[string]string{"README": "feature\n"})
	e.registry.Push(t, e.cli, e.v2, "team/web", feature)
	release := preview.Name(e.ns, "feature/login")
	harness.CleanupStack(t, e.cli, release)
	var svc *swarm.Service
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		svc, err = e.previewService(ctx, release)
		if err != nil || svc == nil {
			return false, fmt.Sprintf("preview service %s_web: %v (absent)", release, err)
		}
		return strings.HasPrefix(svc.Spec.TaskTemplate.ContainerSpec.Image, e.image+":"+feature+"@"), "image " + svc.Spec.TaskTemplate.ContainerSpec.Image
	})
	domain := preview.Hash("feature/login") + ".web.testing.example.org"
	if got := svc.Spec.Labels[preview.LabelDomain]; got != domain {
		t.Errorf("preview domain label = %q, want %q", got, domain)
	}
	if got := svc.Spec.Labels[preview.LabelBranch]; got != "feature/login" {
		t.Errorf("preview branch label = %q", got)
	}
	if body := harness.HTTPGet(t, fmt.Sprintf("http://127.0.0.1:%d/", other), 2*time.Minute); !strings.Contains(body, `"v2"`) {
		t.Errorf("the preview answered %s, want the branch's v2", body)
	}
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return len(s.Previews) == 1 && s.Previews[0].Deployed })
	if p := st.Previews[0]; p.Branch != "feature/login" || p.Domain != domain || p.Commit != feature {
		t.Errorf("preview status = %+v", p)
	}
	// Each line of the preview's apply names its release once: a JSON log
	// with a key twice is read differently by each consumer.
	records, duplicates := logs.lines(t)
	applied := 0
	for _, rec := range records {
		if rec["msg"] == "apply object" && rec["release"] == release {
			applied++
		}
	}
	if applied == 0 {
		t.Errorf("no apply object line names release %s in %d log lines", release, len(records))
	}
	for _, d := range duplicates {
		t.Errorf("log line holds key %s", d)
	}

	// A commit on the branch without its image: the preview keeps the old
	// version until the image appears.
	second := e.source.Commit(t, "feature/login", map[string]string{"README": "feature two\n"})
	waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool {
		return len(s.Previews) == 1 && s.Previews[0].Commit == second
	})
	if s, _ := e.previewService(t.Context(), release); s == nil || !strings.Contains(s.Spec.TaskTemplate.ContainerSpec.Image, feature) {
		t.Fatalf("the preview moved before the new commit's image was pushed: %v", s)
	}
	e.registry.Push(t, e.cli, e.v1, "team/web", second)
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		s, err := e.previewService(ctx, release)
		if err != nil || s == nil {
			return false, fmt.Sprint(err)
		}
		return strings.Contains(s.Spec.TaskTemplate.ContainerSpec.Image, second), s.Spec.TaskTemplate.ContainerSpec.Image
	})

	// The branch goes: so does its preview, and nothing of the main release.
	e.source.DeleteBranch(t, "feature/login")
	harness.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		s, err := e.previewService(ctx, release)
		return err == nil && s == nil, fmt.Sprintf("preview service still there: %v", err)
	})
	// The event follows the deletions it reports: wait for it too.
	harness.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
		for _, ev := range e.events.of(notify.ResourcesPruned) {
			if strings.Contains(ev.Message, release) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("no resources-pruned event names %s: %+v", release, e.events.of(notify.ResourcesPruned))
	})
	after, err := e.service(t.Context(), "web")
	// The version index is no measure: Swarm moves it itself as a new
	// service's status settles. A write changes the spec or, when the
	// spec is the same, sets the previous spec.
	if err != nil || after == nil || after.ID != mainSvc.ID || after.Spec.TaskTemplate.ContainerSpec.Image != mainImage ||
		!reflect.DeepEqual(after.Spec, mainSvc.Spec) || !reflect.DeepEqual(after.PreviousSpec, mainSvc.PreviousSpec) {
		t.Errorf("the main release was touched: %v → %v (%v)", mainSvc.Version, after, err)
	}
}

func TestPreviewIsReportedAndIgnoredOutsideItsEnvironments(t *testing.T) {
	e := newArtifactEnv(t)
	port := harness.FreePort(t)
	head := e.source.Commit(t, "main", map[string]string{"README": "main\n"})
	e.source.Commit(t, "feature/x", map[string]string{"README": "x\n"})
	e.registry.Push(t, e.cli, e.v1, "team/web", head)
	files := map[string]string{"compose.yaml": imageCompose(port), "settings.txt": "one\n"}
	for name, content := range e.webArtifact("branch: main\n    preview: true") {
		files[strings.Replace(name, "/testing/", "/production/", 1)] = content
	}
	e.repo.Commit(t, "main", files)
	app := strings.Replace(e.artifactApp(""), "environment: testing", "environment: production", 1)
	ctrl := e.controller(t, appset.FileSource{Path: writeFile(t, t.TempDir(), "apps.yaml", appSet(app))})
	run(t, ctrl)
	e.waitImagePrefix(t, e.image+":"+head+"@", 2*time.Minute)
	st := waitStatus(t, ctrl, "web", time.Minute, func(s reconcile.AppStatus) bool { return len(s.PreviewProblems) > 0 })
	if !strings.Contains(st.PreviewProblems[0], "ignored in environment production") || len(st.Previews) != 0 {
		t.Errorf("preview problems %q, previews %+v; want preview: true reported as ignored and no preview", st.PreviewProblems, st.Previews)
	}
	if s, _ := e.previewService(t.Context(), preview.Name(e.ns, "feature/x")); s != nil {
		t.Errorf("a preview runs outside its environments: %s", s.Spec.Name)
	}
}

package reconcile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/skep-cd/skep/appset"
)

func TestPruneGatesDoNotCountTheAskingApplication(t *testing.T) {
	file := filepath.Join(t.TempDir(), "apps.yaml")
	doc := "apiVersion: skep/v1\napplications:\n  - {name: web, source: {repo: /r}}\n  - {name: api, source: {repo: /r}}\n  - {name: db, source: {repo: /r}}\n"
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Controller{watcher: appset.NewWatcher(appset.FileSource{Path: file}), status: NewStatuses()}
	if _, err := c.watcher.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.status.Update("db", func(s *AppStatus) { s.LastReconcile = time.Now() })

	// web's first reconcile prunes its own release: web is not waited for,
	// api (never reconciled) is.
	if got := c.gates("web", "web").NotReconciled; !slices.Equal(got, []string{"api"}) {
		t.Errorf("gates(web).NotReconciled = %v, want [api]", got)
	}
	// A release nobody declares is pruned for no application: all count.
	if got := c.gates("", "gone").NotReconciled; !slices.Equal(got, []string{"web", "api"}) {
		t.Errorf("gates(\"\").NotReconciled = %v, want [web api]", got)
	}
}

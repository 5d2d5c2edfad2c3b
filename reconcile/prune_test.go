package reconcile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/stack"
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

// orphanWant is an expected Orphan on the local swarm: its application,
// release and a part of its reason.
type orphanWant struct{ app, release, reason string }

func TestOrphansSayWhyNothingWasPruned(t *testing.T) {
	const apps = "apiVersion: skep/v1\napplications:\n" +
		"  - {name: web, release: web-v2, source: {repo: /r}, syncPolicy: {prune: false}}\n" +
		"  - {name: api, release: api-v2, source: {repo: /r}, syncPolicy: {prune: true}}\n" +
		"  - {name: db, source: {repo: /r}}\n" +
		"  - {name: cache, source: {repo: /r}, destination: {swarm: edge}}\n" +
		"  - {name: queue, source: {repo: /r}, destination: {swarm: edge}, syncPolicy: {prune: true}}\n"
	owners := []stack.Owner{
		{Application: "cache", Release: "cache"},         // cache moved to edge
		{Application: "web", Release: "web-v2"},          // declared
		{Application: "web", Release: "web-v2-1d0fd508"}, // web's preview
		{Application: "web", Release: "web"},             // web's old release
		{Application: "api", Release: "api"},             // api's old release
		{Application: "gone", Release: "gone"},           // left the set
		{Application: "old-db", Release: "db"},           // renamed to db
		{Application: "queue", Release: "queue"},         // queue moved to edge, not synced there yet
	}
	for _, tc := range []struct {
		name      string
		files     []string // loaded in turn; the last may fail
		pruneApps bool
		reconcile []string     // applications that reconciled once
		want      []orphanWant // on the local swarm
	}{
		{name: "an app set that never loaded leaves every release, saying why", files: []string{"applications: ["},
			want: []orphanWant{
				{"api", "api", "app set not loaded: "}, {"cache", "cache", "app set not loaded: "}, {"gone", "gone", "app set not loaded: "},
				{"old-db", "db", "app set not loaded: "}, {"queue", "queue", "app set not loaded: "}, {"web", "web", "app set not loaded: "}, {"web", "web-v2", "app set not loaded: "},
				{"web", "web-v2-1d0fd508", "app set not loaded: "},
			}},
		{name: "an empty app set holds pruning", files: []string{"apiVersion: skep/v1\napplications: []\n"}, pruneApps: true,
			want: []orphanWant{
				{"api", "api", "app set is empty; pruning held"}, {"cache", "cache", "app set is empty; pruning held"},
				{"gone", "gone", "app set is empty; pruning held"}, {"old-db", "db", "app set is empty; pruning held"}, {"queue", "queue", "app set is empty; pruning held"},
				{"web", "web", "app set is empty; pruning held"}, {"web", "web-v2", "app set is empty; pruning held"}, {"web", "web-v2-1d0fd508", "app set is empty; pruning held"},
			}},
		{name: "a broken app set after a good one keeps what the good one declared", files: []string{apps, "applications: ["}, pruneApps: true,
			want: []orphanWant{{"api", "api", "app set not loaded: "}, {"cache", "cache", "app set not loaded: "}, {"gone", "gone", "app set not loaded: "},
				{"queue", "queue", "app set not loaded: "}, {"web", "web", "app set not loaded: "}}},
		{name: "without --prune a removed application stays", files: []string{apps}, reconcile: []string{"web", "api", "db", "cache", "queue"},
			want: []orphanWant{{"api", "api", "to be pruned at the next check"}, {"cache", "cache", `application moved to swarm "edge"; kept: its syncPolicy.prune is off`},
				{"gone", "gone", "kept: the controller runs without --prune"},
				{"queue", "queue", `application moved to swarm "edge"; kept until the move is synced there`},
				{"web", "web", "kept: its syncPolicy.prune is off"}}},
		{name: "with --prune, pruning waits for every application's first reconcile", files: []string{apps}, pruneApps: true, reconcile: []string{"web"},
			want: []orphanWant{{"api", "api", "prune held: not every application has reconciled once (db, cache, queue)"}, {"cache", "cache", "moved to"},
				{"gone", "gone", "prune held: not every application has reconciled once (api, db, cache, queue)"},
				{"queue", "queue", "kept until the move is synced there"},
				{"web", "web", "kept: its syncPolicy.prune is off"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "apps.yaml")
			c := &Controller{id: "c1", watcher: appset.NewWatcher(appset.FileSource{Path: file}), status: NewStatuses(), pruneApps: tc.pruneApps}
			for _, doc := range tc.files {
				if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
					t.Fatal(err)
				}
				_, _ = c.watcher.Reload(t.Context()) // a failed load is part of the case
			}
			for _, name := range tc.reconcile {
				c.status.Update(name, func(s *AppStatus) { s.LastReconcile = time.Now() })
			}
			got := c.orphansOf("", time.Time{}, owners)
			if len(got) != len(tc.want) {
				t.Fatalf("orphans = %+v, want %d: %+v", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Application != w.app || g.Release != w.release || g.Swarm != "" || !strings.Contains(g.Reason, w.reason) {
					t.Errorf("orphan %d = %+v, want %s/%s on the local swarm saying %q", i, g, w.app, w.release, w.reason)
				}
			}
		})
	}
}

// A snapshot taken before an application's last write ended may show the
// revision that write recorded but not the services it created (the
// watcher lists services before configs): pruning on it would remove the
// records of a release that still runs.
func TestPruneHeldUntilTheSnapshotHasSeenTheApplicationsLastWrite(t *testing.T) {
	file := filepath.Join(t.TempDir(), "apps.yaml")
	doc := "apiVersion: skep/v1\napplications:\n  - {name: web, source: {repo: /r}}\n"
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	wrote := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	owners := []stack.Owner{{Application: "gone", Release: "gone"}}
	for _, tc := range []struct {
		name    string
		taken   time.Time
		wrote   bool // gone's last write ended at wrote
		writing bool // gone has a write in flight
		there   bool // both to another swarm than the pruned release's
		want    string
	}{
		{name: "an application that never wrote is pruned on any snapshot", taken: wrote.Add(-time.Second), want: "to be pruned at the next check"},
		{name: "a snapshot taken after the write ended is pruned on", taken: wrote.Add(time.Second), wrote: true, want: "to be pruned at the next check"},
		{name: "a snapshot taken before the write ended holds the prune", taken: wrote.Add(-time.Second), wrote: true,
			want: "prune held: the live snapshot has not seen the latest writes (gone)"},
		{name: "a snapshot taken as the write ended holds the prune", taken: wrote, wrote: true,
			want: "prune held: the live snapshot has not seen the latest writes (gone)"},
		{name: "a write in flight holds the prune on any snapshot", taken: wrote.Add(time.Second), wrote: true, writing: true,
			want: "prune held: the live snapshot has not seen the latest writes (gone)"},
		{name: "a write to another swarm never holds the prune", taken: wrote.Add(-time.Second), wrote: true, writing: true, there: true,
			want: "to be pruned at the next check"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Controller{id: "c1", watcher: appset.NewWatcher(appset.FileSource{Path: file}), status: NewStatuses(),
				pruneApps: true}
			if _, err := c.watcher.Reload(t.Context()); err != nil {
				t.Fatal(err)
			}
			c.status.Update("web", func(s *AppStatus) { s.LastReconcile = time.Now() })
			swarmName := ""
			if tc.there {
				swarmName = "two"
			}
			if tc.wrote {
				c.live.beginWrite(swarmName, "gone", func() time.Time { return wrote })()
			}
			if tc.writing {
				defer c.live.beginWrite(swarmName, "gone", time.Now)()
			}
			got := c.orphansOf("", tc.taken, owners)
			if len(got) != 1 || got[0].Reason != tc.want {
				t.Errorf("orphans = %+v, want gone/gone saying %q", got, tc.want)
			}
		})
	}
}

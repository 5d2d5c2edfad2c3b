package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/skep-cd/skep/wire"
)

func TestAppGetShowsArtifactsAndPreviews(t *testing.T) {
	d := wire.ApplicationDetail{Application: wire.Application{Name: "web", Sync: "out-of-sync", Health: "healthy", Phase: "idle",
		Artifacts: []wire.Artifact{
			{Name: "web", Kind: "service", Strategy: "release", Desired: "v2", Current: "v1", Version: "v1", Condition: "waiting",
				Reason: "image r/web:v2 is not in the registry yet", Drift: wire.ArtifactWaiting},
			{Name: "infrastructure", Kind: "infrastructure", Strategy: "branch", Desired: "aaaaaaaaaaaabbbb", Current: "aaaaaaaaaaaabbbb",
				Version: "aaaaaaaaaaaabbbb", Condition: "pushed", Drift: wire.ArtifactInSync},
		},
		Previews: []wire.Preview{{Branch: "feature/a", Hash: "1d0fd508", Release: "web-1d0fd508", Commit: "cccccccccccccccc",
			Domain: "1d0fd508.web.testing.example.org", Health: "healthy", Deployed: true}},
		PreviewProblems: []string{"artifact web: more than 10 branches to preview; left out: x"},
	}}
	var out bytes.Buffer
	if err := printAppDetail(&out, d); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"Artifacts:",
		"web             service         release   v2            v1            v1            waiting: image r/web:v2 is not in the registry yet  waiting",
		"Previews:",
		"feature/a  cccccccccccc  web-1d0fd508  1d0fd508.web.testing.example.org  healthy",
		"! artifact web: more than 10 branches to preview",
	} {
		if !containsFields(text, want) {
			t.Errorf("app get output lacks %q:\n%s", want, text)
		}
	}
}

// containsFields reports whether some line of text has want's fields in
// order, whatever the column padding.
func containsFields(text, want string) bool {
	w := strings.Join(strings.Fields(want), " ")
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(strings.Join(strings.Fields(line), " "), w) {
			return true
		}
	}
	return false
}

func TestAppListAndGetSayWhichSyncWindowHoldsAnApplication(t *testing.T) {
	until := time.Date(2025, 1, 16, 5, 0, 0, 0, time.UTC)
	a := wire.Application{Name: "prod-web", Sync: "out-of-sync", Health: "healthy", Phase: "idle", Automated: true,
		SyncWindow: &wire.SyncWindow{Kind: "deny", Schedule: "0 22 * * *", TimeZone: "Europe/Berlin", Duration: "8h0m0s", Until: &until,
			ManualSync: false, Message: "held by sync window deny 0 22 * * * (until 06:00 Europe/Berlin)"}}
	var list bytes.Buffer
	if err := printAppList(&list, wire.ApplicationList{Applications: []wire.Application{a, {Name: "web", Sync: "synced", Health: "healthy", Phase: "idle"}}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"NAME GENERATOR SWARM SYNC HEALTH SERVICES REVISION DEPLOYED AUTO PHASE WAITING ERROR",
		"prod-web - - out-of-sync healthy 0/0 - - true idle window deny 0 22 * * * until 2025-01-16 06:00 Europe/Berlin -",
	} {
		if !containsFields(list.String(), want) {
			t.Errorf("app list lacks %q:\n%s", want, list.String())
		}
	}
	var get bytes.Buffer
	if err := printAppDetail(&get, wire.ApplicationDetail{Application: a}); err != nil {
		t.Fatal(err)
	}
	if want := "Sync window: held by sync window deny 0 22 * * * (until 06:00 Europe/Berlin); manual syncs refused"; !containsFields(get.String(), want) {
		t.Errorf("app get lacks %q:\n%s", want, get.String())
	}
}

func TestAppListAndGetSayWhichDependenciesAnApplicationWaitsFor(t *testing.T) {
	a := wire.Application{Name: "web", Sync: "out-of-sync", Health: "missing", Phase: "idle", Automated: true,
		DependsOn: []string{"db", "cache"}, WaitingFor: []string{"db"}, LastError: "waiting for db (progressing)", LastErrorClass: "waiting"}
	var list bytes.Buffer
	if err := printAppList(&list, wire.ApplicationList{Applications: []wire.Application{a}}); err != nil {
		t.Fatal(err)
	}
	if want := "web - - out-of-sync missing 0/0 - - true idle after db waiting for db (progressing)"; !containsFields(list.String(), want) {
		t.Errorf("app list lacks %q:\n%s", want, list.String())
	}
	var get bytes.Buffer
	if err := printAppDetail(&get, wire.ApplicationDetail{Application: a}); err != nil {
		t.Fatal(err)
	}
	if want := "Depends on: db, cache (waiting for db)"; !containsFields(get.String(), want) {
		t.Errorf("app get lacks %q:\n%s", want, get.String())
	}
}

func TestAppListAndGetShowTheGeneratorOfAGeneratedApplication(t *testing.T) {
	a := wire.Application{Name: "shop-api", Path: "stacks/Shop_API", Generator: "stacks", Sync: "synced", Health: "healthy", Phase: "idle"}
	var list bytes.Buffer
	if err := printAppList(&list, wire.ApplicationList{Applications: []wire.Application{a}}); err != nil {
		t.Fatal(err)
	}
	if want := "shop-api stacks - synced healthy"; !containsFields(list.String(), want) {
		t.Errorf("app list lacks %q:\n%s", want, list.String())
	}
	var get bytes.Buffer
	if err := printAppDetail(&get, wire.ApplicationDetail{Application: a}); err != nil {
		t.Fatal(err)
	}
	if want := "Generated: by generator stacks from directory stacks/Shop_API"; !containsFields(get.String(), want) {
		t.Errorf("app get lacks %q:\n%s", want, get.String())
	}
}

func TestAppGetShowsTheLastSyncOfAnyKindAndWhoOrWhatStartedIt(t *testing.T) {
	at := time.Date(2026, 12, 4, 18, 30, 0, 0, time.UTC)
	commit := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name string
		app  wire.Application
		want []string
	}{
		{"a drift correction names the controller and the trigger",
			wire.Application{LastApplied: &wire.AppliedSync{At: at, Revision: commit, Trigger: wire.TriggerDriftCorrection}},
			[]string{"Last sync: 0123456789ab at 2026-12-04T18:30:00Z by the controller: drift correction"}},
		{"a commit found in git names the controller and git",
			wire.Application{LastApplied: &wire.AppliedSync{At: at, Revision: commit, Trigger: wire.TriggerGit}},
			[]string{"Last sync: 0123456789ab at 2026-12-04T18:30:00Z by the controller: new commit in git"}},
		{"a requested sync names its actor, and the request is listed apart",
			wire.Application{LastApplied: &wire.AppliedSync{At: at, Revision: commit, Actor: "alice", Trigger: wire.TriggerSync},
				LastSync: &wire.SyncRecord{ID: 4, Revision: commit, Actor: "alice", Outcome: wire.OutcomeSucceeded, StartedAt: at}},
			[]string{"Last sync: 0123456789ab at 2026-12-04T18:30:00Z by alice", "Requested sync: #4 succeeded at 0123456789ab by alice"}},
		{"a sync an earlier run recorded names its actor, with no trigger",
			wire.Application{LastApplied: &wire.AppliedSync{At: at, Revision: commit, Actor: "alice"}},
			[]string{"Last sync: 0123456789ab at 2026-12-04T18:30:00Z by alice"}},
		{"one the controller made on its own, recorded by an earlier run, names the controller alone",
			wire.Application{LastApplied: &wire.AppliedSync{At: at, Revision: commit}},
			[]string{"Last sync: 0123456789ab at 2026-12-04T18:30:00Z by the controller"}},
		{"no sync known says so",
			wire.Application{},
			[]string{"Last sync: none recorded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.app
			a.Name, a.Sync, a.Health, a.Phase = "web", "synced", "healthy", "idle"
			var get bytes.Buffer
			if err := printAppDetail(&get, wire.ApplicationDetail{Application: a}); err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.want {
				if !containsFields(get.String(), want) {
					t.Errorf("app get lacks %q:\n%s", want, get.String())
				}
			}
		})
	}
}

func TestAppListAndGetSayARolloutFailedWhyAndWhatItsHoldIs(t *testing.T) {
	since := time.Date(2026, 12, 4, 18, 30, 0, 0, time.UTC)
	bad, good := "0123456789abcdef0123456789abcdef01234567", "fedcba9876543210fedcba9876543210fedcba98"
	a := wire.Application{Name: "shop", Sync: "out-of-sync", Health: "healthy", Phase: "idle", Automated: true,
		Revision: bad, DeployedRevision: good,
		RolledBack: &wire.RolledBack{Revision: bad, Restored: good, RestoredRevision: 7, Cause: "shop_api: exit code 1", Since: since},
		Cause: &wire.Cause{Line: "shop_api: exit code 1 (task: non-zero exit (1)); last log line: no database", Service: "shop_api",
			Task: "t1", Kind: "exit", ExitCode: 1, Logs: "connecting\nno database"}}
	var list bytes.Buffer
	if err := printAppList(&list, wire.ApplicationList{Applications: []wire.Application{a}}); err != nil {
		t.Fatal(err)
	}
	if want := "shop - - out-of-sync healthy 0/0 0123456789ab fedcba987654 (rolled back)"; !containsFields(list.String(), want) {
		t.Errorf("app list lacks %q:\n%s", want, list.String())
	}
	var get bytes.Buffer
	if err := printAppDetail(&get, wire.ApplicationDetail{Application: a}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Held off: 0123456789ab since 2026-12-04T18:30:00Z: its rollout failed and fedcba987654 (revision 7) was written back",
		"Cause: shop_api: exit code 1 (task: non-zero exit (1)); last log line: no database",
		"Log tail of shop_api (task t1):",
		"connecting",
	} {
		if !containsFields(get.String(), want) {
			t.Errorf("app get lacks %q:\n%s", want, get.String())
		}
	}
}

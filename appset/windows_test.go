package appset

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/window"
)

func TestSyncWindowsCoverTheApplicationsTheirGlobsMatch(t *testing.T) {
	set, err := LoadFile(filepath.Join("testdata", "valid", "windows.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	berlin, err := window.LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	nightly := window.Window{Kind: window.Deny, Schedule: window.MustParseCron("0 22 * * *"), Zone: berlin,
		Duration: 8 * time.Hour, Applications: []string{"prod-*"}, ManualSync: false}
	office := window.Window{Kind: window.Allow, Schedule: window.MustParseCron("0 9 * * 1-5"),
		Duration: 9 * time.Hour, Applications: []string{"staging"}, ManualSync: true}
	for name, want := range map[string][]window.Window{"prod-web": {nightly}, "prod-db": {nightly}, "staging": {office}} {
		a, _ := set.Lookup(name)
		if d := cmp.Diff(want, a.SyncWindows); d != "" {
			t.Errorf("%s's sync windows (-want +got):\n%s", name, d)
		}
	}
	if d := cmp.Diff([]window.Window{nightly, office}, set.SyncWindows()); d != "" {
		t.Errorf("the set's sync windows (-want +got):\n%s", d)
	}
	assertRoundTrip(t, set)
}

func TestSyncWindowsAcrossFilesCoverEveryFile(t *testing.T) {
	set, err := ParseFiles([]File{
		{Name: "apps.yaml", Data: []byte("apiVersion: skep/v1\napplications:\n  - {name: prod-web, source: {repo: /r}}\n")},
		{Name: "windows.yaml", Data: []byte("apiVersion: skep/v1\napplications: []\nsyncWindows:\n  - {kind: deny, schedule: '0 22 * * *', duration: 1h, applications: ['*']}\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := set.Lookup("prod-web"); len(a.SyncWindows) != 1 || a.SyncWindows[0].Schedule.String() != "0 22 * * *" {
		t.Errorf("prod-web's windows = %+v, want the deny window of windows.yaml", a.SyncWindows)
	}
}

func TestSyncWindowProblemsNameTheirField(t *testing.T) {
	const head = "apiVersion: skep/v1\napplications: []\nsyncWindows:\n"
	for _, tc := range []struct {
		name, windows string
		problems      []string
	}{
		{
			name:    "every key missing is reported at the window",
			windows: "  - {}\n",
			problems: []string{
				"4:5 syncWindows[0].kind: missing; want allow or deny",
				`4:5 syncWindows[0].schedule: missing; want five cron fields like "0 22 * * *" (minute hour day-of-month month day-of-week)`,
				"4:5 syncWindows[0].duration: missing; want how long the window lasts from each start, like 8h",
				`4:5 syncWindows[0].applications: missing; want globs of the application names the window covers, like ["prod-*"] or ["*"]`,
			},
		},
		{
			name:    "bad values are reported at their line and column",
			windows: "  - kind: maybe\n    schedule: '0 25 * * *'\n    duration: 0s\n    applications: ['[']\n    timeZone: Mars/Olympus\n",
			problems: []string{
				`4:11 syncWindows[0].kind: want allow or deny, got "maybe"`,
				`5:15 syncWindows[0].schedule: cron schedule "0 25 * * *": end of range (25) above maximum (23): 25`,
				"6:15 syncWindows[0].duration: want a positive duration like 8h, got 0s",
				`7:20 syncWindows[0].applications[0]: want a glob of application names like prod-* or *, got "["`,
				`8:15 syncWindows[0].timeZone: want an IANA time zone like Europe/Berlin or UTC, got "Mars/Olympus"`,
			},
		},
		{
			name:     "a schedule with seconds is refused",
			windows:  "  - {kind: deny, schedule: '0 0 22 * * *', duration: 1h, applications: ['*']}\n",
			problems: []string{`4:28 syncWindows[0].schedule: want five cron fields (minute hour day-of-month month day-of-week) like "0 22 * * *", got 6 in "0 0 22 * * *"`},
		},
		{
			name:     "an unknown key is refused",
			windows:  "  - {kind: deny, schedule: '0 22 * * *', duration: 1h, applications: ['*'], clusters: ['*']}\n",
			problems: []string{"4:77 syncWindows[0].clusters: unknown key; want one of kind, schedule, duration, applications, timeZone, manualSync"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("w.yaml", []byte(head+tc.windows))
			if d := cmp.Diff(tc.problems, problemsOf(t, err)); d != "" {
				t.Errorf("problems (-want +got):\n%s", d)
			}
		})
	}
}

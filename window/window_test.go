package window

import (
	"strings"
	"testing"
	"time"
)

func TestParseCronAcceptsFiveFieldsAndRefusesTheRest(t *testing.T) {
	for _, tc := range []struct {
		name, text, wantErr string
	}{
		{name: "every night at ten", text: "0 22 * * *"},
		{name: "ranges, lists and steps", text: "*/15 9-17 1,15 * mon-fri"},
		{name: "extra spaces are normalised", text: " 0  22 * * * "},
		{name: "six fields (seconds) are refused", text: "0 0 22 * * *", wantErr: "want five cron fields"},
		{name: "four fields are refused", text: "0 22 * *", wantErr: "got 4"},
		{name: "a descriptor is refused", text: "@daily", wantErr: "want five cron fields"},
		{name: "@every is refused", text: "@every 1h", wantErr: "want five cron fields"},
		{name: "a time-zone prefix is refused for the timeZone key", text: "CRON_TZ=Europe/Berlin 0 22 * * *", wantErr: "timeZone"},
		{name: "an hour out of range is refused", text: "0 24 * * *", wantErr: "above maximum"},
		{name: "a word in a field is refused", text: "0 ten * * *", wantErr: "cron schedule"},
		{name: "a date that never comes is refused", text: "0 0 30 2 *", wantErr: "never fires"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCron(tc.text)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("ParseCron(%q) = %v, want no error", tc.text, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("ParseCron(%q) = %v, want an error containing %q", tc.text, err, tc.wantErr)
			case tc.wantErr == "" && c.String() != strings.Join(strings.Fields(tc.text), " "):
				t.Errorf("ParseCron(%q).String() = %q", tc.text, c)
			}
		})
	}
}

func TestLoadZoneKnowsIANANamesAndRefusesLocal(t *testing.T) {
	for _, tc := range []struct {
		name, zone, want string
		fails            bool
	}{
		{name: "empty is UTC", zone: "", want: "UTC"},
		{name: "a named zone from the embedded database", zone: "Europe/Berlin", want: "Europe/Berlin"},
		{name: "Local is refused: it depends on the host", zone: "Local", fails: true},
		{name: "an unknown name is refused", zone: "Mars/Olympus", fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z, err := LoadZone(tc.zone)
			if (err != nil) != tc.fails || (!tc.fails && z.String() != tc.want) {
				t.Errorf("LoadZone(%q) = %v, %v; want %q, error %t", tc.zone, z, err, tc.want, tc.fails)
			}
		})
	}
}

func berlin(t *testing.T) Zone {
	t.Helper()
	z, err := LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return z
}

func TestEvaluate(t *testing.T) {
	ber := berlin(t)
	// 2025-01-15 is a Wednesday; Berlin is UTC+1 in January.
	at := func(hhmm string) time.Time {
		tm, err := time.ParseInLocation("2006-01-02 15:04", "2025-01-15 "+hhmm, ber.Location())
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	nightly := Window{Kind: Deny, Schedule: MustParseCron("0 22 * * *"), Zone: ber, Duration: 8 * time.Hour,
		Applications: []string{"prod-*"}, ManualSync: true}
	strict := nightly
	strict.ManualSync = false
	office := Window{Kind: Allow, Schedule: MustParseCron("0 9 * * 1-5"), Zone: ber, Duration: 8 * time.Hour,
		Applications: []string{"web"}, ManualSync: true}
	lunch := Window{Kind: Deny, Schedule: MustParseCron("0 12 * * *"), Zone: ber, Duration: time.Hour,
		Applications: []string{"*"}, ManualSync: true}
	everyMinute := Window{Kind: Deny, Schedule: MustParseCron("* 3 * * *"), Duration: 10 * time.Minute,
		Applications: []string{"*"}, ManualSync: true}
	for _, tc := range []struct {
		name    string
		windows []Window
		app     string
		now     time.Time
		held    bool
		manual  bool // manual syncs refused
		why     string
	}{
		{name: "no windows hold nothing", app: "prod-web", now: at("23:00")},
		{name: "a deny window not covering the application holds nothing", windows: []Window{nightly}, app: "web", now: at("23:00")},
		{name: "before a deny window starts nothing is held", windows: []Window{nightly}, app: "prod-web", now: at("21:59")},
		{name: "at its start a deny window holds", windows: []Window{nightly}, app: "prod-web", now: at("22:00"), held: true,
			why: "held by sync window deny 0 22 * * * (until 06:00 Europe/Berlin)"},
		{name: "a deny window holds past midnight until it ends", windows: []Window{nightly}, app: "prod-web", now: at("05:59"), held: true,
			why: "held by sync window deny 0 22 * * * (until 06:00 Europe/Berlin)"},
		{name: "at its end a deny window holds no more", windows: []Window{nightly}, app: "prod-web", now: at("06:00")},
		{name: "manualSync: false refuses manual syncs as well", windows: []Window{strict}, app: "prod-web", now: at("23:00"), held: true, manual: true,
			why: "held by sync window deny 0 22 * * * (until 06:00 Europe/Berlin)"},
		{name: "inside an allow window nothing is held", windows: []Window{office}, app: "web", now: at("10:00")},
		{name: "outside every allow window the application is held until one opens", windows: []Window{office}, app: "web", now: at("18:00"), held: true,
			why: "held outside sync window allow 0 9 * * 1-5 (until 09:00 Europe/Berlin)"},
		{name: "allow windows of other applications hold nothing", windows: []Window{office}, app: "db", now: at("18:00")},
		{name: "deny wins over an open allow window", windows: []Window{office, lunch}, app: "web", now: at("12:30"), held: true,
			why: "held by sync window deny 0 12 * * * (until 13:00 Europe/Berlin)"},
		{name: "starts that overlap make one run ending after the last", windows: []Window{everyMinute}, app: "web", now: at("04:05"), held: true,
			why: "held by sync window deny * 3 * * * (until 04:09 UTC)"},
		{name: "the hold lasts until no window holds, across windows", windows: []Window{nightly, {Kind: Deny, Schedule: MustParseCron("0 5 * * *"),
			Zone: ber, Duration: 3 * time.Hour, Applications: []string{"*"}, ManualSync: true}}, app: "prod-web", now: at("23:00"), held: true,
			why: "held by sync window deny 0 22 * * * (until 08:00 Europe/Berlin)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Evaluate(tc.windows, tc.app, tc.now)
			if v.Held != tc.held || v.ManualDenied != tc.manual || v.String() != tc.why {
				t.Errorf("Evaluate(%s at %s) = held %t, manual refused %t, %q; want %t, %t, %q",
					tc.app, tc.now.Format(time.RFC3339), v.Held, v.ManualDenied, v.String(), tc.held, tc.manual, tc.why)
			}
		})
	}
}

func TestUntilBeyondADayShowsTheDate(t *testing.T) {
	weekly := Window{Kind: Allow, Schedule: MustParseCron("0 9 * * 1"), Duration: time.Hour, Applications: []string{"*"}, ManualSync: true}
	// Wednesday 2025-01-15: the next Monday is five days away.
	v := Evaluate([]Window{weekly}, "web", time.Date(2025, 1, 15, 12, 0, 0, 0, time.UTC))
	if want := "held outside sync window allow 0 9 * * 1 (until 2025-01-20 09:00 UTC)"; v.String() != want {
		t.Errorf("Evaluate = %q, want %q", v.String(), want)
	}
	if want := time.Date(2025, 1, 20, 9, 0, 0, 0, time.UTC); !v.Until.Equal(want) {
		t.Errorf("Until = %s, want %s", v.Until, want)
	}
}

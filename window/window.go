// Package window decides whether a sync window lets an application be
// synced at a given instant. A window is an allow or deny period that
// starts at every time a five-field cron schedule names, in a time zone,
// and lasts a duration; it covers the applications whose names match one
// of its globs.
//
// The rules (see TestEvaluate): an active deny window holds automated
// syncs; so does being outside every allow window when the application
// has allow windows; deny wins over allow. A manual sync passes unless a
// window that holds the application says manualSync: false.
//
// The package is pure: every function takes the instant it judges, so
// callers inject their clock, and nothing here reads the time, the
// environment or the disk (the time-zone database is embedded, so a
// controller in an image without one still knows Europe/Berlin).
package window

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
	// The controller's image is built FROM scratch, without
	// /usr/share/zoneinfo: time.LoadLocation would know no zone but UTC.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// Kind says whether a window allows or denies automated syncs. The zero
// value is invalid.
type Kind string

// The kinds of window.
const (
	Allow Kind = "allow"
	Deny  Kind = "deny"
)

// Cron is a parsed five-field cron schedule (minute, hour, day of month,
// month, day of week) of the times a window starts. The zero value never
// fires.
type Cron struct {
	text string
	spec cron.Schedule
}

// parser reads exactly the five standard fields: no seconds, no
// descriptors (@every would start windows relative to whenever it is
// asked, not at fixed times) and no CRON_TZ prefix (the window's time
// zone says that).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// ParseCron parses a five-field cron schedule such as "0 22 * * 1-5". A
// schedule that can never fire (the 30th of February) is an error too.
func ParseCron(text string) (Cron, error) {
	if strings.HasPrefix(strings.TrimSpace(text), "@") || strings.Contains(text, "TZ=") {
		return Cron{}, fmt.Errorf("want five cron fields (minute hour day-of-month month day-of-week) like \"0 22 * * *\", got %q; give the time zone in timeZone", text)
	}
	if n := len(strings.Fields(text)); n != 5 {
		return Cron{}, fmt.Errorf("want five cron fields (minute hour day-of-month month day-of-week) like \"0 22 * * *\", got %d in %q", n, text)
	}
	spec, err := parser.Parse(text)
	if err != nil {
		return Cron{}, fmt.Errorf("cron schedule %q: %w", text, err)
	}
	// robfig/cron gives up after five years without a match; such a
	// schedule is a mistake, not a window.
	if spec.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return Cron{}, fmt.Errorf("cron schedule %q never fires", text)
	}
	return Cron{text: strings.Join(strings.Fields(text), " "), spec: spec}, nil
}

// MustParseCron is ParseCron for literals in tests and examples; it
// panics on an error.
func MustParseCron(text string) Cron {
	c, err := ParseCron(text)
	if err != nil {
		panic(err)
	}
	return c
}

// String returns the schedule as written, its fields separated by one space.
func (c Cron) String() string { return c.text }

// Equal reports whether c and o are the same schedule.
func (c Cron) Equal(o Cron) bool { return c.text == o.text }

// next returns the first start strictly after t, in t's location; zero
// when c never fires.
func (c Cron) next(t time.Time) time.Time {
	if c.spec == nil {
		return time.Time{}
	}
	return c.spec.Next(t)
}

// Zone is a time zone from the IANA database. The zero value is UTC.
type Zone struct{ loc *time.Location }

// LoadZone loads an IANA zone name such as Europe/Berlin; "" and "UTC" are
// UTC. "Local" is refused: it would mean whatever zone the controller's
// host happens to have.
func LoadZone(name string) (Zone, error) {
	switch name {
	case "", "UTC":
		return Zone{}, nil
	case "Local":
		return Zone{}, errors.New("want an IANA time zone like Europe/Berlin or UTC, got \"Local\", which depends on the controller's host")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return Zone{}, fmt.Errorf("want an IANA time zone like Europe/Berlin or UTC, got %q", name)
	}
	return Zone{loc: loc}, nil
}

// Location returns z as a *time.Location.
func (z Zone) Location() *time.Location {
	if z.loc == nil {
		return time.UTC
	}
	return z.loc
}

// String returns the zone's name.
func (z Zone) String() string { return z.Location().String() }

// Equal reports whether z and o are the same zone.
func (z Zone) Equal(o Zone) bool { return z.String() == o.String() }

// Window is one sync window as the app set declares it. Its values are
// immutable once built; Applications is shared with copies of the value,
// so callers must not change it.
type Window struct {
	Kind Kind
	// Schedule says when the window starts, in Zone.
	Schedule Cron
	Zone     Zone
	// Duration is how long the window lasts from each start.
	Duration time.Duration
	// Applications are globs (path.Match) of the application names the
	// window covers.
	Applications []string
	// ManualSync lets manual syncs through while this window holds
	// automated ones.
	ManualSync bool
}

// Covers reports whether w applies to the application called app.
func (w Window) Covers(app string) bool {
	for _, g := range w.Applications {
		if ok, _ := path.Match(g, app); ok {
			return true
		}
	}
	return false
}

// String names w the way the status does: "deny 0 22 * * *".
func (w Window) String() string { return fmt.Sprintf("%s %s", w.Kind, w.Schedule) }

// active returns the end of the run of w's periods that covers t, and
// whether one does. Periods that overlap or touch count as one run, so a
// window starting every minute for an hour ends an hour after its last
// start.
func (w Window) active(t time.Time) (end time.Time, ok bool) {
	t = t.In(w.Zone.Location())
	start := w.Schedule.next(t.Add(-w.Duration))
	if start.IsZero() || start.After(t) {
		return time.Time{}, false
	}
	end = start.Add(w.Duration)
	// Bounded: a minute-by-minute schedule over a long duration is at most
	// a week of starts; past that the end is reported early, never late.
	for range maxSteps {
		n := w.Schedule.next(start)
		if n.IsZero() || n.After(end) {
			break
		}
		start, end = n, n.Add(w.Duration)
	}
	return end, true
}

// maxSteps bounds the starts one look at a window walks through.
const maxSteps = 7 * 24 * 60

// Verdict is what the windows say about one application at one instant.
// The zero value lets everything through.
type Verdict struct {
	// Held is set when automated syncs and live-drift corrections must
	// wait; By is the window that holds (the active deny window, or the
	// allow window that opens first).
	Held bool
	By   Window
	// Outside is set when the application is held for being outside
	// every one of its allow windows rather than by a deny window.
	Outside bool
	// Until is when the windows next let automated syncs through; zero
	// when that is not within the bound this package looks ahead.
	Until time.Time
	// ManualDenied is set when a window that holds says manualSync: false,
	// so a manual sync must be refused as well.
	ManualDenied bool

	at time.Time // the instant judged, for formatting Until
}

// String says why the application waits, e.g. "held by sync window deny
// 0 22 * * * (until 06:00 Europe/Berlin)"; "" when it does not.
func (v Verdict) String() string {
	if !v.Held {
		return ""
	}
	why := "held by sync window " + v.By.String()
	if v.Outside {
		why = "held outside sync window " + v.By.String()
	}
	if v.Until.IsZero() {
		return why
	}
	return fmt.Sprintf("%s (until %s)", why, v.until())
}

// until formats Until in the holding window's zone: the time alone when it
// is within a day, with the date otherwise.
func (v Verdict) until() string {
	u := v.Until.In(v.By.Zone.Location())
	layout := "15:04"
	if v.Until.Sub(v.at) >= 24*time.Hour || v.Until.Sub(v.at) < 0 {
		layout = "2006-01-02 15:04"
	}
	return u.Format(layout) + " " + v.By.Zone.String()
}

// Evaluate judges app at now against windows (those not covering app are
// ignored).
func Evaluate(windows []Window, app string, now time.Time) Verdict {
	v := evaluate(windows, app, now)
	if !v.Held {
		return Verdict{}
	}
	// Until is when no window holds any more: jump from one hold's end to
	// the next, since a deny window may end inside another, or outside
	// every allow window.
	at := now
	for range 100 {
		next := evaluate(windows, app, at)
		if !next.Held {
			v.Until = at
			break
		}
		if next.Until.IsZero() || !next.Until.After(at) {
			break
		}
		at = next.Until
	}
	if !v.Until.After(now) {
		v.Until = time.Time{}
	}
	v.at = now
	return v
}

// evaluate is one look at now: the holding window and the end of its own
// hold, not of every window's.
func evaluate(windows []Window, app string, now time.Time) Verdict {
	var v Verdict
	hasAllow, allowed := false, false
	var opens time.Time // the first start of an allow window after now
	var first Window
	denyManual, allowManual := false, false // a holding window refuses manual syncs
	for _, w := range windows {
		if !w.Covers(app) {
			continue
		}
		end, on := w.active(now)
		switch w.Kind {
		case Deny:
			if !on {
				continue
			}
			denyManual = denyManual || !w.ManualSync
			// Of several active deny windows, the one ending last holds.
			if !v.Held || end.After(v.Until) {
				v.Held, v.By, v.Until = true, w, end
			}
		case Allow:
			hasAllow = true
			allowManual = allowManual || !w.ManualSync
			if on {
				allowed = true
				continue
			}
			if next := w.Schedule.next(now.In(w.Zone.Location())); !next.IsZero() && (opens.IsZero() || next.Before(opens)) {
				opens, first = next, w
			}
		}
	}
	outside := hasAllow && !allowed
	if !v.Held && outside {
		v.Held, v.By, v.Until, v.Outside = true, first, opens, true
	}
	v.ManualDenied = denyManual || (outside && allowManual)
	return v
}

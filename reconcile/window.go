package reconcile

import (
	"time"

	"github.com/skep-cd/skep/window"
)

// WindowHold is a sync window holding an application's automated syncs,
// as the status shows it. The zero value (Message "") means none does.
type WindowHold struct {
	// Kind is allow or deny; Outside is set when the application is held
	// for being outside every one of its allow windows.
	Kind     string
	Schedule string
	TimeZone string
	Duration time.Duration
	Outside  bool
	// Until is when the windows next let automated syncs through; zero
	// when that is too far ahead to say.
	Until time.Time
	// ManualSync says whether a manual sync passes meanwhile.
	ManualSync bool
	// Message is the status line, e.g. "held by sync window deny
	// 0 22 * * * (until 06:00 Europe/Berlin)".
	Message string
}

// windowHold is what the status shows of a windows' verdict.
func windowHold(v window.Verdict) WindowHold {
	if !v.Held {
		return WindowHold{}
	}
	return WindowHold{Kind: string(v.By.Kind), Schedule: v.By.Schedule.String(), TimeZone: v.By.Zone.String(),
		Duration: v.By.Duration, Outside: v.Outside, Until: v.Until, ManualSync: !v.ManualDenied, Message: v.String()}
}

package reconcile

import (
	"fmt"
	"time"

	"github.com/skep-cd/skep/appset"
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

// windowVerdict judges app's sync windows at the controller's now and
// records the verdict in its status.
func (c *Controller) windowVerdict(app appset.Application) window.Verdict {
	v := window.Evaluate(app.SyncWindows, app.Name, c.now())
	hold := WindowHold{}
	if v.Held {
		hold = WindowHold{Kind: string(v.By.Kind), Schedule: v.By.Schedule.String(), TimeZone: v.By.Zone.String(),
			Duration: v.By.Duration, Outside: v.Outside, Until: v.Until, ManualSync: !v.ManualDenied, Message: v.String()}
	}
	c.status.Update(app.Name, func(s *AppStatus) { s.Window = hold })
	return v
}

// checkManualSync refuses a manual sync of app while a sync window that
// says manualSync: false holds it. The error wraps ErrSyncWindow.
func (c *Controller) checkManualSync(app appset.Application) error {
	if v := window.Evaluate(app.SyncWindows, app.Name, c.now()); v.ManualDenied {
		return fmt.Errorf("%w: application %s is %s, which allows no manual sync", ErrSyncWindow, app.Name, v)
	}
	return nil
}

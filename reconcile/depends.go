package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/outcome"
)

// dependencyRetry is how soon an application waiting for its dependencies
// looks again.
const dependencyRetry = 5 * time.Second

// awaitDependencies returns a waiting error naming every application of
// app's dependsOn that is not ready (see notReady), and records them in the
// status; nil, clearing that record, when all are ready.
func (c *Controller) awaitDependencies(app appset.Application) error {
	var names, why []string
	for _, dep := range app.DependsOn {
		if reason := c.notReady(dep); reason != "" {
			names = append(names, dep)
			why = append(why, dep+" ("+reason+")")
		}
	}
	c.setWaitingFor(app.Name, names)
	if len(names) == 0 {
		return nil
	}
	return &outcome.WaitingError{Err: fmt.Errorf("waiting for %s", strings.Join(why, ", ")), Retry: dependencyRetry}
}

// notReady says why the application called name is not yet something
// another may sync after: "" once it is synced and healthy at its current
// revision. It reads only the status table.
func (c *Controller) notReady(name string) string {
	st, ok := c.status.Get(name)
	switch {
	case !ok || st.LastReconcile.IsZero():
		return "not reconciled yet"
	case st.Sync != Synced:
		return string(st.Sync)
	case st.Revision == "" || st.DeployedRevision != st.Revision:
		return "not deployed at its current revision"
	case st.Health != health.Healthy:
		if st.Health == "" {
			return "health not known yet"
		}
		return string(st.Health)
	}
	return ""
}

// setWaitingFor records the dependencies app waits for (nil: none).
func (c *Controller) setWaitingFor(app string, names []string) {
	c.status.Update(app, func(s *AppStatus) {
		if len(names) > 0 && !slices.Equal(s.WaitingFor, names) {
			c.log.Info("waiting for dependencies", "app", app, "dependencies", names)
		}
		s.WaitingFor = names
	})
}

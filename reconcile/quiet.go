package reconcile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/skep-cd/skep/appset"
)

// quietTick is what the last tick that found nothing to do saw and
// concluded: a tick with the same inputs concludes the same without
// rendering or comparing. Most ticks of a controller at rest are such.
type quietTick struct {
	key string // quietKey of its inputs; "" when there is none
	out Result
	d   desired
}

// quietKey names everything a plain tick of app reads, so that equal keys
// mean equal conclusions: the application's definition, the commit and
// artifact versions it resolved to, and the version of its swarm's live
// snapshot (which holds the recorded revisions and the live services).
// It is "" when a tick must run in full: a requested sync or a held
// revision, no live snapshot, or one that failed or has not seen the
// application's last write, and applications whose previews follow
// branches (each tick must look for new ones).
func (c *Controller) quietKey(app appset.Application, req Request, d desired) string {
	if req.Sync || req.Revision != "" || req.Force || req.Prune != nil || req.release {
		return ""
	}
	for _, o := range d.artifacts {
		if o.Entry.Deploy.Preview {
			return ""
		}
	}
	if st, _ := c.status.Get(app.Name); len(st.Previews) > 0 {
		return "" // previews to keep or remove
	}
	live := c.liveOf(app)
	if live == nil {
		return ""
	}
	snap := live.Current()
	if snap.ReadFailed() || !c.seenWrites(app.Name, snap) {
		return ""
	}
	def, err := json.Marshal(app)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(def)
	return fmt.Sprintf("%s\x00%s\x00%s\x00%d\x00%s", d.commit, d.source.Repo, versionsKey(d.artifacts), snap.Version(), hex.EncodeToString(sum[:]))
}

// observeQuiet refreshes what a quiet tick still owes the status: health,
// which moves with time (a failure leaves the window) as well as with the
// snapshot.
func (c *Controller) observeQuiet(app appset.Application, q quietTick) {
	live := c.liveOf(app)
	if live == nil {
		return
	}
	h := releaseHealth(q.d.release, live.Current())
	c.status.Update(app.Name, func(s *AppStatus) {
		s.Health, s.HealthMessage, s.Running, s.Desired = h.State, h.Message, h.Running, h.Desired
	})
}

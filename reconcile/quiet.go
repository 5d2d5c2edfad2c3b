package reconcile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// quietTick is what the last tick that found nothing to do saw and
// concluded: a tick with the same inputs concludes the same without
// rendering or comparing. Most ticks of a controller at rest are such.
type quietTick struct {
	key string // quietKey of its inputs; "" when there is none
	out Result
	d   desired
}

// templateFailure is a tick whose chart templates did not render, and the
// quiet key of its inputs.
type templateFailure struct {
	key string
	err error
}

// quietInputs keeps, from one tick of an application to the next, the
// parts of its quiet key that cost most to compute while nothing they
// depend on moved: at 500 applications at rest, encoding the definition
// and summarising the snapshot were close to half of a tick. gen is the app-set
// generation the worker read the definition at (see Controller.appAt);
// 0 keeps nothing (a reconcile outside a worker, a release file's
// release).
type quietInputs struct {
	gen        uint64
	definition string // digest of the definition, "" until computed
	own        ownStateAt
}

// ownStateAt is ownState as of one snapshot and one set of renders.
type ownStateAt struct {
	swarm           string
	version, render uint64
	state           string
}

// quietKey names everything a plain tick of app reads, so that equal keys
// mean equal conclusions: the application's definition, the commit and
// artifact versions it resolved to, and its own objects in its swarm's
// live snapshot (services, recorded revisions; see ownState).
// It is "" when a tick must run in full: a requested sync or a held
// revision, no live snapshot, or one that failed or has not seen the
// application's last write, and applications whose previews follow
// branches (each tick must look for new ones).
func (c *Controller) quietKey(app appset.Application, req Request, d desired, in *quietInputs) string {
	if req.Sync || req.Revision != "" || req.Force || req.Prune != nil || req.release {
		return ""
	}
	for _, o := range d.artifacts {
		if o.Entry.Deploy.Preview {
			return ""
		}
	}
	if _, _, previews := c.status.brief(app.Name); previews > 0 {
		return "" // previews to keep or remove
	}
	live := c.liveOf(app)
	if live == nil {
		return ""
	}
	snap := live.Current()
	if snap.ReadFailed() {
		return ""
	}
	if !c.seenWrites(app.Name, snap) {
		// At rest, no event may come to bring the relist that shows the
		// last write, and every tick would render until the next full
		// resync, minutes away: ask for one.
		live.Relist()
		return ""
	}
	definition := in.definition
	if definition == "" {
		// Encoded straight into the hash: no copy of the definition.
		h := sha256.New()
		if err := json.NewEncoder(h).Encode(app); err != nil {
			return ""
		}
		definition = hex.EncodeToString(h.Sum(nil))
		if in.gen != 0 {
			in.definition = definition
		}
	}
	return d.commit + "\x00" + d.source.Repo + "\x00" + versionsKey(d.artifacts) + "\x00" + c.ownStateOf(app, snap, in) + "\x00" + definition
}

// ownStateOf is the digest of ownState, kept in in while the snapshot,
// the renders and the definition it was computed from stay.
func (c *Controller) ownStateOf(app appset.Application, snap swarm.Snapshot, in *quietInputs) string {
	c.mu.Lock()
	render := c.renderGen
	c.mu.Unlock()
	at := ownStateAt{swarm: app.Destination.Swarm, version: snap.Version(), render: render}
	if in.gen != 0 && in.own.state != "" {
		if was := in.own; was.swarm == at.swarm && was.version == at.version && was.render == at.render {
			return was.state
		}
	}
	at.state = digest(c.ownState(app, snap))
	if in.gen != 0 {
		in.own = at
	}
	return at.state
}

// ownState summarises what of snap a tick of app reads: its releases'
// services, networks and configs (liveState) and its recorded revisions,
// so that another stack's deploy does not make every application render
// again. A chart also checks its requirements against the whole swarm, so
// for one the snapshot's version stands in.
func (c *Controller) ownState(app appset.Application, snap swarm.Snapshot) string {
	if app.Chart != nil {
		return strconv.FormatUint(snap.Version(), 10)
	}
	c.mu.Lock()
	state := c.liveState(app, snap)
	c.mu.Unlock()
	owner := c.owner(app)
	var b strings.Builder
	b.WriteString(state)
	for _, cfg := range snap.ConfigsLabelled(stack.LabelApplication, app.Name) {
		if l := cfg.Spec.Labels; l[stack.LabelKind] != "" && l[stack.LabelController] == owner.Controller {
			b.WriteString("\nrecord " + cfg.ID + " " + strconv.FormatUint(cfg.Version.Index, 10))
		}
	}
	return b.String()
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

// withoutRecordedRelease is out keeping of its recorded revision what a
// quiet tick reports (its number and commit), not the decoded release: at
// 1,000 applications of 10 services, the kept releases were a fifth of
// the controller's heap.
func withoutRecordedRelease(out Result) Result {
	if r := out.Recorded; r != nil {
		out.Recorded = &apply.Revision{Number: r.Number, Commit: r.Commit, AppliedAt: r.AppliedAt, Actor: r.Actor,
			Application: r.Application, ConfigID: r.ConfigID}
	}
	return out
}

// digest names s by its SHA-256, for what is only ever compared: at 1,000
// applications of 10 services, the summaries of their objects that the
// quiet keys and the live-drift wakes kept whole were 4 MB.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

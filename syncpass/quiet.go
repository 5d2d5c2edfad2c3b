package syncpass

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/stack"
)

// quietTick is what the last pass that found nothing to do concluded: a
// pass with the same inputs concludes the same without rendering or
// comparing. Most passes of a controller at rest are such.
type quietTick struct {
	key string // quietKey of its inputs; "" when there is none
	out Result
}

// templateFailure is a pass whose chart templates did not render, and the
// quiet key of its inputs: a pass with the same key fails the same way
// without rendering.
type templateFailure struct {
	key string
	err error
}

// quietInputs keeps, from one pass of an application to the next, the
// parts of its quiet key that cost most to compute while nothing they
// depend on moved: at 500 applications at rest, encoding the definition
// and summarising the snapshot were close to half of a tick. gen is the
// app-set generation the definition was read at (Input.AppGen); 0 keeps
// nothing (a pass outside a worker, a release file's release).
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

// quietKey names everything a plain pass of in.App reads, so that equal
// keys mean equal conclusions: the application's definition, the commit
// and artifact versions it resolved to, and its own objects in its swarm's
// live snapshot (services, recorded revisions; see ownState).
// It is "" when a pass must run in full: a requested sync or a held
// revision, no live snapshot, or one that failed or has not seen the
// application's last write, applications whose previews follow branches
// (each pass must look for new ones), and a rebalance due (rebalanceDue).
func quietKey(env Env, in Input, d desired, qi *quietInputs) string {
	ask, app := in.Ask, in.App
	if ask.Sync || ask.Revision != "" || ask.Force || ask.Prune != nil || ask.Release {
		return ""
	}
	for _, o := range d.artifacts {
		if o.Entry.Deploy.Preview {
			return ""
		}
	}
	if in.Previews > 0 || env.Live == nil || in.Live.ReadFailed() || rebalanceDue(env, in) {
		return "" // previews to keep or remove; nothing to compare with
	}
	if !in.SeenWrites {
		// At rest, no event may come to bring the relist that shows the
		// last write, and every pass would render until the next full
		// resync, minutes away: ask for one.
		env.Live.Relist()
		return ""
	}
	definition := qi.definition
	if definition == "" {
		// Encoded straight into the hash: no copy of the definition.
		h := sha256.New()
		if err := json.NewEncoder(h).Encode(app); err != nil {
			return ""
		}
		definition = hex.EncodeToString(h.Sum(nil))
		if qi.gen != 0 {
			qi.definition = definition
		}
	}
	return d.commit + "\x00" + d.source.Repo + "\x00" + versionsKey(d.artifacts) + "\x00" + ownStateOf(env, in, qi) + "\x00" + definition
}

// ownStateOf is the digest of ownState, kept in qi while the snapshot,
// the renders and the definition it was computed from stay.
func ownStateOf(env Env, in Input, qi *quietInputs) string {
	at := ownStateAt{swarm: in.App.Destination.Swarm, version: in.Live.Version(), render: in.Renders.Gen}
	if qi.gen != 0 && qi.own.state != "" {
		if was := qi.own; was.swarm == at.swarm && was.version == at.version && was.render == at.render {
			return was.state
		}
	}
	at.state = Digest(ownState(env, in))
	if qi.gen != 0 {
		qi.own = at
	}
	return at.state
}

// ownState summarises what of the snapshot a pass of in.App reads: its
// releases' services, networks and configs (LiveState) and its recorded
// revisions, so that another stack's deploy does not make every
// application render again. A chart also checks its requirements against
// the whole swarm, so for one the snapshot's version stands in.
func ownState(env Env, in Input) string {
	snap, app := in.Live, in.App
	if app.Chart != nil {
		return strconv.FormatUint(snap.Version(), 10)
	}
	var b strings.Builder
	b.WriteString(LiveState(snap, append([]string{app.Release}, in.Renders.Releases...)))
	for _, cfg := range snap.ConfigsLabelled(stack.LabelApplication, app.Name) {
		if l := cfg.Spec.Labels; l[stack.LabelKind] != "" && l[stack.LabelController] == env.Owner {
			b.WriteString("\nrecord " + cfg.ID + " " + strconv.FormatUint(cfg.Version.Index, 10))
		}
	}
	return b.String()
}

// withoutRecordedRelease is out keeping of its recorded revision what a
// quiet pass reports (its number and commit), not the decoded release: at
// 1,000 applications of 10 services, the kept releases were a fifth of
// the controller's heap.
func withoutRecordedRelease(out Result) Result {
	if r := out.Recorded; r != nil {
		out.Recorded = &apply.Revision{Number: r.Number, Commit: r.Commit, AppliedAt: r.AppliedAt, Actor: r.Actor,
			Application: r.Application, ConfigID: r.ConfigID}
	}
	return out
}

// Digest names s by its SHA-256, for what is only ever compared: at 1,000
// applications of 10 services, the summaries of their objects that the
// quiet keys and the live-drift wakes kept whole were 4 MB.
func Digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

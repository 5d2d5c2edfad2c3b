package syncpass

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
)

// writer runs the steps of one write plan (see writeRelease), keeping
// what they wrote.
type writer struct {
	env     Env
	app     appset.Application
	d       desired
	summary string // sync-started's message: the plan
	opts    apply.Options
	out     writeResult
	// required are the networks stepRequired created; written the
	// services an earlier wave created or updated, and waveAt when the
	// last wave's write ended (zero: it wrote nothing).
	required []apply.Change
	written  map[string]apply.Change
	waveAt   time.Time
	start    time.Time
	end      func() // ends the write's record (Fleet.BeginWrite)
	// recorded is the release's revision before the write (nil: none);
	// notRolledBack says why a failed rollout was not rolled back,
	// though the policy asks.
	recorded      *apply.Revision
	notRolledBack string
	// superseded, when set, tells a wait whether git asks for something
	// newer than d: a failing rollout gives way to it.
	superseded func(ctx context.Context) bool
}

// newWriter prepares the write of d's release for in, recorded being the
// release's revision before it.
func newWriter(env Env, in Input, d desired, summary string, recorded *apply.Revision) *writer {
	w := &writer{env: env, app: in.App, d: d, summary: summary, written: map[string]apply.Change{}, recorded: recorded}
	if !in.App.SyncPolicy.WaitOutFailing {
		w.superseded = func(ctx context.Context) bool { return supersedes(ctx, env, in, d) }
	}
	w.opts = apply.Options{
		Digests:      env.Digests,
		Owner:        env.owner(in.App),
		ResolveImage: apply.ResolveImage(in.App.SyncPolicy.ResolveImage),
		Commit:       d.commit,
		Actor:        in.Ask.Actor,
		Force:        in.Ask.Force,
		Logger:       env.Log.With("app", in.App.Name),
		Self:         selfIn(env, in.App, d.release),
		Term:         env.Term,
	}
	if d.chart != nil {
		w.opts.Chart = d.chart.record
	}
	return w
}

// close records the end of the write, once one started.
func (w *writer) close() {
	if w.end != nil {
		w.end()
	}
}

// run runs one step; its error is what the sync fails with.
func (w *writer) run(ctx context.Context, in Input, s writeStep) error {
	switch s.kind {
	case stepStable:
		return checkStable(ctx, *w.d.chart)
	case stepRestamp:
		// A snapshot that misses an object a departed application wrote
		// would re-stamp the rest and leave it in the way of the write.
		if left := w.env.Fleet.LeftUnseen; left != nil && left(in.Live.TakenAt()) {
			w.env.Live.Relist()
			return &outcome.WaitingError{Err: fmt.Errorf("release %s: the live snapshot does not show the last writes of an application that left the app set yet", w.app.Release), Retry: time.Second}
		}
		restamp(ctx, w.env, w.app, in.Live)
		return nil
	case stepAnnounce:
		emit(ctx, w.env, w.app, notify.SyncStarted, w.d.commit, w.summary)
		w.env.applying(w.app.Name)
		w.start = w.env.Wall()
		w.end = w.env.beginWrite(w.app.Name)
		return nil
	case stepRequired:
		var err error
		if w.required, err = createRequired(ctx, w.env, w.app, w.d.chart); err != nil {
			return fmt.Errorf("apply %s at %s: %w", w.app.Release, gitsource.ShortCommit(w.d.commit), err)
		}
		return nil
	case stepConfigs:
		opts := w.opts
		opts.Wave = true
		if _, err := apply.Apply(ctx, w.env.Engine, w.d.release.UpTo(-1), opts); err != nil {
			return transientUnlessStalled(fmt.Errorf("apply %s at %s before its pre-sync hooks: %w", w.app.Release, gitsource.ShortCommit(w.d.commit), err))
		}
		return nil
	case stepPreSync:
		return runHooks(ctx, w.env, w.app, w.d, stack.PreSync)
	case stepWave, stepWaitWave, stepRelease:
		return w.writeWave(ctx, s)
	case stepWait:
		return w.wait(ctx)
	case stepPostSync:
		return runHooks(ctx, w.env, w.app, w.d, stack.PostSync)
	case stepSelf:
		return w.writeSelf(ctx)
	}
	return fmt.Errorf("write step %d: unknown", s.kind)
}

// writeWave writes an earlier wave or the whole release, or waits for a
// wave, failing as apply classes it (an Engine refusal, someone else's
// objects: stalled; the rest transient), the wave named.
func (w *writer) writeWave(ctx context.Context, s writeStep) error {
	var err error
	if s.kind == stepWaitWave {
		err = waitHealthy(ctx, w.env, waitFor{app: w.app, rel: w.d.release.UpTo(s.wave), written: w.waveAt, superseded: w.superseded})
	} else {
		err = w.apply(ctx, s)
	}
	w.out.took = w.env.Wall().Sub(w.start)
	if err == nil {
		return nil
	}
	waves := w.d.release.Waves()
	switch {
	case s.kind != stepRelease:
		err = waveError(s.wave, err)
	case len(waves) > 1:
		err = waveError(waves[len(waves)-1], err)
	}
	err = transientUnlessStalled(fmt.Errorf("apply %s at %s: %w", w.app.Release, gitsource.ShortCommit(w.d.commit), err))
	return hideDecrypted(err, w.d.release)
}

// apply writes the waves up to s.wave without a revision, or the whole
// release with one, keeping in the result the services each earlier wave
// wrote (see merged).
func (w *writer) apply(ctx context.Context, s writeStep) error {
	rel, opts := w.d.release, w.opts
	if s.kind == stepWave {
		rel, opts.Wave = rel.UpTo(s.wave), true
	}
	res, err := apply.Apply(ctx, w.env.Engine, rel, opts)
	if s.kind == stepWave {
		for _, ch := range res.Changes {
			if ch.Kind == apply.KindService && ch.Action != apply.Unchanged {
				w.written[ch.Name] = ch
			}
		}
		// A wave already in place wrote nothing and raises no event: its
		// wait looks at the swarm as it is, not for a write.
		w.waveAt = time.Time{}
		if res.Changed() {
			w.waveAt = w.env.Wall()
		}
	}
	w.out.res = merged(res, w.written)
	w.out.res.Changes = append(slices.Clone(w.required), w.out.res.Changes...)
	if s.kind == stepRelease {
		w.out.applied = err == nil && !waits(w.app, w.env.Live != nil)
	}
	if s.kind == stepWave && err == nil {
		w.env.Log.Info("wave applied", "app", w.app.Name, "release", rel.Name, "wave", s.wave)
	}
	return err
}

// wait waits until what the release wrote is healthy and converged; the
// controller's own service, not written yet, is no part of it.
func (w *writer) wait(ctx context.Context) error {
	wf := waitFor{app: w.app, rel: withoutService(w.d.release, w.out.res.Self), written: w.env.Wall(), superseded: w.superseded}
	if err := waitHealthy(ctx, w.env, wf); err != nil {
		return hideDecrypted(fmt.Errorf("sync %s at %s: %w", w.app.Release, gitsource.ShortCommit(w.d.commit), err), w.d.release)
	}
	w.out.applied = true
	return nil
}

// supersedes reports whether git now asks for something other than d for
// in (another commit, other artifact versions): what a failing rollout of
// d gives way to. A look-up that fails supersedes nothing.
func supersedes(ctx context.Context, env Env, in Input, d desired) bool {
	now, err := resolve(ctx, env, in.App, env.look(in.App.Name), in.Ask.Revision, "")
	return err == nil && now.key() != d.key()
}

// writeSelf writes the controller's own service when the release write
// left it for last (apply.Result.Self).
func (w *writer) writeSelf(ctx context.Context) error {
	if w.out.res.Self == nil {
		return nil
	}
	ch, err := writeSelf(ctx, w.env, w.app, w.d.commit, w.out.res.Self)
	if err != nil {
		return err
	}
	w.out.res.Changes = append(w.out.res.Changes, ch)
	return nil
}

// merged is the last apply's result with the services an earlier wave
// wrote shown as that wave wrote them, not as the unchanged they were by
// the time the release was applied whole.
func merged(res apply.Result, written map[string]apply.Change) apply.Result {
	seen := map[string]bool{}
	for i, ch := range res.Changes {
		if w, ok := written[ch.Name]; ok && ch.Kind == apply.KindService {
			res.Changes[i], seen[ch.Name] = w, true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(written)) {
		if !seen[name] {
			res.Changes = append(res.Changes, written[name])
		}
	}
	return res
}

// waveError names the wave that failed, keeping err's outcome class: apply
// classes what it knows as stalled and the rest may pass later.
func waveError(wave int, err error) error {
	return transientUnlessStalled(fmt.Errorf("wave %d: %w", wave, err))
}

// applySummary is the message of sync-succeeded: what the write did.
func applySummary(release string, res apply.Result) string {
	counts := map[apply.Action]int{}
	for _, ch := range res.Changes {
		if ch.Kind != apply.KindRevision {
			counts[ch.Action]++
		}
	}
	msg := fmt.Sprintf("release %s: %d created, %d updated, %d unchanged", release,
		counts[apply.Created], counts[apply.Updated], counts[apply.Unchanged])
	if res.Revision > 0 {
		msg += fmt.Sprintf("; revision %d", res.Revision)
	}
	return msg
}

package appset

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skep-cd/skep/tickgrid"
)

// Watcher keeps the last good app set of a Source. A reload swaps in a new
// set only when it is valid; otherwise the old set stays and the snapshot
// says why it is stale. All methods are safe to call concurrently.
type Watcher struct {
	source  Source
	reload  sync.Mutex // serialises Reload, so snapshots are swapped in load order
	current atomic.Pointer[Snapshot]
	wake    chan struct{} // buffered 1: a pending wake absorbs later ones
	// check, when set, judges a loaded set against what only the caller
	// knows (the destinations); a set it refuses is treated as invalid.
	check func(*Set) error
}

// Snapshot is what a Watcher holds at one moment. It is a value, and its Set
// is immutable, so a caller may keep it as long as it likes.
type Snapshot struct {
	// Set is the last valid set loaded; nil until a load succeeds.
	Set *Set
	// Revision is the source's revision of Set.
	Revision string
	// Err is the error of the last load, nil when it succeeded. A
	// Problems error lists what is wrong with the set in the source.
	Err error
	// ErrRevision is the revision the failed load read, when the source
	// could tell (an invalid set, not an unreadable one).
	ErrRevision string
	// Stale is true when the last load failed while Set was kept from an
	// earlier one: the running set is not what the source holds.
	Stale bool
}

// NewWatcher returns a Watcher of source holding no set; call Reload or Run
// to load one. Until then Current returns the zero Snapshot.
func NewWatcher(source Source) *Watcher {
	w := &Watcher{source: source, wake: make(chan struct{}, 1)}
	w.current.Store(&Snapshot{})
	return w
}

// NewCheckedWatcher is NewWatcher whose loads must also pass check: a set
// check refuses is kept out as an invalid one would be.
func NewCheckedWatcher(source Source, check func(*Set) error) *Watcher {
	w := NewWatcher(source)
	w.check = check
	return w
}

// Current returns the latest snapshot without blocking.
func (w *Watcher) Current() Snapshot {
	return *w.current.Load()
}

// Reload loads the source once and reports whether a new set was swapped
// in. A failed or invalid load keeps the current set, is recorded in the
// snapshot and returned. It blocks while another Reload runs.
func (w *Watcher) Reload(ctx context.Context) (changed bool, err error) {
	w.reload.Lock()
	defer w.reload.Unlock()
	old := w.Current()
	set, revision, err := w.source.Load(ctx)
	if err == nil && set != nil && w.check != nil {
		err = w.check(set)
	}
	if err != nil {
		next := old
		next.Err, next.ErrRevision, next.Stale = err, revision, old.Set != nil
		w.current.Store(&next)
		return false, err
	}
	if set == nil {
		set = &Set{}
	}
	// The revision decides, not a comparison of sets: Source promises that
	// equal revisions mean equal sets.
	changed = old.Set == nil || revision != old.Revision
	if !changed {
		// Same revision, same content: keep the set callers already hold.
		set = old.Set
	}
	w.current.Store(&Snapshot{Set: set, Revision: revision})
	return changed, nil
}

// Wake makes Run reload now instead of at its next interval. It never
// blocks; wakes that arrive before Run gets to them count once.
func (w *Watcher) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run reloads now, on Wake, and then every interval (DefaultInterval if not positive)
// until ctx ends. After a reload whose outcome differs from the last one Run
// reported (a new set, or an error that appeared, changed or cleared), it
// calls onChange with the new snapshot on Run's goroutine; onChange should
// return quickly. Run returns when ctx is done.
func (w *Watcher) Run(ctx context.Context, interval time.Duration, onChange func(Snapshot)) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	// On interval's grid (package tickgrid), so that the re-read comes
	// due with the controller's other periodic work of that period.
	ticker := time.NewTimer(tickgrid.Until(time.Now(), interval))
	defer ticker.Stop()
	var reported Snapshot
	first := true
	for {
		changed, _ := w.Reload(ctx) // the error is in the snapshot
		// A load cut short by cancellation is not news; reporting it would
		// make every shutdown look like a broken app set.
		if ctx.Err() != nil {
			return
		}
		now := w.Current()
		// Errors compare by text: a source returns a fresh error value on
		// every failed load, and the same failure must not be reported
		// again each interval.
		if first || changed || now.Revision != reported.Revision || errorText(now.Err) != errorText(reported.Err) {
			first = false
			reported = now
			onChange(now)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			ticker.Reset(tickgrid.Until(time.Now(), interval))
		case <-w.wake:
		}
	}
}

// errorText is err's message, "" for nil.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

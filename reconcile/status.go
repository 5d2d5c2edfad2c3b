package reconcile

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/health"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/syncpass"
)

// DriftReason says why an application is out of sync. The zero value means
// it is not.
type DriftReason string

// Drift reasons: the two axes the status keeps apart.
const (
	// DriftGit: git moved past the last recorded revision.
	DriftGit DriftReason = "git"
	// DriftLive: the swarm moved behind the controller's back.
	DriftLive DriftReason = "live"
	// DriftArtifact: git asks for an artifact version whose image is not
	// in the registry yet; the running version stays until it is.
	DriftArtifact DriftReason = "artifact"
)

// SyncState says whether the swarm matches git for one application.
type SyncState string

// Sync states. The zero value is not used; an application not yet compared
// is Unknown.
const (
	Synced    SyncState = "synced"
	OutOfSync SyncState = "out-of-sync"
	Unknown   SyncState = "unknown"
)

// Phase is what an application's worker does now. The zero value means it
// has not reconciled yet.
type Phase string

// Phases, in the order one reconcile passes them.
const (
	PhaseIdle        Phase = "idle"
	PhaseReconciling Phase = "reconciling"
	PhaseApplying    Phase = "applying"
)

// SyncOutcome is how a requested sync ended, or that it still runs.
type SyncOutcome string

// Sync outcomes.
const (
	SyncRunning   SyncOutcome = "running"
	SyncSucceeded SyncOutcome = "succeeded"
	SyncFailed    SyncOutcome = "failed"
)

// SyncRecord is one requested sync as the status keeps it. The zero value
// (ID 0) means none has been requested.
type SyncRecord struct {
	// ID orders the syncs of one controller process.
	ID         uint64
	Revision   string
	Actor      string
	Outcome    SyncOutcome
	StartedAt  time.Time
	FinishedAt time.Time // zero while it runs
	Summary    string
	Error      string
}

// Trigger says what started a sync (see syncpass.Trigger). The zero
// value means no sync.
type Trigger = syncpass.Trigger

// Triggers. Only TriggerSync is someone's request; the others are the
// controller acting on its own.
const (
	TriggerSync            = syncpass.TriggerSync
	TriggerWebhook         = syncpass.TriggerWebhook
	TriggerGit             = syncpass.TriggerGit
	TriggerInterval        = syncpass.TriggerInterval
	TriggerDriftCorrection = syncpass.TriggerDriftCorrection
)

// LastSync is the last sync that wrote an application's release, of any
// kind: asked for or made by the controller on its own, drift corrections
// included. The zero value (At zero) means none is known: none since the
// controller started, and none an earlier run recorded (see
// Statuses.SeedLastSyncs).
type LastSync struct {
	At       time.Time
	Revision string // the commit written
	Actor    string // who asked; "" when the controller acted on its own
	// Trigger is "" for a sync an earlier run recorded: the history keeps
	// who asked, not what started it.
	Trigger Trigger
}

// AppStatus is the last observed state of one application. It is a value:
// readers get copies.
type AppStatus struct {
	Name string
	Sync SyncState
	// Revision is the commit the last reconcile compared against.
	Revision string
	// DeployedRevision is the commit of the last revision applied.
	DeployedRevision string
	// Plan summarises what the last comparison found, one line per release.
	Plan []string
	// Warnings are what the render of the last comparison said Swarm
	// ignores (privileged, devices, pid, network_mode: host, ...), in the
	// words of docker stack deploy, and the revision records it skipped
	// because they do not decode.
	Warnings []string
	// LastError is the last reconcile's error, with its class.
	LastError      string
	LastErrorClass outcome.Class // "" when the last reconcile did not fail
	LastReconcile  time.Time
	// LastSync is the last sync of any kind that wrote the release;
	// LastRequestedSync only the requested ones, whatever their outcome.
	LastSync  LastSync
	Automated bool
	// Swarm is the destination the application deploys to.
	Swarm string
	// Phase is what the worker does now; "" before the first reconcile.
	Phase Phase
	// PendingSync is the id of a requested sync not started yet, or 0.
	PendingSync uint64
	// LastRequestedSync is the last requested sync (ID 0: none yet).
	LastRequestedSync SyncRecord
	// Held is the hold a rollback or a sync to a revision put the
	// application under (the zero Hold: none). Ticks deploy Held.Revision
	// instead of the branch head until a sync without revision or an
	// unhold clears it; Held.Failed is a commit a release rollback undid,
	// which automated syncs leave alone until git moves.
	Held apply.Hold
	// Cause is the root cause of the last rollout that failed (the zero
	// Cause: none, or a sync succeeded since).
	Cause Cause
	// Health is the worst health of the release's services, from the live
	// snapshot; HealthMessage names that service and why.
	Health        health.State
	HealthMessage string
	Running       int
	Desired       int
	// Drift says why the application is out of sync; Findings are the live
	// drift findings (driftDetection: live).
	Drift    DriftReason
	Findings []plan.Finding
	// Unmanaged names objects in the release's namespace without this
	// application's proof of ownership: reported, never touched.
	Unmanaged []string
	// Artifacts are the release artifacts as the last reconcile resolved
	// them: desired, current, image condition.
	Artifacts []artifact.Object
	// Previews are the application's preview releases, one per branch;
	// PreviewProblems say why a branch has none (a hash collision, the
	// bound, an unreadable source).
	Previews        []PreviewStatus
	PreviewProblems []string
	// Window is the sync window holding the application's automated
	// syncs now; zero when none does.
	Window WindowHold
	// WaitingFor names the applications of dependsOn that are not synced
	// and healthy at their current revision yet, while a sync of this one
	// waits for them; nil when none does.
	WaitingFor []string
}

// clone returns st with its own copies of every slice, so that a reader
// never shares memory with the table.
func (st AppStatus) clone() AppStatus {
	st.Plan = slices.Clone(st.Plan)
	st.Warnings = slices.Clone(st.Warnings)
	st.Findings = slices.Clone(st.Findings)
	st.Unmanaged = slices.Clone(st.Unmanaged)
	st.Artifacts = slices.Clone(st.Artifacts)
	st.Previews = slices.Clone(st.Previews)
	st.PreviewProblems = slices.Clone(st.PreviewProblems)
	st.WaitingFor = slices.Clone(st.WaitingFor)
	if f := st.Held.Failed; f != nil {
		copied := *f
		st.Held.Failed = &copied
	}
	return st
}

// AppSetStatus is the state of the app-set source.
type AppSetStatus struct {
	Source   string
	Revision string
	Loaded   bool
	Stale    bool
	Error    string
	LoadedAt time.Time
}

// Statuses keeps every application's status in one place. It is safe for
// concurrent use; readers always get copies.
type Statuses struct {
	mu      sync.RWMutex
	apps    map[string]*AppStatus // changed in place under mu; readers get clones
	seeds   map[string]LastSync   // by application: its LastSync until it has a status
	appSet  AppSetStatus
	pruned  map[string]bool // applications gone from the set, releases pruned
	checked time.Time       // when the controller last looked for releases to prune
}

// AddPruned records an application whose release was pruned.
func (s *Statuses) AddPruned(app string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pruned == nil {
		s.pruned = map[string]bool{}
	}
	s.pruned[app] = true
}

// Pruned returns the applications whose releases were pruned, sorted.
func (s *Statuses) Pruned() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []string{}
	for name := range s.pruned {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// SetPruneChecked records when the controller last looked for releases to
// prune.
func (s *Statuses) SetPruneChecked(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checked = t
}

// PruneChecked returns when the controller last looked for releases to
// prune (zero: never).
func (s *Statuses) PruneChecked() time.Time {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.checked
}

// NewStatuses returns an empty status table.
func NewStatuses() *Statuses { return &Statuses{apps: map[string]*AppStatus{}} }

// SeedLastSyncs gives applications the last sync an earlier run of the
// controller recorded (the history store), keyed by application, so that a
// restart does not show them as never synced: an application's status
// starts with its seed as LastSync, until its next sync replaces it. A
// seed is used once; one for an application outside the app set is never
// used. Call it before the controller runs. The map is copied. See
// TestRestartedControllerReportsTheLastSyncItRecorded.
func (s *Statuses) SeedLastSyncs(seeds map[string]LastSync) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seeds = maps.Clone(seeds)
}

// Update applies fn, in place, to the status of app (a zero AppStatus
// named app, with its seeded LastSync, when new).
func (s *Statuses) Update(app string, fn func(*AppStatus)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.apps[app]
	if !ok {
		st = &AppStatus{Name: app, Sync: Unknown, LastSync: s.seeds[app]}
		delete(s.seeds, app)
		s.apps[app] = st
	}
	// In place, without a copy: readers only ever get clones, made under
	// the lock held here. A tick updates its status three times.
	fn(st)
}

// brief returns what a tick reads of app's status, without the copy Get
// makes: what the worker does, the class of its last failure and how many
// previews it keeps.
func (s *Statuses) brief(app string) (phase Phase, failed outcome.Class, previews int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if st, ok := s.apps[app]; ok {
		return st.Phase, st.LastErrorClass, len(st.Previews)
	}
	return "", "", 0
}

// held returns app's hold, a copy (the zero Hold: none).
func (s *Statuses) held(app string) apply.Hold {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, ok := s.apps[app]
	if !ok {
		return apply.Hold{}
	}
	h := st.Held
	if f := h.Failed; f != nil {
		copied := *f
		h.Failed = &copied
	}
	return h
}

// Get returns a copy of one application's status.
func (s *Statuses) Get(app string) (AppStatus, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, ok := s.apps[app]
	if !ok {
		return AppStatus{}, false
	}
	return st.clone(), true
}

// List returns copies of every application's status, sorted by name.
func (s *Statuses) List() []AppStatus {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]AppStatus, 0, len(s.apps))
	for _, name := range slices.Sorted(maps.Keys(s.apps)) {
		out = append(out, s.apps[name].clone())
	}
	return out
}

// Remove forgets an application that left the app set.
func (s *Statuses) Remove(app string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.apps, app)
}

// SetAppSet records the app-set source's state.
func (s *Statuses) SetAppSet(st AppSetStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appSet = st
}

// AppSet returns the app-set source's state.
func (s *Statuses) AppSet() AppSetStatus {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.appSet
}

// notReady returns the applications of deps that are not yet something
// another may sync after, each with why: ready once synced and healthy at
// its current revision. It reads the table in place, without copies.
func (s *Statuses) notReady(deps []string) []syncpass.Dependency {
	if len(deps) == 0 {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []syncpass.Dependency
	for _, name := range deps {
		if why := notReady(s.apps[name]); why != "" {
			out = append(out, syncpass.Dependency{Name: name, Why: why})
		}
	}
	return out
}

// notReady says why the application whose status is st (nil: none yet)
// is not ready, "" when it is.
func notReady(st *AppStatus) string {
	switch {
	case st == nil || st.LastReconcile.IsZero():
		return "not reconciled yet"
	case st.Held.Failed != nil:
		return "rolled back; " + gitsource.ShortCommit(st.Held.Failed.Commit) + " held"
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

// markUnknown records that nothing is known of app's release while its
// swarm does not answer.
func (s *Statuses) markUnknown(app string, err error) {
	s.Update(app, func(st *AppStatus) {
		st.Health, st.HealthMessage = health.Unknown, err.Error()
		st.Sync = Unknown
	})
}

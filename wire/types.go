package wire

import "time"

// HealthUnknown is the health of an application the controller has not
// observed yet, or whose swarm could not be read.
const HealthUnknown = "unknown"

// Phases of an application's worker, as shown while a sync runs.
const (
	PhaseIdle        = "idle"
	PhaseReconciling = "reconciling"
	PhaseApplying    = "applying"
)

// Sync outcomes recorded for a requested sync.
const (
	OutcomeRunning   = "running"
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
)

// Application is one application as the list shows it: what git declares,
// what the last reconcile found and what runs on the swarm.
type Application struct {
	Name string `json:"name"`
	// Repo, TargetRevision and Path are the source as the app set declares it.
	Repo           string   `json:"repo"`
	TargetRevision string   `json:"targetRevision"`
	Path           string   `json:"path"`
	Swarm          string   `json:"swarm"`
	Releases       []string `json:"releases"`
	Automated      bool     `json:"automated"`
	// Sync is synced, out-of-sync or unknown.
	Sync string `json:"sync"`
	// Health is the worst health of the application's services;
	// HealthMessage names that service and why.
	Health        string `json:"health"`
	HealthMessage string `json:"healthMessage,omitempty"`
	// DriftReason is "git" when git moved past the recorded revision,
	// "live" when the swarm moved behind the controller, "" when in sync.
	DriftReason string `json:"driftReason,omitempty"`
	// Drift lists live drift findings (driftDetection: live).
	Drift []DriftFinding `json:"drift"`
	// Unmanaged names objects in a release's namespace that prune may
	// never touch.
	Unmanaged []string `json:"unmanaged,omitempty"`
	// Revision is the commit the last reconcile compared; DeployedRevision
	// the commit of the last revision applied.
	Revision         string `json:"revision,omitempty"`
	DeployedRevision string `json:"deployedRevision,omitempty"`
	// Held is set while a rollback holds the application at a commit.
	Held *Hold `json:"held,omitempty"`
	// RolledBack is set while a release rollback holds the application
	// off a commit whose rollout failed.
	RolledBack *RolledBack `json:"rolledBack,omitempty"`
	// Cause is the root cause of the last rollout that failed; absent
	// when none did, or a sync succeeded since.
	Cause *Cause `json:"cause,omitempty"`
	// Canary is the release's canary: running, paused, or the last one
	// promoted or aborted; absent when none ran since the controller
	// started.
	Canary *Canary `json:"canary,omitempty"`
	// Phase is what the application's worker does now (PhaseIdle, ...).
	Phase string `json:"phase"`
	// PendingSync is the id of a sync queued and not started yet, or 0.
	PendingSync uint64 `json:"pendingSync,omitempty"`
	// Services counts the live services and tasks of every release.
	Services ServiceCounts `json:"services"`
	Plan     []string      `json:"plan,omitempty"`
	// Warnings are what the last render said Swarm ignores (privileged,
	// devices, pid, network_mode: host, ...), in docker stack deploy's
	// words, and revision records skipped because they do not decode.
	Warnings       []string   `json:"warnings,omitempty"`
	LastError      string     `json:"lastError,omitempty"`
	LastErrorClass string     `json:"lastErrorClass,omitempty"`
	LastReconcile  *time.Time `json:"lastReconcile,omitempty"`
	// LastSync is the last requested sync, whatever its outcome;
	// LastApplied the last sync of any kind that wrote the application,
	// the controller's own (git, webhook, drift correction) included, and
	// after a restart the last one the history store recorded.
	LastSync    *SyncRecord  `json:"lastSync,omitempty"`
	LastApplied *AppliedSync `json:"lastApplied,omitempty"`
	// Artifacts are the release artifacts as the last reconcile resolved
	// them; absent for an application without artifacts.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Previews are the application's preview releases, one per branch;
	// PreviewProblems say why a branch has none.
	Previews        []Preview `json:"previews,omitempty"`
	PreviewProblems []string  `json:"previewProblems,omitempty"`
	// SyncWindow is the sync window holding the application's automated
	// syncs now; absent when none does.
	SyncWindow *SyncWindow `json:"syncWindow,omitempty"`
	// DependsOn names the applications this one syncs after; WaitingFor
	// those of them not synced and healthy at their current revision yet,
	// while a sync of this one waits (lastError says why each is not).
	DependsOn  []string `json:"dependsOn,omitempty"`
	WaitingFor []string `json:"waitingFor,omitempty"`
	// Generator names the app-set generator that made this application
	// from the directory Path; absent for a declared application.
	Generator string `json:"generator,omitempty"`
	// Self marks the application that deploys the controller itself
	// (see docs/concepts.md#self-management).
	Self bool `json:"self,omitempty"`
}

// SyncWindow is a sync window of the app set that holds an application:
// automated syncs and drift corrections wait until Until; a manual sync
// passes when ManualSync is set.
type SyncWindow struct {
	// Kind is allow or deny; Outside is set when the application is held
	// for being outside every one of its allow windows (the one named
	// opens first).
	Kind     string `json:"kind"`
	Schedule string `json:"schedule"`
	TimeZone string `json:"timeZone"`
	Duration string `json:"duration"`
	Outside  bool   `json:"outside,omitempty"`
	// Until is when the windows next let automated syncs through.
	Until      *time.Time `json:"until,omitempty"`
	ManualSync bool       `json:"manualSync"`
	// Message says it in one line: "held by sync window deny 0 22 * * *
	// (until 06:00 Europe/Berlin)".
	Message string `json:"message"`
}

// Preview is one preview release of an application: a copy of its stack
// for a branch, at the branch's version of the previewed artifacts.
type Preview struct {
	Branch  string `json:"branch"`
	Hash    string `json:"hash"`
	Release string `json:"release"`
	// Commit is the branch head the preview's version comes from.
	Commit string `json:"commit"`
	Domain string `json:"domain,omitempty"`
	// Health is the preview release's health; Deployed whether any version
	// of it runs.
	Health    string     `json:"health"`
	Deployed  bool       `json:"deployed"`
	Error     string     `json:"error,omitempty"`
	Artifacts []Artifact `json:"artifacts,omitempty"`
}

// Artifact drift states: whether git asks for another version than runs,
// and whether that version can deploy.
const (
	ArtifactInSync  = "none"
	ArtifactWaiting = "waiting"
	ArtifactReady   = "ready"
)

// Artifact is one release artifact of an application: the version git asks
// for, the one the swarm runs, the registry's answer and the version the
// render uses.
type Artifact struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Strategy  string `json:"strategy"`
	Suspended bool   `json:"suspended"`
	Preview   bool   `json:"preview,omitempty"`
	Image     string `json:"image,omitempty"`
	Desired   string `json:"desired,omitempty"`
	Current   string `json:"current,omitempty"`
	Version   string `json:"version,omitempty"`
	Condition string `json:"condition,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Digest    string `json:"digest,omitempty"`
	// Drift is ArtifactInSync, ArtifactWaiting or ArtifactReady.
	Drift string `json:"drift"`
}

// DriftFinding is one field of a live service that differs from git.
type DriftFinding struct {
	Release string `json:"release"`
	Service string `json:"service"`
	// Kind is modified, missing, unexpected or rolled-back.
	Kind    string `json:"kind"`
	Path    string `json:"path"`
	Field   string `json:"field,omitempty"`
	Desired string `json:"desired,omitempty"`
	Live    string `json:"live,omitempty"`
	Message string `json:"message,omitempty"`
}

// Hold says that an application is kept at a commit by a rollback: ticks
// compare against it instead of the branch head until a sync without a
// revision or an unhold releases it.
type Hold struct {
	Revision string    `json:"revision"`
	Actor    string    `json:"actor,omitempty"`
	Since    time.Time `json:"since"`
}

// RolledBack is a commit whose rollout failed and was rolled back:
// automated syncs leave it alone until a new commit, a sync or a rollback.
type RolledBack struct {
	// Revision is the failed commit; Restored the commit written back,
	// recorded as revision RestoredRevision.
	Revision         string    `json:"revision"`
	Restored         string    `json:"restored"`
	RestoredRevision int       `json:"restoredRevision"`
	Cause            string    `json:"cause"`
	Since            time.Time `json:"since"`
}

// Cause is the root cause of a failed rollout: the failing task of one
// service and why, in the daemon's words, with the last lines of its log
// (masked). Line says it all in one line.
type Cause struct {
	Line     string `json:"line"`
	Service  string `json:"service"`
	Kind     string `json:"kind,omitempty"`
	Task     string `json:"task,omitempty"`
	State    string `json:"state,omitempty"`
	Error    string `json:"error,omitempty"`
	Message  string `json:"message,omitempty"`
	ExitCode int    `json:"exitCode,omitempty"`
	Logs     string `json:"logs,omitempty"`
	// Shared names what other applications depend on whose failure this
	// is (a registry).
	Shared string `json:"shared,omitempty"`
}

// Canary phases.
const (
	CanaryProgressing = "progressing"
	CanaryPaused      = "paused"
	CanaryPromoted    = "promoted"
	CanaryAborted     = "aborted"
)

// Canary is a release's canary: the new spec of one service running as a
// second service beside the stable one while its steps pass.
type Canary struct {
	// Service is the stable service; CanaryService the canary's.
	Service       string `json:"service"`
	CanaryService string `json:"canaryService"`
	Revision      string `json:"revision"`
	// Phase is progressing, paused (waiting for someone to promote or
	// abort it), promoted or aborted.
	Phase string `json:"phase"`
	// Step is the current step, from 1 (steps + 1 once every step
	// passed); StepName what it does ("setWeight 20", "pause 30s").
	Step     int    `json:"step"`
	Steps    int    `json:"steps"`
	StepName string `json:"stepName,omitempty"`
	// Weight is the weight in place, in percent; Replicas and
	// StableReplicas the two services' replicas, of TotalReplicas.
	Weight         int       `json:"weight"`
	Replicas       int       `json:"replicas"`
	StableReplicas int       `json:"stableReplicas"`
	TotalReplicas  int       `json:"totalReplicas"`
	Started        time.Time `json:"started"`
	Since          time.Time `json:"since"`
	// Next is when the controller looks at it again; absent while it
	// waits for someone.
	Next *time.Time `json:"next,omitempty"`
	// Message says why it is paused, promoted or aborted.
	Message string `json:"message,omitempty"`
	// Analysis is the current analysis step's metrics.
	Analysis []CanaryMetric `json:"analysis,omitempty"`
}

// CanaryMetric is one metric of a canary's analysis step: its counts, its
// phase (running, successful, failed, inconclusive, error) and its newest
// measurements.
type CanaryMetric struct {
	Metric       string              `json:"metric"`
	Phase        string              `json:"phase"`
	Count        int                 `json:"count"`
	Successful   int                 `json:"successful"`
	Failed       int                 `json:"failed"`
	Inconclusive int                 `json:"inconclusive"`
	Errors       int                 `json:"errors"`
	Next         *time.Time          `json:"next,omitempty"`
	Message      string              `json:"message,omitempty"`
	Measurements []CanaryMeasurement `json:"measurements"`
}

// CanaryMeasurement is one measurement: its value (as JSON, shortened),
// or the error that stood for one, and its verdict.
type CanaryMeasurement struct {
	At    time.Time `json:"at"`
	Phase string    `json:"phase"`
	Value string    `json:"value,omitempty"`
	Error string    `json:"error,omitempty"`
}

// ServiceCounts sums the live state of an application's services. Running
// counts tasks running; Desired the tasks the services ask for.
type ServiceCounts struct {
	Services int `json:"services"`
	Running  int `json:"running"`
	Desired  int `json:"desired"`
}

// SyncRecord is one requested sync, as the status keeps its last one and the
// store keeps every one.
type SyncRecord struct {
	// ID orders the syncs of one controller process; a client waits for
	// LastSync.ID >= the id POST sync returned.
	ID         uint64     `json:"id"`
	Revision   string     `json:"revision,omitempty"`
	Actor      string     `json:"actor,omitempty"`
	Outcome    string     `json:"outcome"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	Summary    string     `json:"summary,omitempty"`
	Error      string     `json:"error,omitempty"`
}

// AppliedSync is the last sync that wrote an application, and who or what
// started it: Actor when someone asked (Trigger TriggerSync), otherwise
// the Trigger that made the controller act on its own. Trigger is "" for
// a sync an earlier run of the controller recorded: the history store
// keeps the actor, not the trigger.
type AppliedSync struct {
	At       time.Time `json:"at"`
	Revision string    `json:"revision,omitempty"`
	Actor    string    `json:"actor,omitempty"`
	Trigger  string    `json:"trigger,omitempty"`
}

// What started a sync (AppliedSync.Trigger).
const (
	// TriggerSync: someone asked for it; Actor names who.
	TriggerSync = "sync"
	// TriggerWebhook: a forge's push webhook.
	TriggerWebhook = "webhook"
	// TriggerGit: the controller found a new commit in git.
	TriggerGit = "git"
	// TriggerInterval: the controller's own reconcile applied a change
	// that came with no new commit (an artifact's image arrived, the
	// application's definition changed).
	TriggerInterval = "interval"
	// TriggerDriftCorrection: the controller put back a change made on the
	// swarm behind its back.
	TriggerDriftCorrection = "drift-correction"
)

// ApplicationList is the body of GET /api/v1/applications.
type ApplicationList struct {
	Applications []Application `json:"applications"`
	// LiveError says why live counts are missing (the swarm did not answer).
	LiveError string `json:"liveError,omitempty"`
}

// ApplicationDetail is the body of GET /api/v1/applications/{name}.
type ApplicationDetail struct {
	Application Application `json:"application"`
	Releases    []Release   `json:"releases"`
	LiveError   string      `json:"liveError,omitempty"`
	// Converging says why the live releases do not yet show the
	// application's last write done (the controller's snapshot predates
	// it, or the swarm still rolls it out); "" when they do.
	Converging string `json:"converging,omitempty"`
}

// Release is one release of an application with its live services.
type Release struct {
	Name string `json:"name"`
	// Revision is the number of the last recorded revision, 0 when none;
	// Commit its commit.
	Revision  int        `json:"revision"`
	Commit    string     `json:"commit,omitempty"`
	AppliedAt *time.Time `json:"appliedAt,omitempty"`
	Services  []Service  `json:"services"`
}

// Service is one live service of a release, with its tasks.
type Service struct {
	Name        string `json:"name"`
	ID          string `json:"id"`
	Image       string `json:"image"`
	Mode        string `json:"mode"`
	Desired     int    `json:"desired"`
	Running     int    `json:"running"`
	UpdateState string `json:"updateState,omitempty"`
	Tasks       []Task `json:"tasks"`
}

// Task is one task of a service. Node is the hostname of the node it was
// given (its id when the swarm names none), NodeID the node's id.
type Task struct {
	ID           string    `json:"id"`
	Slot         int       `json:"slot,omitempty"`
	Node         string    `json:"node,omitempty"`
	NodeID       string    `json:"nodeId,omitempty"`
	State        string    `json:"state"`
	DesiredState string    `json:"desiredState"`
	Message      string    `json:"message,omitempty"`
	Error        string    `json:"error,omitempty"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

// Diff is the body of GET /api/v1/applications/{name}/diff: the plan of
// each release at Revision against its last recorded revision.
type Diff struct {
	Application string        `json:"application"`
	Revision    string        `json:"revision"`
	Releases    []ReleasePlan `json:"releases"`
}

// History is the body of GET /api/v1/applications/{name}/history.
type History struct {
	Application string           `json:"application"`
	Releases    []ReleaseHistory `json:"releases"`
	// Syncs is the sync history kept by the store, newest first; empty
	// when the controller runs without one.
	Syncs []HistorySync `json:"syncs"`
	// SyncsError says why Syncs is empty when the store could not be read.
	SyncsError string `json:"syncsError,omitempty"`
}

// HistorySync is one sync as the store keeps it, with who asked.
type HistorySync struct {
	ID         int64      `json:"id"`
	Revision   string     `json:"revision,omitempty"`
	Actor      string     `json:"actor,omitempty"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// Outcome is running, succeeded, failed or interrupted.
	Outcome string `json:"outcome"`
	Summary string `json:"summary,omitempty"`
	Result  string `json:"result,omitempty"`
	Error   string `json:"error,omitempty"`
}

// ReleaseHistory is the recorded revisions of one release, oldest first.
type ReleaseHistory struct {
	Name      string     `json:"name"`
	Revisions []Revision `json:"revisions"`
}

// Revision is one recorded deploy of a release, as stored in the swarm.
type Revision struct {
	Number    int               `json:"number"`
	Commit    string            `json:"commit"`
	AppliedAt time.Time         `json:"appliedAt"`
	Actor     string            `json:"actor,omitempty"`
	Images    map[string]string `json:"images,omitempty"`
	// Chart names the chart a chart release was rendered from; absent for
	// a compose release.
	Chart *RevisionChart `json:"chart,omitempty"`
}

// RevisionChart is what the history shows of a chart revision: the chart,
// its version and the values files merged (the values themselves stay in
// the swarm's record).
type RevisionChart struct {
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	ValuesFiles []string `json:"valuesFiles,omitempty"`
	// Requirements are the external objects the chart's requirements.yaml
	// named for this revision, in its order.
	Requirements []RevisionRequirement `json:"requirements,omitempty"`
}

// RevisionRequirement is one external network, config or secret a chart
// revision requires, with what requirements.yaml says of it.
type RevisionRequirement struct {
	// Kind is network, config or secret.
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// AutoCreate marks a network the controller creates when missing.
	AutoCreate bool `json:"autoCreate,omitempty"`
}

// SyncOptions are the body of POST /api/v1/applications/{name}/sync. The
// zero value syncs the branch head once, with the application's prune policy.
type SyncOptions struct {
	// DryRun plans and answers with the diff, synchronously; nothing is
	// queued or written.
	DryRun bool `json:"dryRun,omitempty"`
	// Prune turns resource pruning on or off for this sync only; nil keeps
	// the application's syncPolicy.pruneResources.
	Prune *bool `json:"prune,omitempty"`
	// Revision deploys this commit (or branch or tag, resolved now) instead
	// of the branch head, and holds the application there (see Hold).
	Revision string `json:"revision,omitempty"`
}

// RollbackOptions are the body of POST /api/v1/applications/{name}/rollback.
type RollbackOptions struct {
	// Revision is the number of a recorded revision of Release.
	Revision int `json:"revision"`
	// Release names the release; "" is the application's only release.
	Release string `json:"release,omitempty"`
}

// Sync statuses of SyncResponse.
const (
	SyncQueued  = "queued"
	SyncMerged  = "merged"
	SyncPlanned = "planned"
)

// SyncResponse answers a sync or rollback. Status is SyncQueued (a new
// sync), SyncMerged (absorbed by one already queued; ID is that one's) or
// SyncPlanned (a dry run, with Diff).
type SyncResponse struct {
	Application string `json:"application"`
	Status      string `json:"status"`
	ID          uint64 `json:"id,omitempty"`
	// Revision is the commit a sync with a revision or a rollback deploys.
	Revision string `json:"revision,omitempty"`
	Diff     *Diff  `json:"diff,omitempty"`
}

// RefreshResponse answers POST /api/v1/applications/{name}/refresh.
type RefreshResponse struct {
	Application string `json:"application"`
	Status      string `json:"status"`
}

// ControllerStatus is the body of GET /api/v1/status. Details is present
// for admins only.
type ControllerStatus struct {
	ControllerID string       `json:"controllerId"`
	Ready        bool         `json:"ready"`
	AppSet       AppSetStatus `json:"appSet"`
	Applications int          `json:"applications"`
	// OrphanedReleases are this controller's releases deployed in the
	// swarm that no loaded application declares, each with why it was not
	// pruned; Orphaned names their applications, sorted. Pruned names the
	// applications whose releases were removed.
	OrphanedReleases []OrphanedRelease `json:"orphanedReleases"`
	Orphaned         []string          `json:"orphaned"`
	Pruned           []string          `json:"pruned"`
	// Notifiers names the notifiers events go to (log, store, webhooks,
	// chat), in registration order; absent when the server was not told.
	Notifiers []string `json:"notifiers,omitempty"`
	// Swarms are the destinations the controller deploys to, the local
	// swarm ("") first.
	Swarms []Swarm `json:"swarms"`
	// Store is the state of the history store (events and sync history);
	// absent when the server was not told.
	Store   *StoreStatus   `json:"store,omitempty"`
	Details *StatusDetails `json:"details,omitempty"`
	// Replication is the state of a replicated controller
	// (--leader-election); absent for a single one.
	Replication *Replication `json:"replication,omitempty"`
}

// The roles of a replica of a replicated controller.
const (
	RoleLeader  = "leader"
	RoleStandby = "standby"
)

// Replication is what a replica of a replicated controller knows of the
// leader lease and of the other replicas.
type Replication struct {
	// Replica names the replica that answered, Role its role (RoleLeader
	// or RoleStandby).
	Replica string `json:"replica"`
	Role    string `json:"role"`
	// Term is the lease's term as the replica last read it: it rises by
	// one at each take-over.
	Term int64 `json:"term"`
	// Leader is the lease's holder; absent while nobody holds it (a
	// release, or no lease written yet).
	Leader *Replica `json:"leader,omitempty"`
	// Replicas are the replicas the answering one knows of: itself and,
	// on the leader, each standby that follows its event stream.
	Replicas []Replica `json:"replicas"`
	// Error says why the lease could not be read at the last look.
	Error string `json:"error,omitempty"`
}

// Replica is one replica of a replicated controller.
type Replica struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// Addr is where the other replicas reach its API (admins only);
	// Version its build's version.
	Addr    string `json:"addr,omitempty"`
	Version string `json:"version,omitempty"`
}

// StoreStatus is the state of the controller's history store. The store
// is history, never safety: whatever it says, the controller deploys.
type StoreStatus struct {
	// Kept is true while events and syncs are kept; false when the store
	// could not be opened, and Error says why.
	Kept bool   `json:"kept"`
	Path string `json:"path,omitempty"`
	// Error is why nothing is kept, or what was wrong with the database
	// found at start (see MovedAside).
	Error string `json:"error,omitempty"`
	// MovedAside names where a corrupt database found at start was moved
	// before a new one was started.
	MovedAside string `json:"movedAside,omitempty"`
	// FailedWrites counts the events that could not be written since the
	// controller started (a full disk, say); they were streamed live only.
	FailedWrites int64 `json:"failedWrites,omitempty"`
}

// Swarm is one destination and what the controller knows of it.
type Swarm struct {
	// Name is what applications write in destination.swarm; "" is the
	// swarm the controller runs in.
	Name string `json:"name"`
	// Reachable is true while the swarm answers; UnreachableSince and
	// Error say since when and why it does not.
	Reachable        bool       `json:"reachable"`
	UnreachableSince *time.Time `json:"unreachableSince,omitempty"`
	Error            string     `json:"error,omitempty"`
	// EngineVersion and APIVersion are the manager's Engine and the API
	// version negotiated with it; Nodes and Managers count the swarm's nodes.
	EngineVersion string `json:"engineVersion,omitempty"`
	APIVersion    string `json:"apiVersion,omitempty"`
	Nodes         int    `json:"nodes,omitempty"`
	Managers      int    `json:"managers,omitempty"`
	// Applications counts the applications deployed there.
	Applications int `json:"applications"`
}

// SwarmList is the body of GET /api/v1/swarms.
type SwarmList struct {
	Swarms []Swarm `json:"swarms"`
}

// OrphanedRelease is a release of the controller that is deployed while
// no loaded application declares it.
type OrphanedRelease struct {
	Application string `json:"application"`
	Release     string `json:"release"`
	// Swarm is the destination holding it; "" is the local swarm.
	Swarm string `json:"swarm"`
	// Reason says why it was not pruned, e.g. "app set is empty; pruning
	// held".
	Reason string `json:"reason"`
}

// AppSetStatus is the state of the app-set source.
type AppSetStatus struct {
	Source   string     `json:"source"`
	Revision string     `json:"revision,omitempty"`
	Loaded   bool       `json:"loaded"`
	Stale    bool       `json:"stale"`
	Error    string     `json:"error,omitempty"`
	LoadedAt *time.Time `json:"loadedAt,omitempty"`
}

// StatusDetails is what only an admin sees of the controller.
type StatusDetails struct {
	Swarm   SwarmInfo `json:"swarm"`
	Git     GitStats  `json:"git"`
	Workers int       `json:"workers"`
}

// SwarmInfo names the swarm manager the controller talks to.
type SwarmInfo struct {
	NodeID        string `json:"nodeId,omitempty"`
	ClusterID     string `json:"clusterId,omitempty"`
	EngineVersion string `json:"engineVersion,omitempty"`
}

// GitStats counts the git cache's remote calls since start.
type GitStats struct {
	ListRefs int64 `json:"listRefs"`
	Fetches  int64 `json:"fetches"`
	Exports  int64 `json:"exports"`
}

// VersionInfo is the body of GET /api/v1/version.
type VersionInfo struct {
	Version      string   `json:"version"`
	Commit       string   `json:"commit"`
	GoVersion    string   `json:"goVersion"`
	APIVersion   string   `json:"apiVersion"`
	Capabilities []string `json:"capabilities"`
}

// Whoami is the body of GET /api/v1/whoami: the subject the presented
// token names, so that a client offers only what the role allows.
type Whoami struct {
	Name string `json:"name"`
	// Role is viewer, deployer or admin; each includes the one before.
	Role string `json:"role"`
	// Apps are the globs of application names the subject may see; empty
	// means every application.
	Apps []string `json:"apps"`
	// Session is set when the caller signed in with a session cookie.
	Session *WhoamiSession `json:"session,omitempty"`
}

// WhoamiSession is the sign-in session a whoami answered for.
type WhoamiSession struct {
	// CSRFToken must be sent in the X-Skep-CSRF header of every request
	// made with the session's cookie that is not a GET or HEAD.
	CSRFToken string `json:"csrfToken"`
	// ExpiresAt is when the session ends at the latest.
	ExpiresAt time.Time `json:"expiresAt"`
}

// AuthMethods is the body of GET /api/v1/auth: how one signs in to this
// controller. It asks for no credential.
type AuthMethods struct {
	// Token is always true: a bearer token of the tokens file.
	Token bool `json:"token"`
	// OIDC is set when sign-in at an OpenID provider is offered.
	OIDC *OIDCSignIn `json:"oidc,omitempty"`
}

// OIDCSignIn describes sign-in at an OpenID provider.
type OIDCSignIn struct {
	// Label names the provider on the sign-in page.
	Label string `json:"label"`
	// LoginPath starts the browser's sign-in; it takes ?next=#/route.
	LoginPath string `json:"loginPath"`
	// Issuer is the provider; `skep login` discovers its endpoints.
	Issuer string `json:"issuer"`
	// CLIClientID is the client `skep login` signs in as; absent when the
	// CLI may not sign in.
	CLIClientID string `json:"cliClientID,omitempty"`
	// Scopes are the scopes to ask for.
	Scopes []string `json:"scopes"`
}

// SignedOut is the body of POST /api/v1/auth/signout.
type SignedOut struct {
	// EndSessionURL, when set, is where the browser goes next to end its
	// session at the provider too.
	EndSessionURL string `json:"endSessionURL,omitempty"`
}

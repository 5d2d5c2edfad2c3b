package stack

// Labels Skep stamps on every object it creates. The ownership labels
// together name the owner (which controller, which application, which
// release); the others are bookkeeping that apply writes and plan and prune
// read. Every package reads these constants: there is no second copy.
const (
	// LabelNamespace is docker stack's own namespace label; Skep sets it
	// too so `docker stack ps` and friends see Skep's releases.
	LabelNamespace   = "com.docker.stack.namespace"
	LabelController  = "io.skep.controller"
	LabelApplication = "io.skep.application"
	LabelRelease     = "io.skep.release"

	// LabelSpecHash holds the hash of the desired service spec Skep last
	// wrote, so an unchanged spec is never written again.
	LabelSpecHash = "io.skep.spec-hash"
	// LabelKind marks Skep's own bookkeeping objects (KindRevision,
	// KindHold): prune never treats them as a release's resources.
	LabelKind = "io.skep.kind"
	// LabelRevision and LabelCommit are set on revision configs.
	LabelRevision = "io.skep.revision"
	LabelCommit   = "io.skep.commit"
	// LabelTerm is the leader term of a replicated controller that
	// recorded a revision.
	LabelTerm = "io.skep.term"
	// LabelStackImage is docker stack deploy's record of the image as
	// written; apply sets it the same way so both tools read each other's
	// services.
	LabelStackImage = "com.docker.stack.image"
	// LabelWave holds a service's wave when it is not 0 (see
	// Release.Waves): lower waves converge before a higher one is applied.
	LabelWave = "io.skep.wave"
	// LabelHook holds the compose name of the hook a job was run for
	// (with LabelKind KindHook), so its finished jobs are found and kept
	// or removed together.
	LabelHook = "io.skep.hook"
	// LabelCanaryOf names, on a canary service (KindCanary), the stable
	// service it runs beside; LabelCanary holds its state
	// (canary.State.Encode), what any controller carries on from.
	LabelCanaryOf = "io.skep.canary-of"
	LabelCanary   = "io.skep.canary"
	// LabelPrefix starts every label Skep owns.
	LabelPrefix = "io.skep."
)

// Values of LabelKind.
const (
	// KindRevision marks a config holding one recorded revision of a release.
	KindRevision = "revision"
	// KindHold marks the config that keeps an application's hold (a
	// rollback) in the swarm, so it survives a controller restart.
	KindHold = "hold"
	// KindHook marks a hook job (see Hook): it is not a service of the
	// release, so drift and prune leave it to the hook runner.
	KindHook = "hook"
	// KindRequirement marks a network created for a chart's
	// requirements.yaml (autoCreate): it carries the owner labels of the
	// release that created it but not LabelNamespace, since it belongs to
	// no release; other releases share it and nothing prunes it.
	KindRequirement = "requirement"
	// KindCanary marks the canary of a service: the new spec running
	// beside the stable one while its steps pass. It is not a service of
	// the release: drift and resource prune leave it to the canary.
	KindCanary = "canary"
)

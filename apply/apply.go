// Package apply writes one desired stack.Release to a swarm through the
// Docker Engine API and records what it wrote as a numbered revision in the
// swarm itself.
//
// Order: the reads of the revisions, the namespace's services and the
// networks (together), the ownership check, networks, configs and secrets
// (created when missing), then services (created, or updated with their version index),
// then the revision, then the deletion of this owner's rotated configs and
// secrets that no service uses any more.
//
// It must never:
//   - write to a service whose spec is unchanged (see TestApplyTwiceWritesNothing);
//   - write to or delete an object that does not carry this owner's labels;
//   - store a secret's value anywhere but in the secret itself (revisions
//     hold its sha256);
//   - render, plan or wait for convergence: those are other steps' jobs;
//   - send registry credentials: private registry auth is not supported
//     yet, so digests resolve only for images the Engine can read anonymously.
//
// It also keeps the application's hold (SaveHold, LoadHold) beside the
// revisions: both are records in the swarm, and apply is their one writer.
// ForgetRelease removes both once prune has removed the rest of a release.
//
// Apply does not lock: the caller runs at most one Apply (or SaveHold) per
// release at a time, as reconcile's one worker per application does. The
// Engine's version index guards each service update, not the whole apply.
//
// Errors carry their outcome class (outcome.Of): transient (back off),
// stalled (the release must change); a *ForeignError (someone else's
// objects are in the way) comes wrapped as stalled.
package apply

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
)

// DefaultKeepRevisions is how many revisions per release Apply keeps when
// Options.KeepRevisions is zero.
const DefaultKeepRevisions = 10

// ServiceLister lists services; CheckOwnership needs nothing more.
type ServiceLister interface {
	ServiceList(ctx context.Context, options swarm.ServiceListOptions) ([]swarm.Service, error)
}

// ConfigLister lists configs with their data; Revisions and LoadHold need
// nothing more.
type ConfigLister interface {
	ConfigList(ctx context.Context, options swarm.ConfigListOptions) ([]swarm.Config, error)
}

// ConfigStore reads and writes configs: the records apply keeps in the
// swarm (revisions, holds) need nothing more.
type ConfigStore interface {
	ConfigLister
	ConfigCreate(ctx context.Context, config swarm.ConfigSpec) (swarm.ConfigCreateResponse, error)
	ConfigRemove(ctx context.Context, id string) error
}

// ServiceWriter reads and writes services.
type ServiceWriter interface {
	ServiceLister
	ServiceCreate(ctx context.Context, service swarm.ServiceSpec, options swarm.ServiceCreateOptions) (swarm.ServiceCreateResponse, error)
	ServiceUpdate(ctx context.Context, serviceID string, version swarm.Version, service swarm.ServiceSpec, options swarm.ServiceUpdateOptions) (swarm.ServiceUpdateResponse, error)
	ServiceInspectWithRaw(ctx context.Context, serviceID string, options swarm.ServiceInspectOptions) (swarm.Service, []byte, error)
}

// Engine is the part of the Docker Engine API Apply uses: services,
// networks, configs, secrets and the registry look-up of resolveImage.
// *swarm.Client satisfies it. Apply makes no concurrent calls on it.
type Engine interface {
	ServiceWriter
	ConfigStore
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	SecretList(ctx context.Context, options swarm.SecretListOptions) ([]swarm.Secret, error)
	SecretCreate(ctx context.Context, secret swarm.SecretSpec) (swarm.SecretCreateResponse, error)
	SecretRemove(ctx context.Context, id string) error
	DistributionInspect(ctx context.Context, image, encodedRegistryAuth string) (registry.DistributionInspect, error)
}

// Options are the inputs of one Apply besides the release. The zero value
// is invalid only for Owner, which must name a controller and the release.
type Options struct {
	// Owner is stamped on every object Apply creates and must match the
	// labels of every object it changes. Owner.Release must equal the
	// release's Name.
	Owner stack.Owner
	// ResolveImage says when service images are pinned to a registry
	// digest; "" means ResolveAlways.
	ResolveImage ResolveImage
	// Commit and Actor are recorded in the revision: the git commit the
	// release was rendered from and who asked ("" = the controller itself).
	Commit string
	Actor  string
	// Correction marks an apply that puts live services back to the
	// recorded revision after out-of-band drift: the desired state did not
	// change, so no revision is written (unless the release has none).
	Correction bool
	// Chart is recorded in the revision of a chart release; nil for a
	// compose one.
	Chart *ChartRecord
	// Force re-applies every service even when its spec is unchanged,
	// restarting its tasks (`skep deploy --force`). The controller's own
	// loop never sets it.
	Force bool
	// Wave marks the apply of an earlier wave of the release: rel holds
	// only the services of the waves so far (stack.Release.UpTo), so no
	// revision is written and no rotated config or secret is deleted; the
	// apply of the whole release, last, does both.
	Wave bool
	// KeepRevisions bounds the revisions kept per release; 0 means
	// DefaultKeepRevisions.
	KeepRevisions int
	// Logger receives Debug detail and Warn notices; nil discards them.
	// Apply adds the release's name to every line as "release": a Logger
	// that carries one already would log that key twice.
	Logger *slog.Logger
	// Digests, when set, answers digest look-ups from a cache shared by
	// every apply to the same swarm; nil asks the Engine each time.
	Digests *DigestCache
	// Self names the controller's own service when rel is the release of
	// the app set's self application; the zero value for every other.
	// See SelfService.
	Self SelfService
	// Term is the leader term of the replicated controller writing,
	// recorded in the revision (and its LabelTerm); 0 records none.
	Term int64
}

// withDefaults fills in every zero field that has a default.
func (o Options) withDefaults() Options {
	if o.ResolveImage == "" {
		o.ResolveImage = ResolveAlways
	}
	if o.KeepRevisions <= 0 {
		o.KeepRevisions = DefaultKeepRevisions
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// Kind names the type of a swarm object in a Change or ForeignObject. The
// zero value is invalid.
type Kind string

// Kinds, in the order Apply writes them. KindRevision is a revision config
// Apply keeps in the swarm (see Revision), not an object of the release.
const (
	KindNetwork  Kind = "network"
	KindConfig   Kind = "config"
	KindSecret   Kind = "secret"
	KindService  Kind = "service"
	KindRevision Kind = "revision"
)

// Action is what Apply did to one object. The zero value is invalid.
type Action string

const (
	// Created: the object did not exist and Apply created it.
	Created Action = "created"
	// Updated: a service whose live spec differed was written.
	Updated Action = "updated"
	// Unchanged: the object already was as desired; nothing was written.
	Unchanged Action = "unchanged"
	// Deleted: an old revision beyond KeepRevisions, or a rotated config
	// or secret no service uses any more, was removed.
	Deleted Action = "deleted"
)

// Change reports one object Apply looked at.
type Change struct {
	Kind Kind
	// Name is the object's full name in the swarm (as a stack.Release key).
	Name string
	// ID is the Engine's id of the object, live or just created.
	ID     string
	Action Action
	// Note explains what an operator should know, e.g. that a live network's
	// options differ from the release (networks are immutable).
	Note string
}

// Result reports what one Apply did, object by object, in the order it
// acted. Revision is the number of the revision written, 0 when none was.
// Changes belongs to the caller; Apply keeps no reference to it.
type Result struct {
	Changes  []Change
	Revision int
	// Self is the write of the controller's own service that Apply left
	// for last (Options.Self), recorded in Revision already; nil when that
	// service is unchanged or rel is no self release.
	Self *SelfWrite
}

// Changed reports whether Apply created, updated or deleted anything
// besides revisions.
func (r Result) Changed() bool {
	for _, c := range r.Changes {
		if c.Kind != KindRevision && c.Action != Unchanged {
			return true
		}
	}
	return r.Self != nil
}

// Apply makes the swarm run rel. It blocks until every write is accepted by
// the Engine (not until tasks converge). Apply first refuses a namespace
// holding services of another owner (see CheckOwnership), unless this owner
// has recorded a revision of the release already; even then it never writes
// to an object that another owner holds under a desired name.
//
// A revision is written only when something was created or updated, or
// when the release has no revision yet. rel is not modified. On error the
// Result lists what was done before it.
func Apply(ctx context.Context, eng Engine, rel stack.Release, opts Options) (Result, error) {
	opts = opts.withDefaults()
	if err := validate(rel, opts); err != nil {
		return Result{}, err
	}
	a := &applier{eng: eng, rel: rel, opts: opts, log: opts.Logger.With("release", rel.Name)}
	return a.run(ctx)
}

// validate refuses, before any Engine call, what no retry can fix: an
// owner that names no controller or another release, an unknown resolve
// policy, and service entries the Engine would reject or misname.
func validate(rel stack.Release, opts Options) error {
	switch {
	case opts.Owner.Controller == "":
		return stalled("apply release %q: owner has no controller id", rel.Name)
	case rel.Name == "":
		return stalled("apply: release has no name")
	case opts.Owner.Release != rel.Name:
		return stalled("apply release %q: owner names release %q", rel.Name, opts.Owner.Release)
	}
	if err := opts.ResolveImage.Validate(); err != nil {
		return &outcome.StalledError{Err: fmt.Errorf("apply release %q: %w", rel.Name, err)}
	}
	for key, spec := range rel.Services {
		if spec.Name != "" && spec.Name != key {
			return stalled("apply release %q: service key %q names a spec called %q", rel.Name, key, spec.Name)
		}
		if spec.TaskTemplate.ContainerSpec == nil {
			return stalled("apply release %q: service %q has no container spec", rel.Name, key)
		}
	}
	return nil
}

// applier carries one Apply's inputs and the live objects it has read.
type applier struct {
	eng  Engine
	rel  stack.Release
	opts Options
	log  *slog.Logger

	result Result

	networks map[string]network.Summary // by name; swarm-scoped preferred
	configs  map[string]swarm.Config    // by name
	secrets  map[string]swarm.Secret    // by name
	images   map[string]string          // service name → image as written to the swarm
	self     *swarm.Service             // the controller's own service, live; nil unless Options.Self
}

// run performs the steps in the order of the package doc; see Apply.
func (a *applier) run(ctx context.Context) (Result, error) {
	owner := a.opts.Owner
	// The reads before the first write go out together: each is a round
	// trip to a manager that, in a first deploy of many applications,
	// answers them all at once, and one after the other they were most of
	// an apply's time to its first write.
	var (
		revs                    []swarm.Config
		live                    map[string]swarm.Service
		revErr, liveErr, netErr error
		wg                      sync.WaitGroup
	)
	// The registry too: under ResolveAlways each image's digest is asked
	// for anyway, and the answer waits in the cache for applyServices.
	a.prefetchDigests(ctx)
	wg.Go(func() { revs, revErr = revisionConfigs(ctx, a.eng, owner) })
	wg.Go(func() { live, liveErr = releaseServices(ctx, a.eng, a.rel.Name) })
	wg.Go(func() { netErr = a.listNetworks(ctx) })
	wg.Wait()
	if err := cmp.Or(revErr, liveErr); err != nil {
		return a.result, err
	}
	if err := a.findSelf(live); err != nil {
		return a.result, err
	}
	// Once this owner has recorded a revision the namespace is its own: a
	// foreign service that appeared since is left alone unless it takes a
	// desired name, which applyServices refuses. The controller's own
	// service is taken over even unlabelled: it was deployed by hand to
	// start the controller that now deploys it.
	if len(revs) == 0 {
		if err := foreignServices(owner, withoutSelf(live, a.self)); err != nil {
			return a.result, err
		}
	}
	if netErr != nil {
		return a.result, netErr
	}
	steps := []func(context.Context) error{a.applyNetworks, a.applyConfigs, a.applySecrets}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return a.result, err
		}
	}
	if err := a.applyServices(ctx, live); err != nil {
		return a.result, err
	}
	if a.opts.Wave {
		return a.result, nil
	}
	// A correction restores the recorded spec, so it is no new revision.
	// A release without any gets one even when nothing was written: prune
	// deletes only what a recorded revision shows Skep created.
	if (a.result.Changed() && !a.opts.Correction) || len(revs) == 0 {
		n, err := a.writeRevision(ctx, revs)
		if err != nil {
			return a.result, err
		}
		a.result.Revision = n
	}
	// Last, so that a failure above leaves the old configs and secrets
	// that live services may still run with.
	a.deleteRotated(ctx)
	return a.result, nil
}

// record appends c to the result and logs it: Debug when nothing was
// written, Info for a write, Warn when c carries a Note for an operator.
func (a *applier) record(ctx context.Context, c Change) {
	a.result.Changes = append(a.result.Changes, c)
	level := slog.LevelDebug
	if c.Action != Unchanged {
		level = slog.LevelInfo
	}
	if c.Note != "" {
		level = slog.LevelWarn
	}
	attrs := []any{"kind", c.Kind, "name", c.Name, "action", c.Action}
	if c.Note != "" {
		attrs = append(attrs, "note", c.Note)
	}
	a.log.Log(ctx, level, "apply object", attrs...)
}

// ownerFilters returns label filters selecting owner's objects. The Engine
// ANDs label filters; callers still check Owns on what comes back, since a
// filter is only a pre-selection and must not be the proof.
func ownerFilters(owner stack.Owner) filters.Args {
	f := filters.NewArgs()
	for _, k := range slices.Sorted(maps.Keys(owner.Labels())) {
		f.Add("label", k+"="+owner.Labels()[k])
	}
	return f
}

// withLabels returns a new map of base plus extra, extra winning.
func withLabels(base, extra map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(extra))
	maps.Copy(out, base)
	maps.Copy(out, extra)
	return out
}

// sortedKeys returns m's keys in order, so that Apply acts, logs and
// reports in the same order on every run.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// byKindName orders ForeignObjects for a stable ForeignError message.
func byKindName(a, b ForeignObject) int {
	return cmp.Or(strings.Compare(string(a.Kind), string(b.Kind)), strings.Compare(a.Name, b.Name))
}

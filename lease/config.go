package lease

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/swarm"
)

// ConfigPrefix starts the name of every lease config: a watcher of the
// swarm leaves them out (see IsConfig), since one changes every Retry and
// holds nothing a release reads.
const ConfigPrefix = "skep-lease-"

// ConfigName is the name of the lease config of controller id.
func ConfigName(id string) string { return ConfigPrefix + id }

// IsConfig reports whether a config called name is a lease.
func IsConfig(name string) bool { return strings.HasPrefix(name, ConfigPrefix) }

// Labels of a lease config. They are not Skep's ownership labels (no
// io.skep.controller): nothing prunes a lease, and no release reads it.
const (
	LabelController = "io.skep.lease.controller"
	LabelHolder     = "io.skep.lease.holder"
	LabelName       = "io.skep.lease.name"
	LabelAddr       = "io.skep.lease.addr"
	LabelVersion    = "io.skep.lease.version"
	LabelTerm       = "io.skep.lease.term"
	LabelEvents     = "io.skep.lease.events"
	LabelDuration   = "io.skep.lease.duration"
	LabelRenewed    = "io.skep.lease.renewed"
)

// Engine is what Config asks of a swarm manager; *swarm.Client
// implements it.
type Engine interface {
	ConfigInspectWithRaw(ctx context.Context, id string) (swarm.Config, []byte, error)
	ConfigCreate(ctx context.Context, spec swarm.ConfigSpec) (swarm.ConfigCreateResponse, error)
	ConfigUpdate(ctx context.Context, id string, version swarm.Version, spec swarm.ConfigSpec) error
}

// Config keeps a lease in a Swarm config: the record in its labels, the
// version its Meta.Version. Swarm stores every update of an object as a
// compare-and-swap on that version ("update out of sequence" otherwise)
// and lets a config's labels change without touching a task, so a renewal
// costs one small raft entry. A manager without quorum cannot write it:
// a leader cut off from the majority cannot renew.
type Config struct {
	Engine Engine
	// Controller is the controller id whose replicas share the lease.
	Controller string
}

// The compiler keeps Config in step with Store.
var _ Store = Config{}

// data is the config's fixed content: Swarm refuses an update that
// changes it.
func (c Config) data() []byte {
	return []byte("leader lease of the skep controller " + c.Controller + "\n")
}

// Get implements Store, reading the config by name.
func (c Config) Get(ctx context.Context) (Record, uint64, bool, error) {
	cfg, _, err := c.Engine.ConfigInspectWithRaw(ctx, ConfigName(c.Controller))
	if cerrdefs.IsNotFound(err) {
		return Record{}, 0, false, nil
	}
	if err != nil {
		return Record{}, 0, false, fmt.Errorf("read lease %s: %w", ConfigName(c.Controller), err)
	}
	return decode(cfg.Spec.Labels), cfg.Version.Index, true, nil
}

// Create implements Store.
func (c Config) Create(ctx context.Context, rec Record) error {
	_, err := c.Engine.ConfigCreate(ctx, c.spec(rec))
	if cerrdefs.IsConflict(err) || cerrdefs.IsAlreadyExists(err) {
		return fmt.Errorf("create lease %s: %w", ConfigName(c.Controller), ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("create lease %s: %w", ConfigName(c.Controller), err)
	}
	return nil
}

// Update implements Store. Swarm answers a stale version with "update out
// of sequence", an error with no class of its own.
func (c Config) Update(ctx context.Context, version uint64, rec Record) error {
	err := c.Engine.ConfigUpdate(ctx, ConfigName(c.Controller), swarm.Version{Index: version}, c.spec(rec))
	if err != nil && (strings.Contains(err.Error(), "update out of sequence") || cerrdefs.IsNotFound(err)) {
		return fmt.Errorf("update lease %s at version %d: %w", ConfigName(c.Controller), version, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("update lease %s: %w", ConfigName(c.Controller), err)
	}
	return nil
}

// spec is the config holding rec.
func (c Config) spec(rec Record) swarm.ConfigSpec {
	labels := map[string]string{
		LabelController: c.Controller,
		LabelHolder:     rec.Holder,
		LabelName:       rec.Name,
		LabelAddr:       rec.Addr,
		LabelVersion:    rec.Version,
		LabelTerm:       strconv.FormatInt(rec.Term, 10),
		LabelEvents:     strconv.FormatInt(rec.Events, 10),
		LabelDuration:   rec.Duration.String(),
	}
	if !rec.Renewed.IsZero() {
		labels[LabelRenewed] = rec.Renewed.UTC().Format(time.RFC3339Nano)
	}
	return swarm.ConfigSpec{Annotations: swarm.Annotations{Name: ConfigName(c.Controller), Labels: labels}, Data: c.data()}
}

// decode reads a record from a lease config's labels. A label that does
// not parse reads as zero: a term of 0 is taken over as any other, and
// the next holder writes whole labels again.
func decode(labels map[string]string) Record {
	term, _ := strconv.ParseInt(labels[LabelTerm], 10, 64)
	events, _ := strconv.ParseInt(labels[LabelEvents], 10, 64)
	duration, _ := time.ParseDuration(labels[LabelDuration])
	renewed, _ := time.Parse(time.RFC3339Nano, labels[LabelRenewed])
	return Record{Holder: labels[LabelHolder], Name: labels[LabelName], Addr: labels[LabelAddr], Version: labels[LabelVersion],
		Term: term, Events: events, Duration: max(duration, 0), Renewed: renewed}
}

package apply

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
)

// Swarm's limits on configs: names up to 64 characters, data up to 500 KiB.
const (
	maxConfigName = 64
	maxConfigData = 500 * 1024
	// maxRevisionJSON bounds what decodeRevision inflates, against configs
	// that only pretend to be revisions.
	maxRevisionJSON = 64 << 20
)

// revisionSchema versions the stored document; decodeRevision refuses others.
const revisionSchema = 1

// Revision is one recorded deploy of a release: what was applied, from
// which commit, when and at whose request. It is stored in the swarm as a
// Docker config, so a controller with an empty disk still knows it.
type Revision struct {
	// Number counts the release's revisions from 1. The next is one above
	// the newest kept, so deleting old ones never reuses a number.
	Number int
	// Commit is the git commit the release was rendered from.
	Commit string
	// AppliedAt is when the revision was written, in UTC.
	AppliedAt time.Time
	Actor     string // "" when the controller acted on its own
	// Application is the application that applied it: after a rename it
	// differs from an older revision's.
	Application string
	// Release is the desired release as given to Apply, with every secret's
	// Data replaced by its digest (see RedactSecrets). When the whole did
	// not fit Swarm's size limit, configs' Data is digested too and
	// ConfigsRedacted is set.
	Release         stack.Release
	ConfigsRedacted bool
	// Images maps each service to the image written to the swarm, after
	// digest resolution.
	Images map[string]string
	// Chart is what a chart release was rendered from; nil for compose.
	Chart *ChartRecord
	// Restores is, for a release rollback's revision, the number of the
	// revision it writes back, and Failed the commit whose rollout failed;
	// 0 and "" for every other revision.
	Restores int
	Failed   string
	// Term is the leader term of the replicated controller that wrote
	// it; 0 without leader election.
	Term int64 `json:",omitempty"`
	// ConfigID is the id of the Docker config holding the revision; it is
	// not part of the stored document.
	ConfigID string
}

// RedactSecrets returns a copy of rel whose secrets' Data is replaced by
// "sha256:<hex>" of the value, and whose values decrypted from SOPS files
// show as their masks in the fields they came to (rel.Masked), as stored
// in revisions and shown in plans. Maps Masked did not copy are
// shared with rel.
func RedactSecrets(rel stack.Release) stack.Release {
	out := rel.Masked()
	out.Sensitive, out.Masks = nil, nil
	if out.Secrets != nil {
		secrets := out.Secrets
		out.Secrets = make(map[string]swarm.SecretSpec, len(secrets))
		for name, s := range secrets {
			s.Data = digest(s.Data)
			out.Secrets[name] = s
		}
	}
	return out
}

// redactConfigs is RedactSecrets for configs: the fallback when a revision
// with every config's data does not fit in one Swarm config.
func redactConfigs(rel stack.Release) stack.Release {
	out := rel
	if rel.Configs != nil {
		out.Configs = make(map[string]swarm.ConfigSpec, len(rel.Configs))
		for name, c := range rel.Configs {
			c.Data = digest(c.Data)
			out.Configs[name] = c
		}
	}
	return out
}

// digest is the "sha256:<hex>" stand-in for a payload a revision must not
// hold, still enough to tell whether a payload changed.
func digest(data []byte) []byte {
	sum := sha256.Sum256(data)
	return []byte("sha256:" + hex.EncodeToString(sum[:]))
}

// revisionDoc is the stored form of a Revision: JSON, then gzip. It is
// separate from Revision so that the stored format changes only with
// revisionSchema, whatever happens to the Go types.
// ChartRecord is what a revision keeps of a chart render: the chart and
// its version, the values files merged, and the merged values and compose
// document with secrets masked. It never holds a secret's value.
type ChartRecord struct {
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	ValuesFiles []string `json:"valuesFiles,omitempty"`
	Values      string   `json:"values,omitempty"`
	Manifest    string   `json:"manifest,omitempty"`
	// Requirements are the external objects requirements.yaml named for
	// this render, in its order.
	Requirements []RequirementRecord `json:"requirements,omitempty"`
}

// RequirementRecord is one entry of a chart's requirements.yaml as a
// revision keeps it.
type RequirementRecord struct {
	// Kind is "network", "config" or "secret".
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// AutoCreate marks a network the controller creates when missing.
	AutoCreate bool `json:"autoCreate,omitempty"`
}

type revisionDoc struct {
	Schema          int               `json:"schema"`
	Number          int               `json:"number"`
	Commit          string            `json:"commit"`
	AppliedAt       time.Time         `json:"appliedAt"`
	Actor           string            `json:"actor,omitempty"`
	Application     string            `json:"application"`
	Release         releaseDoc        `json:"release"`
	ConfigsRedacted bool              `json:"configsRedacted,omitempty"`
	Images          map[string]string `json:"images,omitempty"`
	Chart           *ChartRecord      `json:"chart,omitempty"`
	Restores        int               `json:"restores,omitempty"`
	Failed          string            `json:"failed,omitempty"`
}

// releaseDoc is the stored form of a stack.Release, which has no JSON tags
// of its own.
type releaseDoc struct {
	Name     string                           `json:"name"`
	Services map[string]swarm.ServiceSpec     `json:"services,omitempty"`
	Networks map[string]network.CreateOptions `json:"networks,omitempty"`
	Configs  map[string]swarm.ConfigSpec      `json:"configs,omitempty"`
	Secrets  map[string]swarm.SecretSpec      `json:"secrets,omitempty"`
}

// encodeRevision returns the stored bytes of rev. It does not redact: the
// caller passes a release whose secrets are redacted already.
func encodeRevision(rev Revision) ([]byte, error) {
	doc := revisionDoc{
		Schema:          revisionSchema,
		Number:          rev.Number,
		Commit:          rev.Commit,
		AppliedAt:       rev.AppliedAt,
		Actor:           rev.Actor,
		Application:     rev.Application,
		ConfigsRedacted: rev.ConfigsRedacted,
		Images:          rev.Images,
		Chart:           rev.Chart,
		Restores:        rev.Restores,
		Failed:          rev.Failed,
		Release: releaseDoc{
			Name:     rev.Release.Name,
			Services: rev.Release.Services,
			Networks: rev.Release.Networks,
			Configs:  rev.Release.Configs,
			Secrets:  rev.Release.Secrets,
		},
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(doc); err != nil {
		return nil, fmt.Errorf("encode revision %d: %w", rev.Number, err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("encode revision %d: %w", rev.Number, err)
	}
	return buf.Bytes(), nil
}

// decodeRevision parses what encodeRevision wrote. It returns an error for
// anything else, and never panics.
func decodeRevision(data []byte) (Revision, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return Revision{}, fmt.Errorf("decode revision: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxRevisionJSON+1))
	if err != nil {
		return Revision{}, fmt.Errorf("decode revision: %w", err)
	}
	if len(raw) > maxRevisionJSON {
		return Revision{}, fmt.Errorf("decode revision: more than %d bytes of JSON", maxRevisionJSON)
	}
	var doc revisionDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return Revision{}, fmt.Errorf("decode revision: %w", err)
	}
	if doc.Schema != revisionSchema {
		return Revision{}, fmt.Errorf("decode revision: schema %d, want %d", doc.Schema, revisionSchema)
	}
	if doc.Number <= 0 {
		return Revision{}, fmt.Errorf("decode revision: number %d, want a positive one", doc.Number)
	}
	return Revision{
		Number:          doc.Number,
		Commit:          doc.Commit,
		AppliedAt:       doc.AppliedAt,
		Actor:           doc.Actor,
		Application:     doc.Application,
		ConfigsRedacted: doc.ConfigsRedacted,
		Images:          doc.Images,
		Chart:           doc.Chart,
		Restores:        doc.Restores,
		Failed:          doc.Failed,
		Release: stack.Release{
			Name:     doc.Release.Name,
			Services: doc.Release.Services,
			Networks: doc.Release.Networks,
			Configs:  doc.Release.Configs,
			Secrets:  doc.Release.Secrets,
		},
	}, nil
}

// revisionName returns the config name of revision n of release, within
// Swarm's 64 characters: a release name too long to fit is cut and a hash
// of it added, so two long names stay apart. Revisions are found by their
// labels, never by this name.
func revisionName(release string, n int) string {
	suffix := "-" + strconv.Itoa(n)
	name := "skep-rev-" + release + suffix
	if len(name) <= maxConfigName {
		return name
	}
	sum := sha256.Sum256([]byte(release))
	tag := "-" + hex.EncodeToString(sum[:])[:8]
	keep := maxConfigName - len("skep-rev-") - len(tag) - len(suffix)
	return "skep-rev-" + release[:keep] + tag + suffix
}

// revisionConfigs lists owner's revision configs, without decoding them.
func revisionConfigs(ctx context.Context, eng ConfigLister, owner stack.Owner) ([]swarm.Config, error) {
	f := ownerFilters(owner)
	f.Add("label", stack.LabelKind+"="+stack.KindRevision)
	list, err := eng.ConfigList(ctx, swarm.ConfigListOptions{Filters: f})
	if err != nil {
		return nil, engineError(fmt.Sprintf("list revisions of release %q", owner.Release), err)
	}
	// The filter only pre-selects; a revision is what owner's labels, the
	// kind label and a valid number all prove.
	out := list[:0]
	for _, c := range list {
		if _, ok := revisionNumber(c); ok && owner.Owns(c.Spec.Labels) && c.Spec.Labels[stack.LabelKind] == stack.KindRevision {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b swarm.Config) int {
		na, _ := revisionNumber(a)
		nb, _ := revisionNumber(b)
		return cmp.Compare(na, nb)
	})
	return out, nil
}

// revisionNumber reads a revision config's number from its label, without
// decoding the data; ok is false for anything but a positive integer.
func revisionNumber(c swarm.Config) (int, bool) {
	n, err := strconv.Atoi(c.Spec.Labels[stack.LabelRevision])
	return n, err == nil && n > 0
}

// Revisions returns owner's recorded revisions of its release, oldest
// first. It reads the swarm only (one list call) and writes nothing. A
// config labelled as a revision that does not decode is skipped: it
// proves nothing, and a release must never be wedged by one (see
// ReadLatest, which reports it).
func Revisions(ctx context.Context, eng ConfigLister, owner stack.Owner) ([]Revision, error) {
	configs, err := revisionConfigs(ctx, eng, owner)
	if err != nil {
		return nil, err
	}
	out := make([]Revision, 0, len(configs))
	for _, c := range configs {
		if rev, err := decodeConfig(c); err == nil {
			out = append(out, rev)
		}
	}
	return out, nil
}

// Latest is what ReadLatest found: the newest revision that decodes (nil
// when there is none) and, newest first, why each newer config labelled
// as a revision was skipped.
type Latest struct {
	Revision *Revision
	Skipped  []string
}

// ReadLatest returns owner's newest revision that decodes, with the newer
// revision configs it skipped because they do not (a hand-made config
// carrying the labels, say). It reads the swarm only, one list call.
func ReadLatest(ctx context.Context, eng ConfigLister, owner stack.Owner) (Latest, error) {
	configs, err := revisionConfigs(ctx, eng, owner)
	if err != nil {
		return Latest{}, err
	}
	var out Latest
	for i := len(configs) - 1; i >= 0; i-- {
		rev, err := decodeConfig(configs[i])
		if err != nil {
			out.Skipped = append(out.Skipped, err.Error()+"; skipped")
			continue
		}
		out.Revision = &rev
		break
	}
	return out, nil
}

// LatestRevision is ReadLatest's revision: nil and no error when the
// release has none that decodes.
func LatestRevision(ctx context.Context, eng ConfigLister, owner stack.Owner) (*Revision, error) {
	latest, err := ReadLatest(ctx, eng, owner)
	return latest.Revision, err
}

// decodeConfig decodes one revision config. Its errors are stalled: the
// same bytes fail the same way on every retry, until a person removes the
// config; callers skip such a config rather than stop at it.
func decodeConfig(c swarm.Config) (Revision, error) {
	rev, err := decodeRevision(c.Spec.Data)
	if err != nil {
		return Revision{}, &outcome.StalledError{Err: fmt.Errorf("revision config %q: %w", c.Spec.Name, err)}
	}
	if n, _ := revisionNumber(c); n != rev.Number {
		return Revision{}, stalled("revision config %q: labelled revision %d but holds %d", c.Spec.Name, n, rev.Number)
	}
	rev.ConfigID = c.ID
	return rev, nil
}

// writeRevision records the applied release as the revision after the
// newest in existing (owner's revision configs, oldest first), then deletes
// the oldest beyond KeepRevisions. It returns the new revision's number.
func (a *applier) writeRevision(ctx context.Context, existing []swarm.Config) (int, error) {
	owner := a.opts.Owner
	n := 1
	if len(existing) > 0 {
		last, _ := revisionNumber(existing[len(existing)-1])
		n = last + 1
	}
	return n, a.storeRevision(ctx, existing, Revision{
		Number:      n,
		Commit:      a.opts.Commit,
		AppliedAt:   time.Now().UTC(),
		Actor:       a.opts.Actor,
		Application: owner.Application,
		Release:     RedactSecrets(a.rel),
		Images:      maps.Clone(a.images),
		Chart:       a.opts.Chart,
	})
}

// storeRevision writes rev, whose release is redacted already, as a new
// revision config after existing, stamped with the writer's term, then
// deletes the oldest beyond KeepRevisions.
func (a *applier) storeRevision(ctx context.Context, existing []swarm.Config, rev Revision) error {
	owner, n := a.opts.Owner, rev.Number
	rev.Term = a.opts.Term
	data, err := encodeRevision(rev)
	if err == nil && len(data) > maxConfigData && rev.Chart != nil {
		// The rendered manifest is the largest part and can be rendered
		// again from git; the chart, version and values stay.
		c := *rev.Chart
		c.Manifest = ""
		rev.Chart = &c
		data, err = encodeRevision(rev)
	}
	if err == nil && len(data) > maxConfigData {
		a.log.Warn("revision too large; storing config digests only", "revision", n, "bytes", len(data))
		rev.Release, rev.ConfigsRedacted = redactConfigs(rev.Release), true
		data, err = encodeRevision(rev)
	}
	if err != nil {
		return &outcome.StalledError{Err: err}
	}
	if len(data) > maxConfigData {
		return stalled("revision %d of release %q is %d bytes compressed, more than swarm's %d", n, a.rel.Name, len(data), maxConfigData)
	}
	labels := owner.Labels()
	labels[stack.LabelKind] = stack.KindRevision
	labels[stack.LabelRevision] = strconv.Itoa(n)
	labels[stack.LabelCommit] = rev.Commit
	if rev.Term > 0 {
		labels[stack.LabelTerm] = strconv.FormatInt(rev.Term, 10)
	}
	name := revisionName(a.rel.Name, n)
	resp, err := a.eng.ConfigCreate(ctx, swarm.ConfigSpec{Annotations: swarm.Annotations{Name: name, Labels: labels}, Data: data})
	if err != nil {
		return engineError(fmt.Sprintf("record revision %d of release %q", n, a.rel.Name), err)
	}
	a.record(ctx, Change{Kind: KindRevision, Name: name, ID: resp.ID, Action: Created})

	// The new revision counts towards KeepRevisions. A revision that cannot
	// be deleted now costs only space: the next write retries it.
	if extra := len(existing) + 1 - a.opts.KeepRevisions; extra > 0 {
		for _, c := range existing[:extra] {
			if err := a.eng.ConfigRemove(ctx, c.ID); err != nil {
				a.log.WarnContext(ctx, "old revision not deleted", "config", c.Spec.Name, "err", err)
				continue
			}
			a.record(ctx, Change{Kind: KindRevision, Name: c.Spec.Name, ID: c.ID, Action: Deleted})
		}
	}
	return nil
}

package reconcile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/filters"
	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/stack"
)

// artifacts is what one reconcile resolved of an application's release
// artifacts: every object, and the render inputs they give.
type artifacts struct {
	objects []artifact.Object
	// source and revision replace the application's own when an
	// infrastructure entry names the stack definitions; "" keeps them.
	source, revision string
}

// resolveArtifacts reads app's artifact files at the revision they track
// and resolves each entry against git, the registry and what the swarm
// runs. An application without artifacts gets the zero value.
func (c *Controller) resolveArtifacts(ctx context.Context, app appset.Application) (artifacts, error) {
	spec := app.Artifacts
	if spec == nil {
		return artifacts{}, nil
	}
	set, err := c.loadArtifacts(ctx, app)
	if err != nil {
		return artifacts{}, err
	}
	opts := artifact.ResolveOptions{Git: c.git, Current: c.currentVersions(ctx, app, c.owner(app), set.Entries()), TagTemplate: spec.TagTemplate}
	if spec.CheckImages {
		opts.Images = c.images
	}
	objs := artifact.Resolve(ctx, set.Entries(), opts)
	out := artifacts{objects: objs}
	for _, o := range objs {
		if o.Entry.Kind != artifact.Infrastructure {
			continue
		}
		out.source = o.Entry.Source
		out.revision = o.Version()
		if out.revision == "" {
			return out, &outcome.WaitingError{Err: fmt.Errorf("artifact %s: no revision of %s resolved and none deployed: %s",
				o.Entry.Name, gitsource.RedactURL(o.Entry.Source), o.Reason), Retry: artifact.DefaultMissingFor}
		}
	}
	return out, nil
}

// loadArtifacts reads and validates app's artifact directory at the commit
// its revision resolves to. Invalid files are a stalled error: git must
// change.
func (c *Controller) loadArtifacts(ctx context.Context, app appset.Application) (*artifact.Set, error) {
	spec := app.Artifacts
	repo := spec.Repo
	if repo == "" {
		repo = app.Source.Repo
		if g, ok := c.appSet.(GitAppSet); ok {
			repo = g.Repo
		}
	}
	commit, err := c.git.Resolve(ctx, repo, spec.Revision)
	if err != nil {
		return nil, classifyGit(fmt.Errorf("artifacts %s at %q: %w", gitsource.RedactURL(repo), spec.Revision, err))
	}
	tree, err := c.git.Checkout(ctx, repo, commit)
	if err != nil {
		return nil, classifyGit(fmt.Errorf("artifacts %s at %s: %w", gitsource.RedactURL(repo), gitsource.ShortCommit(commit), err))
	}
	defer tree.Release()
	root, err := os.OpenRoot(tree.Dir())
	if err != nil {
		return nil, &outcome.TransientError{Err: fmt.Errorf("artifacts at %s: %w", gitsource.ShortCommit(commit), err)}
	}
	defer root.Close()
	dir := path.Join(spec.Path, spec.Environment)
	set, err := artifact.Load(root.FS(), dir, artifact.LoadOptions{Registry: spec.Registry, GitBase: spec.GitBase})
	if err != nil {
		return nil, &outcome.StalledError{Err: fmt.Errorf("artifacts %s at %s: %w", dir, gitsource.ShortCommit(commit), err)}
	}
	return set, nil
}

// currentVersions finds what the swarm runs of each artifact in owner's
// release: the image tag of the release's live service using a service artifact's image (the
// previous spec while an update runs), and the deployed commit for the
// infrastructure entry.
func (c *Controller) currentVersions(ctx context.Context, app appset.Application, owner stack.Owner, entries []artifact.Entry) map[string]string {
	out := map[string]string{}
	live := c.releaseServices(ctx, app, owner.Release)
	for _, e := range entries {
		if e.Kind == artifact.Infrastructure {
			if rev, err := apply.LatestRevision(ctx, c.revisionSource(app), owner); err == nil && rev != nil {
				out[e.Name] = rev.Commit
			}
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(live)) {
			if tag, ok := tagOf(live[name], e.Image); ok {
				out[e.Name] = tag
				break
			}
		}
	}
	return out
}

// releaseServices returns the image each service of release runs,
// by service name, as the live snapshot shows it; the Engine answers
// instead when there is no snapshot, or when it may predate the
// application's last write (a relist still under way after a deploy): it
// would show the release as it was before, and a version just deployed
// would read as nothing running (see
// TestArtifactCurrentVersionIsReadFromTheEngineWhileTheSnapshotPredatesTheDeploy).
func (c *Controller) releaseServices(ctx context.Context, app appset.Application, release string) map[string]string {
	out := map[string]string{}
	if live := c.liveOf(app); live != nil {
		if snap := live.Current(); !snap.ReadFailed() && c.seenWrites(app.Name, snap) {
			for name, s := range servicesOf(snap, release) {
				out[name] = runningImage(s)
			}
			return out
		}
	}
	f := filters.NewArgs(filters.Arg("label", stack.LabelNamespace+"="+release))
	services, err := c.engineOf(app).ServiceList(ctx, dswarm.ServiceListOptions{Filters: f})
	if err != nil {
		return out
	}
	for _, s := range services {
		if s.Spec.Labels[stack.LabelNamespace] == release {
			out[s.Spec.Name] = runningImage(s)
		}
	}
	return out
}

// runningImage is the image s runs: while an update is under way, the one
// of the spec being replaced, which is what runs until the update ends.
func runningImage(s dswarm.Service) string {
	spec := s.Spec
	if s.UpdateStatus != nil && s.UpdateStatus.State == dswarm.UpdateStateUpdating && s.PreviousSpec != nil {
		spec = *s.PreviousSpec
	}
	if spec.TaskTemplate.ContainerSpec == nil {
		return ""
	}
	return spec.TaskTemplate.ContainerSpec.Image
}

// tagOf returns the tag of running ("v1", or "v1@sha256:…" when pinned)
// when it is an image of repository image.
func tagOf(running, image string) (string, bool) {
	named, err := reference.ParseNormalizedNamed(running)
	if err != nil {
		return "", false
	}
	want, err := reference.ParseNormalizedNamed(image)
	if err != nil || named.Name() != want.Name() {
		return "", false
	}
	tagged, ok := named.(reference.Tagged)
	if !ok {
		return "", false
	}
	if digested, ok := named.(reference.Digested); ok {
		return tagged.Tag() + "@" + digested.Digest().String(), true
	}
	return tagged.Tag(), true
}

// useArtifactImages points every service of rel whose image is a service
// artifact's repository at the reference the artifact resolved to, so a
// compose file naming the image without a variable deploys the gated
// version too. It returns the artifacts a service uses that have no
// version yet.
func useArtifactImages(rel *stack.Release, objs []artifact.Object) []string {
	var missing []string
	for _, o := range objs {
		if o.Entry.Kind != artifact.Service {
			continue
		}
		want, err := reference.ParseNormalizedNamed(o.Entry.Image)
		if err != nil {
			continue
		}
		for name, spec := range rel.Services {
			cs := spec.TaskTemplate.ContainerSpec
			if cs == nil {
				continue
			}
			named, err := reference.ParseNormalizedNamed(cs.Image)
			if err != nil || named.Name() != want.Name() {
				continue
			}
			ref := o.Reference()
			if ref == "" {
				missing = append(missing, o.Entry.Name)
				continue
			}
			c := *cs
			c.Image = ref
			spec.TaskTemplate.ContainerSpec = &c
			rel.Services[name] = spec
		}
	}
	slices.Sort(missing)
	return slices.Compact(missing)
}

// waitingArtifacts describes the artifacts whose desired version waits
// for its image, one line: "web v2 (image … is not in the registry yet)".
func waitingArtifacts(objs []artifact.Object) string {
	var parts []string
	for _, o := range objs {
		if o.Drift(false) && !o.Drift(true) {
			parts = append(parts, fmt.Sprintf("%s %s (%s)", o.Entry.Name, o.Desired, o.Reason))
		}
	}
	return strings.Join(parts, "; ")
}

// withStandIns returns objs with every service artifact that has no
// version yet given a stand-in one (see standIn), for the render alone:
// without it `image: ${WEB_IMAGE}` renders to no image at all, an error
// that stalls the commit although the application only waits for a push.
// A release that holds a stand-in is never deployed (see usesStandIns).
func withStandIns(objs []artifact.Object) []artifact.Object {
	out := slices.Clone(objs)
	for i, o := range out {
		if o.Entry.Kind == artifact.Service && o.Version() == "" {
			// Falling back to Current is how Version ends up at it: the
			// desired version is not ready.
			o.Desired, o.Condition = "", artifact.Waiting
			o.Current, o.CurrentDigest = standIn(o.Entry.Name)
			out[i] = o
		}
	}
	return out
}

// standIn is the version and digest a render sees for artifact name
// while it has none, distinct per artifact and found nowhere else.
func standIn(name string) (version, digest string) {
	version = "skep-no-version-" + strings.ToLower(artifact.Variable(name))
	sum := sha256.Sum256([]byte(version))
	return version, "sha256:" + hex.EncodeToString(sum[:])
}

// usesStandIns returns the service artifacts without a version whose
// stand-in rel holds anywhere (an image, a label, an environment
// variable): what a render took from an artifact it cannot have yet. A
// release it cannot read counts as holding every one.
func usesStandIns(rel stack.Release, objs []artifact.Object) []string {
	var names []string
	var data []byte
	var err error
	for _, o := range objs {
		if o.Entry.Kind != artifact.Service || o.Version() != "" {
			continue
		}
		if data == nil && err == nil {
			data, err = json.Marshal(rel)
		}
		version, digest := standIn(o.Entry.Name)
		if err != nil || bytes.Contains(data, []byte(version)) || bytes.Contains(data, []byte(digest)) {
			names = append(names, o.Entry.Name)
		}
	}
	return names
}

// noVersion says, one line, why each of the artifacts named has no version
// to deploy: "web v2 (image … is not in the registry yet)".
func noVersion(objs []artifact.Object, names []string) string {
	var parts []string
	for _, o := range objs {
		if !slices.Contains(names, o.Entry.Name) {
			continue
		}
		switch {
		case o.Suspended():
			parts = append(parts, o.Entry.Name+" (suspended, and nothing runs)")
		case o.Desired == "":
			parts = append(parts, fmt.Sprintf("%s (%s)", o.Entry.Name, o.Reason))
		default:
			parts = append(parts, fmt.Sprintf("%s %s (%s)", o.Entry.Name, o.Desired, o.Reason))
		}
	}
	return strings.Join(parts, "; ")
}

// versionsKey identifies the artifact versions a render used, so that a
// rollout Swarm rolled back is remembered per commit and versions.
func versionsKey(objs []artifact.Object) string {
	var parts []string
	for _, o := range objs {
		parts = append(parts, o.Entry.Name+"="+o.Digested())
	}
	return strings.Join(parts, ",")
}

package syncpass

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/chart"
	"github.com/skep-cd/skep/chartrepo"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/version"
)

// chartRender is one render of an application's chart: the document it
// gave, what the revision records of it, and what it was rendered from, so
// the stability check can render it again.
type chartRender struct {
	doc    *render.Document
	record *apply.ChartRecord
	chart  *chart.Chart
	opts   chart.RenderOptions
	// create are the networks requirements.yaml marks autoCreate that are
	// allowed and missing: applyRelease creates them before the release.
	create []apply.RequiredNetwork
}

// renderChart renders app's chart, found in the checkout at root or in its
// chart repository, with the values files of the checkout, the inline
// values, the artifact versions of d and the preview of extra. A chart
// that is invalid, needs a newer Skep, or needs what the application may
// not use or the swarm lacks is a stalled error: git (or the swarm) must
// change, and nothing is written.
func renderChart(ctx context.Context, env Env, app appset.Application, v view, root string, d desired, extra map[string]string, owner stack.Owner) (chartRender, error) {
	spec := app.Chart
	r, err := os.OpenRoot(root)
	if err != nil {
		return chartRender{}, &outcome.TransientError{Err: fmt.Errorf("chart of %s: %w", app.Name, err)}
	}
	defer r.Close()
	repoFS := r.FS()
	var ch *chart.Chart
	if spec.Path != "" {
		ch, err = chart.Load(repoFS, spec.Path)
	} else {
		ch, err = fetchChart(ctx, env.Charts, spec)
	}
	if err != nil {
		return chartRender{}, stalledUnlessTransient(fmt.Errorf("chart %s: %w", chartName(spec), err))
	}
	if err := ch.CheckSkepVersion(version.Get().Version); err != nil {
		return chartRender{}, &outcome.StalledError{Err: fmt.Errorf("chart %s: %w", chartName(spec), err)}
	}
	// An artifact without a version gets a stand-in, as in a compose
	// render: compose checks that none is deployed.
	opts := chart.RenderOptions{ReleaseName: owner.Release, Set: spec.Set, Artifacts: chartArtifacts(withStandIns(d.artifacts)),
		Preview: chart.Preview{Domain: extra["PREVIEW_DOMAIN"], Hash: extra["PREVIEW_HASH"], Branch: extra["PREVIEW_BRANCH"]}}
	for _, name := range spec.Values {
		data, err := readCapped(repoFS, name, chart.MaxFileSize)
		if err != nil {
			return chartRender{}, &outcome.StalledError{Err: fmt.Errorf("chart %s: values file %s: %w", chartName(spec), name, err)}
		}
		opts.ValuesFiles = append(opts.ValuesFiles, chart.ValuesFile{Name: name, Data: data})
	}
	doc, man, err := chart.Render(ctx, ch, opts)
	if err != nil && ctx.Err() != nil {
		// Cut short by a stop: not a problem of the chart, and no sync failed.
		return chartRender{}, fmt.Errorf("chart %s: %w", chartName(spec), err)
	}
	if err != nil {
		return chartRender{}, &outcome.StalledError{Err: &templateError{err: fmt.Errorf("chart %s: %w", chartName(spec), err)}}
	}
	req, err := ch.Requirements(ctx, opts)
	if err != nil && ctx.Err() != nil {
		return chartRender{}, fmt.Errorf("chart %s: %w", chartName(spec), err)
	}
	if err != nil {
		return chartRender{}, &outcome.StalledError{Err: &templateError{err: fmt.Errorf("chart %s: %w", chartName(spec), err)}}
	}
	create, err := checkRequirements(app, v, ch.Metadata().Name, req)
	if err != nil {
		return chartRender{}, &outcome.StalledError{Err: err}
	}
	rec := &apply.ChartRecord{Name: man.Chart, Version: man.Version, ValuesFiles: man.ValuesFiles, Values: man.Values, Manifest: man.Compose}
	for _, e := range req.Entries() {
		rec.Requirements = append(rec.Requirements, apply.RequirementRecord{Kind: e.Kind, Name: e.Name, Description: e.Description, AutoCreate: e.AutoCreate})
	}
	return chartRender{doc: doc, record: rec, chart: ch, opts: opts, create: create}, nil
}

// templateError is a chart's templates failing to render. It depends only
// on the render's inputs, so a tick with the same inputs (the same quiet
// key) fails the same way and is not rendered again: a template that runs
// to its time bound would otherwise cost that much CPU on every tick.
type templateError struct{ err error }

func (e *templateError) Error() string { return e.err.Error() }
func (e *templateError) Unwrap() error { return e.err }

// fetchChart reads a chart from its chart repository.
func fetchChart(ctx context.Context, charts ChartSource, spec *appset.Chart) (*chart.Chart, error) {
	if charts == nil {
		return nil, errors.New("chart repositories are not configured on this controller")
	}
	fsys, dir, err := charts.Fetch(ctx, spec.Repo, spec.Name, spec.Version)
	switch {
	case err == nil:
	case errors.Is(err, chartrepo.ErrNotFound), errors.Is(err, chartrepo.ErrDigestMismatch), errors.Is(err, chartrepo.ErrTooLarge),
		errors.Is(err, chartrepo.ErrUnsafeArchive), errors.Is(err, chartrepo.ErrInsecureURL), errors.Is(err, chartrepo.ErrBadIndex):
		return nil, &outcome.StalledError{Err: err} // the app set or the repository must change
	default:
		return nil, &outcome.TransientError{Err: err} // the repository did not answer: back off
	}
	return chart.Load(fsys, dir)
}

// checkRequirements checks what the chart's requirements.yaml names
// against the application's allow list and, when the live snapshot v can
// tell, against what exists on the swarm, and returns the autoCreate
// networks to create.
func checkRequirements(app appset.Application, v view, name string, req chart.Requirements) ([]apply.RequiredNetwork, error) {
	allowed := chart.Objects{Networks: app.Allow.Networks, Configs: app.Allow.Configs, Secrets: app.Allow.Secrets}
	// Without a snapshot only the allow list is checked, and every allowed
	// autoCreate network is handed on: CreateRequired asks the Engine
	// which of them are missing.
	existing := allowed
	existing.Networks = slices.DeleteFunc(slices.Clone(allowed.Networks), func(name string) bool {
		return slices.ContainsFunc(req.Networks, func(n chart.NetworkRequirement) bool { return n.Name == name && n.AutoCreate })
	})
	if v.has && !v.snap.ReadFailed() {
		snap := v.snap
		existing = chart.Objects{Networks: slices.Collect(maps.Values(snap.NetworkNames())),
			Configs: slices.Collect(maps.Values(snap.ConfigNames()))}
		for _, s := range snap.Secrets() {
			existing.Secrets = append(existing.Secrets, s.Spec.Name)
		}
	}
	nets, err := chart.Check(name, req, allowed, existing)
	if err != nil {
		return nil, err
	}
	var create []apply.RequiredNetwork
	for _, n := range nets {
		create = append(create, apply.RequiredNetwork{Name: n.Name, Driver: n.Driver, Attachable: n.Attachable})
	}
	return create, nil
}

// createRequired creates the networks cr's requirements.yaml asks for
// (autoCreate) that are missing, before anything of the release is
// written; a failure fails the sync as apply's own do.
func createRequired(ctx context.Context, env Env, app appset.Application, cr *chartRender) ([]apply.Change, error) {
	if cr == nil || len(cr.create) == 0 {
		return nil, nil
	}
	changes, err := apply.CreateRequired(ctx, env.Engine, env.owner(app), cr.create)
	for _, ch := range changes {
		env.Log.Info("required network created", "app", app.Name, "release", app.Release, "network", ch.Name)
	}
	return changes, err
}

// checkStable renders a chart twice and holds it when the renders differ
// (a template reading the clock or a random source): such a chart would
// otherwise be redeployed on every tick. The first deploy goes ahead; the
// hold starts once a revision is recorded.
func checkStable(ctx context.Context, cr chartRender) error {
	diffs, err := chart.CheckStable(ctx, cr.chart, cr.opts)
	if err != nil || len(diffs) == 0 {
		return err
	}
	return &outcome.StalledError{Err: fmt.Errorf("chart %s renders differently each time (%s); held instead of redeploying on every tick: make those templates deterministic",
		cr.record.Name, strings.Join(diffs, ", "))}
}

// chartArtifacts is the .Artifacts a chart sees.
func chartArtifacts(objs []artifact.Object) map[string]chart.Artifact {
	out := map[string]chart.Artifact{}
	for _, o := range objs {
		if v := o.Version(); v != "" {
			_, digest, _ := strings.Cut(o.Digested(), "@")
			out[o.Entry.Name] = chart.Artifact{Version: v, Image: o.Reference(), Digest: digest}
		}
	}
	return out
}

// chartName names a chart block for messages.
func chartName(spec *appset.Chart) string {
	if spec.Path != "" {
		return spec.Path
	}
	return spec.Name + " " + spec.Version
}

// readCapped reads a file of fsys, refusing one larger than limit.
func readCapped(fsys fs.FS, name string, limit int64) ([]byte, error) {
	info, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, err
	}
	if info.Size() > limit {
		return nil, fmt.Errorf("%d bytes, more than the %d allowed", info.Size(), limit)
	}
	return fs.ReadFile(fsys, name)
}

// stalledUnlessTransient classes a chart failure: a network failure of a
// chart repository may pass, anything else needs a change.
func stalledUnlessTransient(err error) error {
	if outcome.Of(err) == outcome.Transient && errors.As(err, new(*outcome.TransientError)) {
		return err
	}
	return &outcome.StalledError{Err: err}
}

package syncpass

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/outcome"
	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/stack"
)

// renderAt fetches d's commit and renders it with d's artifact versions
// into the release's desired specs. v is the look the chart's
// requirements are checked against.
func renderAt(ctx context.Context, env Env, app appset.Application, v view, d desired) (desired, error) {
	start := env.Wall()
	tree, err := env.Git.Checkout(ctx, d.source.Repo, d.commit)
	if err != nil {
		d.gitTook, d.gitFailed = d.gitTook+env.Wall().Sub(start), true
		return d, classifyGit(fmt.Errorf("fetch %s at %s: %w", gitsource.RedactURL(d.source.Repo), gitsource.ShortCommit(d.commit), err))
	}
	defer tree.Release()
	d.gitTook += env.Wall().Sub(start)
	rel, cr, err := compose(ctx, env, app, v, tree.Dir(), d, nil, env.owner(app))
	if err != nil {
		return d, err
	}
	if err := checkSelf(env, app, rel, d.commit); err != nil {
		return d, err
	}
	d.release, d.chart = rel, cr
	return d, nil
}

// compose renders d's source, checked out in root, with d's artifact
// versions and extra variables (the app set's own variables win over
// both), into the Swarm specs of the release owner names. Services using
// an artifact's image get its resolved reference; an artifact without a
// version is a waiting error.
func compose(ctx context.Context, env Env, app appset.Application, v view, root string, d desired, extra map[string]string, owner stack.Owner) (stack.Release, *chartRender, error) {
	doc, cr, err := document(ctx, env, app, v, root, d, extra, owner)
	if err != nil {
		return stack.Release{}, nil, err
	}
	rel, err := stack.Convert(doc.Config, stack.Options{
		Owner: owner,
		Allow: stack.Allow{
			HostPaths:    app.Allow.HostPaths,
			Networks:     app.Allow.Networks,
			Configs:      app.Allow.Configs,
			Secrets:      app.Allow.Secrets,
			Volumes:      app.Allow.Volumes,
			Capabilities: app.Allow.Capabilities,
		},
		Files:        doc.Files,
		Waves:        doc.Waves,
		Hooks:        stackHooks(doc.Hooks),
		Canaries:     doc.Canaries,
		Masked:       doc.Masked,
		CheckAddress: addressCheck(ctx, env),
	})
	if err != nil {
		err = &outcome.StalledError{Err: fmt.Errorf("convert at %s: %w", gitsource.ShortCommit(d.commit), err)}
		return stack.Release{}, nil, hideDecrypted(err, stack.Release{Sensitive: doc.Sensitive})
	}
	rel.Sensitive, rel.Warnings = doc.Sensitive, doc.Warnings
	// A service on an artifact's repository, or any stand-in left in the
	// release, is a version the artifact does not have: wait for it.
	missing := append(useArtifactImages(&rel, d.artifacts), usesStandIns(rel, d.artifacts)...)
	slices.Sort(missing)
	if missing = slices.Compact(missing); len(missing) > 0 {
		return stack.Release{}, nil, &outcome.WaitingError{Err: fmt.Errorf("artifacts %s: no version to deploy yet: %s",
			strings.Join(missing, ", "), noVersion(d.artifacts, missing)), Retry: artifact.DefaultMissingFor}
	}
	return rel, cr, nil
}

// document renders d's compose files, or its chart, into one compose
// document. Precedence of the variables, lowest first: artifact versions,
// the caller's extras (a preview's domain), then what the app set states,
// so an operator can always pin a variable by hand.
func document(ctx context.Context, env Env, app appset.Application, v view, root string, d desired, extra map[string]string, owner stack.Owner) (*render.Document, *chartRender, error) {
	if app.Chart != nil {
		r, err := renderChart(ctx, env, app, v, root, d, extra, owner)
		if err != nil {
			return nil, nil, err
		}
		return r.doc, &r, nil
	}
	vars := artifact.Variables(withStandIns(d.artifacts))
	maps.Copy(vars, extra)
	maps.Copy(vars, app.Source.Variables)
	doc, err := render.Compose(ctx, render.Input{
		Root:      root,
		Path:      d.source.Path,
		Files:     d.source.Files,
		EnvFiles:  d.source.EnvFiles,
		Variables: vars,
		Keys:      env.Keys,
	})
	if err != nil {
		return nil, nil, &outcome.StalledError{Err: fmt.Errorf("render at %s: %w", gitsource.ShortCommit(d.commit), err)}
	}
	return doc, nil, nil
}

// addressCheck is Env.CheckAddress under ctx, as stack.Convert takes it;
// nil when the controller checks no address.
func addressCheck(ctx context.Context, env Env) func(string) error {
	if env.CheckAddress == nil {
		return nil
	}
	return func(host string) error { return env.CheckAddress(ctx, host) }
}

// checkSelf refuses to deploy the app set's self application unless this
// controller runs as a swarm service that the rendered release declares:
// deploying a controller beside an unmanaged one would make two, and a
// release without the controller's service would prune it. Both are
// stalled: the commit or the controller's deployment must change.
func checkSelf(env Env, app appset.Application, rel stack.Release, commit string) error {
	if !app.Self {
		return nil
	}
	at := gitsource.ShortCommit(commit)
	if env.Self.ServiceID == "" {
		return &outcome.StalledError{Err: fmt.Errorf("self application %s at %s: this controller runs as no swarm service (no task container of its own was found), so it cannot deploy itself; run it as a service of release %s, or drop self", app.Name, at, app.Release)}
	}
	if _, ok := rel.Services[env.Self.ServiceName]; !ok {
		return &outcome.StalledError{Err: fmt.Errorf("self application %s at %s: this controller runs as service %s, which release %s does not declare (it declares %s); a self release must keep the controller's own service",
			app.Name, at, env.Self.ServiceName, app.Release, strings.Join(slices.Sorted(maps.Keys(rel.Services)), ", "))}
	}
	return nil
}

// stackHooks is what render read of the hooks, as stack.Convert takes it.
func stackHooks(in map[string]render.Hook) map[string]stack.Hook {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]stack.Hook, len(in))
	for name, h := range in {
		out[name] = stack.Hook{Phase: stack.HookPhase(h.Phase), Timeout: h.Timeout}
	}
	return out
}

// maskedError is an error whose message hides values decrypted from SOPS
// files (an Engine or converter message may quote a spec value). It
// unwraps to the original so its outcome class still decides the retry;
// only the message is shown anywhere.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// hideDecrypted returns err with rel's decrypted values masked in its
// message; err itself when none occurs.
func hideDecrypted(err error, rel stack.Release) error {
	if err == nil || len(rel.Sensitive) == 0 {
		return err
	}
	msg := err.Error()
	if masked := rel.Mask(msg); masked != msg {
		return &maskedError{msg: masked, err: err}
	}
	return err
}

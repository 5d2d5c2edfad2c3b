// Package chart loads and renders charts: templated compose packages with
// per-environment values, the way Helm packages Kubernetes manifests.
//
// A chart is a directory holding Chart.yaml, values.yaml, an optional
// values.schema.json, compose fragments under templates/ (Go text/template
// with Sprig), named templates in templates/_*.tpl, an optional
// requirements.yaml and example values in ci/*-values.yaml. Load reads the
// whole directory once, with size and count caps, and returns an immutable
// *Chart; Render merges values (chart defaults, values files, --set),
// validates them against the schema, executes the templates, deep-merges
// the fragments into one compose document and hands it to render.Load, so
// stack.Convert takes a chart's output exactly as a compose file's.
//
// A template must never read the host, the network or the environment:
// env, expandenv and getHostByName are replaced by functions that fail
// with a clear error. Render does no I/O at all (Load read everything),
// never panics on input (template panics are recovered) and keeps no
// state, so it is safe to call concurrently on a shared *Chart. A template
// is code from a repository: each render is bounded in the values its
// functions build (MaxBuilt), its steps (MaxSteps), its text and its time
// (RenderTimeout), every bound checked before the work, and a render past
// one stops with a problem naming the template. Render returns once its
// context ends, whatever the templates are doing. Templates that read the clock or a
// random source render differently each time; CheckStable finds them.
//
// The format, the merge rules and the template context are documented in
// docs/charts.md.
package chart

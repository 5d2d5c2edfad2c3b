package chart

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/render"
)

// RenderOptions is the input of one render besides the chart. The zero
// value renders the chart's defaults as release "" at revision 0.
type RenderOptions struct {
	// ReleaseName is .Release.Name, the stack name.
	ReleaseName string
	// Revision is .Release.Revision.
	Revision int
	// ValuesFiles are merged over the chart's values.yaml, in order. The
	// controller reads them from the application's repository; Render
	// reads nothing.
	ValuesFiles []ValuesFile
	// Set holds inline values, merged last; see ParseSet for keys and types.
	Set map[string]string
	// Artifacts is .Artifacts, keyed by artifact name.
	Artifacts map[string]Artifact
	// Preview is .Preview; zero when the release is not a preview.
	Preview Preview
	// Timeout bounds the time the templates of one render may run; zero
	// means RenderTimeout.
	Timeout time.Duration
}

// Manifest is what a revision records of a chart render: enough to show
// what was deployed and why, with secrets masked.
type Manifest struct {
	// Chart and Version name the chart (Chart.yaml's name and version).
	Chart, Version string
	// ValuesFiles names the values files merged, in order.
	ValuesFiles []string
	// Compose is the merged compose document as YAML. The content of
	// configs and secrets is not in it (only their hashed names, after
	// stack.Convert), and environment variables whose name matches
	// password, secret, token or key read Masked.
	Compose string
	// Values is the merged values as YAML, with the value under every key
	// matching password, secret, token or key (any case) reading Masked.
	Values string
}

// mergedName is the name render.Load gives the merged document, so its
// errors say the line is one of the merged templates, not of a file.
const mergedName = "templates (merged)"

// contentDir is where config and secret `content:` is kept, as files, for
// render and stack.Convert. No chart file may live there.
const contentDir = ".content"

// Render renders c with opts: it merges the values (MergeValues), checks
// them against values.schema.json, executes every template, deep-merges the
// fragments (see mergeFragments) and loads the result as one compose
// document with render.Load. It does no I/O, does not modify c or opts,
// stops early when ctx is cancelled, and is safe to call concurrently.
//
// Problems with the chart or the values come back as configfile.Problems:
// a values file and line, a schema violation with the value's path, a
// template and line. Problems of the merged compose document come back as
// render's errors, naming "templates (merged)" and the path of the field.
func Render(ctx context.Context, c *Chart, opts RenderOptions) (*render.Document, Manifest, error) {
	merged, values, err := c.renderCompose(ctx, opts)
	if err != nil {
		return nil, Manifest{}, err
	}
	files := maps.Clone(c.files)
	if err := extractContent(path.Join(c.dir, mergedName), merged, files); err != nil {
		return nil, Manifest{}, err
	}
	data, err := marshalYAML(merged)
	if err != nil {
		return nil, Manifest{}, fmt.Errorf("chart %s: encode the merged document: %w", c.metadata.Name, err)
	}
	doc, err := render.Load(ctx, path.Join(c.dir, mergedName), data, prefixed(c.dir, files), nil)
	if err != nil {
		return nil, Manifest{}, err
	}
	m := Manifest{Chart: c.metadata.Name, Version: c.metadata.Version}
	for _, f := range opts.ValuesFiles {
		m.ValuesFiles = append(m.ValuesFiles, f.Name)
	}
	maskEnvironment(merged)
	compose, err := marshalYAML(merged)
	if err != nil {
		return nil, Manifest{}, err
	}
	masked, err := marshalYAML(maskValues(values))
	if err != nil {
		return nil, Manifest{}, err
	}
	m.Compose, m.Values = string(compose), string(masked)
	return doc, m, nil
}

// prefixed keys files by their path below the fs.FS root, as render.Load
// resolves them from the merged document's directory.
func prefixed(dir string, files map[string][]byte) map[string][]byte {
	if dir == "." {
		return files
	}
	out := make(map[string][]byte, len(files))
	for k, v := range files {
		out[path.Join(dir, k)] = v
	}
	return out
}

// renderCompose runs the steps of Render up to the merged compose tree, and
// returns the merged values beside it.
func (c *Chart) renderCompose(ctx context.Context, opts RenderOptions) (map[string]any, map[string]any, error) {
	if err := c.CheckSkepVersion(""); err != nil {
		return nil, nil, err
	}
	values, err := c.MergeValues(opts.ValuesFiles, opts.Set)
	if err != nil {
		return nil, nil, err
	}
	if c.schema != nil {
		if err := c.schema.validate(values); err != nil {
			return nil, nil, err
		}
	}
	timeout := cmp.Or(opts.Timeout, RenderTimeout)
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errRenderTimeout)
	defer cancel()
	e, err := newEngine(c.templates)
	if err != nil {
		return nil, nil, configfile.Problems{templateProblem(c.dir, err)}
	}
	e.b = &budget{ctx: ctx}
	data := Context{
		Values:    copyMap(values),
		Release:   Release{Name: opts.ReleaseName, Namespace: opts.ReleaseName, Revision: opts.Revision, Service: "Skep"},
		Chart:     c.metadata.clone(),
		Artifacts: maps.Clone(opts.Artifacts),
		Preview:   opts.Preview,
	}
	// The templates run in a goroutine of their own, so that this returns
	// once ctx ends or the time is up even while a function call of the
	// render (a key generation, a parse of the rendered text) is still
	// running. That goroutine spends its budget under the same ctx,
	// cancelled when this returns, so it stops at its next step.
	var current atomic.Value // the name of the template executing
	current.Store(templatesDir)
	done := make(chan renderResult, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- renderResult{err: fmt.Errorf("chart %s: panic: %v", c.metadata.Name, p)}
			}
		}()
		merged, err := c.executeTemplates(ctx, e, data, &current)
		done <- renderResult{merged: merged, err: err}
	}()
	var r renderResult
	select {
	case r = <-done:
	case <-ctx.Done():
	}
	if ctx.Err() != nil && (r.err != nil || r.merged == nil) {
		return nil, nil, c.stopped(ctx, current.Load().(string), timeout)
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	return r.merged, values, nil
}

// stopped is the error of a render whose ctx ended while it executed the
// template name: a problem naming it when the render ran out of time, the
// cancellation otherwise.
func (c *Chart) stopped(ctx context.Context, name string, timeout time.Duration) error {
	if errors.Is(context.Cause(ctx), errRenderTimeout) {
		return configfile.Problems{{File: path.Join(c.dir, name),
			Message: fmt.Sprintf("stopped after %v, the most a render may take", timeout)}}
	}
	return fmt.Errorf("chart %s: %w", c.metadata.Name, context.Cause(ctx))
}

// renderResult is what the goroutine executing a render's templates gives.
type renderResult struct {
	merged map[string]any
	err    error
}

// executeTemplates executes every template of c with data and merges the
// fragments they render; current names the template executing.
func (c *Chart) executeTemplates(ctx context.Context, e *engine, data Context, current *atomic.Value) (map[string]any, error) {
	merged := map[string]any{}
	var problems configfile.Problems
	size := 0
	for _, t := range c.templates {
		if t.helper() {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		current.Store(t.name)
		text, err := e.execute(t.name, data)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			problems = append(problems, templateProblem(c.dir, err))
			continue
		}
		// The fragments are one compose document: together they may hold
		// what a compose file may, and text past that is never parsed.
		size += len(text)
		if size > render.MaxFileSize {
			return nil, append(problems, configfile.Problem{File: path.Join(c.dir, t.name),
				Message: fmt.Sprintf("the rendered fragments are larger than %d bytes, the most a compose file may hold", render.MaxFileSize)})
		}
		fragments, err := parseFragment(path.Join(c.dir, t.name), text)
		if err != nil {
			problems = append(problems, problemsOf(err)...)
			continue
		}
		for _, f := range fragments {
			mergeFragment(merged, f)
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return merged, nil
}

// parseFragment reads the YAML documents a template rendered; a template
// that rendered only blanks and comments adds nothing. Errors name the
// template and the line of its rendered text.
func parseFragment(file, text string) ([]map[string]any, error) {
	dec := yaml.NewDecoder(strings.NewReader(text))
	var out []map[string]any
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			ps := yamlProblem(file, err)
			ps[0].Message = "rendered " + ps[0].Message
			return nil, ps
		}
		doc := &n
		if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
			doc = doc.Content[0]
		}
		if doc.Kind == yaml.ScalarNode && doc.Tag == "!!null" {
			continue
		}
		if doc.Kind != yaml.MappingNode {
			return nil, configfile.Problems{{File: file, Line: doc.Line, Message: "rendered " + configfile.Describe(doc) + "; want a compose mapping"}}
		}
		var v any
		if err := doc.Decode(&v); err != nil {
			return nil, yamlProblem(file, err)
		}
		m, err := normalize(v, 0)
		if err != nil {
			return nil, configfile.Problems{{File: file, Message: err.Error()}}
		}
		out = append(out, m.(map[string]any))
	}
}

// mergeFragment merges the fragment src into dst, in template order:
// mappings merge key by key, recursively; any other value of a later
// fragment replaces an earlier one (a list is replaced whole, never
// appended to); and a null adds nothing, so that a template whose content
// is switched off (`services:` with every entry under an if) leaves the
// other fragments' entries alone.
func mergeFragment(dst, src map[string]any) {
	for k, v := range src {
		switch v := v.(type) {
		case nil:
			if _, ok := dst[k]; !ok {
				dst[k] = nil
			}
		case map[string]any:
			if dm, ok := dst[k].(map[string]any); ok {
				mergeFragment(dm, v)
				continue
			}
			dm := map[string]any{}
			mergeFragment(dm, v)
			dst[k] = dm
		default:
			dst[k] = v
		}
	}
}

// extractContent moves the `content:` of every config and secret of the
// merged document into files, under contentDir, and points its `file:` at
// it, so render and stack.Convert treat it as a file: hashed into the
// object's name like any file content.
func extractContent(file string, merged map[string]any, files map[string][]byte) error {
	var problems configfile.Problems
	for _, kind := range []string{"configs", "secrets"} {
		objs, _ := merged[kind].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(objs)) {
			obj, ok := objs[name].(map[string]any)
			if !ok {
				continue
			}
			field := kind + "." + name
			if _, ok := obj["environment"]; ok {
				problems = append(problems, configfile.Problem{File: file, Field: field + ".environment",
					Message: "reads the controller's environment; use content: with a value instead"})
				continue
			}
			content, ok := obj["content"]
			if !ok {
				continue
			}
			if _, ok := obj["file"]; ok {
				problems = append(problems, configfile.Problem{File: file, Field: field, Message: "has both content and file; want one"})
				continue
			}
			var data []byte
			switch c := content.(type) {
			case string:
				data = []byte(c)
			case nil:
			case map[string]any, []any:
				problems = append(problems, configfile.Problem{File: file, Field: field + ".content", Message: "want text; write a structure with toYaml or toJson"})
				continue
			default:
				data = []byte(fmt.Sprint(c))
			}
			key := path.Join(contentDir, kind, name)
			if _, taken := files[key]; taken {
				problems = append(problems, configfile.Problem{File: path.Join(path.Dir(file), key), Message: "a chart may hold no file under " + contentDir + "/; Skep keeps config and secret content there"})
				continue
			}
			files[key] = data
			delete(obj, "content")
			obj["file"] = key
		}
	}
	if len(problems) > 0 {
		return problems
	}
	return nil
}

// maskEnvironment masks, in place, every service environment variable of
// the merged document whose name matches sensitiveKey.
func maskEnvironment(merged map[string]any) {
	services, _ := merged["services"].(map[string]any)
	for _, s := range services {
		svc, _ := s.(map[string]any)
		switch env := svc["environment"].(type) {
		case map[string]any:
			for k, v := range env {
				if v != nil && sensitiveKey.MatchString(k) {
					env[k] = Masked
				}
			}
		case []any:
			for i, item := range env {
				if s, ok := item.(string); ok {
					if k, _, ok := strings.Cut(s, "="); ok && sensitiveKey.MatchString(k) {
						env[i] = k + "=" + Masked
					}
				}
			}
		}
	}
}

// marshalYAML encodes v with two-space indents, as the manifests show it.
func marshalYAML(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

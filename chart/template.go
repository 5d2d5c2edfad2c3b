package chart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/Masterminds/sprig/v3"
	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/configfile"
)

// Bounds on one render: a template is code from a repository, and the
// controller must survive one that loops, recurses or repeats without end.
const (
	// MaxRenderedSize bounds the text of one render, every template and
	// include together.
	MaxRenderedSize = 16 << 20
	// maxCalls bounds the include and tpl calls of one render; it stops a
	// template that includes itself twice long before 2^depth calls.
	maxCalls = 100_000
	// maxIncludeDepth bounds nested include and tpl calls, as Helm does.
	maxIncludeDepth = 100
	// maxSequence bounds the lists until, untilStep and seq build.
	maxSequence = 10_000
)

// Removed names the Sprig functions a chart may not call, with the
// reason each is refused: they read the controller's host or the network,
// so the same chart would render differently on another controller.
var Removed = map[string]string{
	"env":           "reads the controller's environment; pass the value in values instead",
	"expandenv":     "reads the controller's environment; pass the value in values instead",
	"getHostByName": "resolves a name over the network; put the address in values instead",
}

// Context is the data a template sees as ".".
type Context struct {
	Values    map[string]any
	Release   Release
	Chart     Metadata
	Artifacts map[string]Artifact
	Preview   Preview
}

// Release is .Release: the release being rendered.
type Release struct {
	// Name is the release (stack) name.
	Name string
	// Namespace equals Name: a Swarm stack is its own namespace. It is here
	// so that charts written for Helm's context render unchanged.
	Namespace string
	// Revision is the number of the revision this render will become.
	Revision int
	// Service is "Skep", as Helm's is "Helm".
	Service string
}

// Artifact is one entry of .Artifacts: the version of an artifact the
// render uses, as the controller resolved it.
type Artifact struct {
	Version string
	Image   string
	Digest  string
}

// Preview is .Preview: set when the release is a branch preview, zero
// otherwise.
type Preview struct {
	Domain string
	Hash   string
	Branch string
}

// engine is the template set of one render and its budget. It belongs to
// the goroutine executing the render.
type engine struct {
	tmpl    *template.Template
	b       *budget
	guarded map[*parse.Tree]bool
	calls   int
	depth   int
	size    int
}

// newEngine parses every template file into one set, named templates
// first-come as text/template defines them, and guards it. A render sets
// the budget before it executes the set.
func newEngine(files []sourceFile) (*engine, error) {
	e := &engine{guarded: map[*parse.Tree]bool{}}
	t := template.New("chart").Option("missingkey=zero").Funcs(e.funcs())
	for _, f := range files {
		if _, err := t.New(f.name).Parse(f.text); err != nil {
			return nil, err
		}
	}
	e.guard(t)
	e.tmpl = t
	return e, nil
}

// funcs is Sprig's function map, minus Removed, with bounded sequences,
// plus Helm's include, tpl, required, toYaml and fromYaml, and
// text/template's printing builtins; every function is bounded (see
// bounded), and the guard's hidden functions are added.
func (e *engine) funcs() template.FuncMap {
	f := sprig.TxtFuncMap()
	maps.Copy(f, builtins())
	for name, why := range Removed {
		f[name] = removed(name, why)
	}
	f["until"] = func(n int) ([]int, error) { return sequence(0, n, 1) }
	f["untilStep"] = func(start, stop, step int) ([]int, error) { return sequence(start, stop, step) }
	f["seq"] = seq
	f["repeat"] = func(count int, s string) string { return strings.Repeat(s, max(count, 0)) }
	f["include"] = e.include
	f["tpl"] = e.tpl
	f["required"] = required
	f["toYaml"] = toYaml
	f["fromYaml"] = fromYaml
	for name, fn := range f {
		f[name] = e.bounded(name, fn)
	}
	maps.Copy(f, e.hidden())
	return f
}

// removed returns the stand-in of a removed function: it fails with the reason.
func removed(name, why string) func(...any) (string, error) {
	return func(...any) (string, error) {
		return "", fmt.Errorf("function %s is not available in Skep charts: it %s", name, why)
	}
}

func sequence(start, stop, step int) ([]int, error) {
	if step == 0 || (stop-start)/step > maxSequence {
		return nil, fmt.Errorf("a sequence from %d to %d by %d is longer than %d or endless", start, stop, step, maxSequence)
	}
	var out []int
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		out = append(out, i)
	}
	return out, nil
}

// seq is Sprig's seq (like the shell's): 1, 2 or 3 integer arguments.
func seq(params ...int) (string, error) {
	start, stop, step := 1, 0, 1
	switch len(params) {
	case 1:
		stop = params[0]
	case 2:
		start, stop = params[0], params[1]
		if stop < start {
			step = -1
		}
	case 3:
		start, step, stop = params[0], params[1], params[2]
	default:
		return "", errors.New("seq: want 1 to 3 arguments")
	}
	end := stop + step // seq includes stop
	nums, err := sequence(start, end, step)
	if err != nil {
		return "", err
	}
	parts := make([]string, len(nums))
	for i, n := range nums {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, " "), nil
}

// spend counts one include or tpl call against the render's budget.
func (e *engine) spend() error {
	e.calls++
	if e.calls > maxCalls {
		return fmt.Errorf("more than %d include and tpl calls in one render", maxCalls)
	}
	if e.depth >= maxIncludeDepth {
		return fmt.Errorf("include and tpl nested deeper than %d", maxIncludeDepth)
	}
	return nil
}

// include executes the named template with data and returns its text.
func (e *engine) include(name string, data any) (string, error) {
	if err := e.spend(); err != nil {
		return "", err
	}
	e.depth++
	defer func() { e.depth-- }()
	w := &limitWriter{e: e}
	if err := e.tmpl.ExecuteTemplate(w, name, data); err != nil {
		return "", err
	}
	return w.buf.String(), nil
}

// tpl executes text as a template of this chart, with data.
func (e *engine) tpl(text string, data any) (string, error) {
	if err := e.spend(); err != nil {
		return "", err
	}
	e.depth++
	defer func() { e.depth-- }()
	t, err := e.tmpl.Clone()
	if err != nil {
		return "", err
	}
	t, err = t.New("tpl").Parse(text)
	if err != nil {
		return "", err
	}
	e.guard(t)
	w := &limitWriter{e: e}
	if err := t.Execute(w, data); err != nil {
		return "", err
	}
	return strings.ReplaceAll(w.buf.String(), "<no value>", ""), nil
}

// execute renders one fragment. A panic in a function becomes an error.
func (e *engine) execute(name string, data any) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = "", fmt.Errorf("template: %s: panic: %v", name, p)
		}
	}()
	w := &limitWriter{e: e}
	if err := e.tmpl.ExecuteTemplate(w, name, data); err != nil {
		// An error of the writer comes back without the template's name.
		if !strings.HasPrefix(err.Error(), "template: ") {
			err = fmt.Errorf("template: %s: %w", name, err)
		}
		return "", err
	}
	// A missing value prints "<no value>"; Helm prints nothing, and charts
	// written for Helm expect that.
	return strings.ReplaceAll(w.buf.String(), "<no value>", ""), nil
}

// limitWriter is a buffer that counts what it holds against the
// render's MaxRenderedSize.
type limitWriter struct {
	e   *engine
	buf bytes.Buffer
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if err := w.e.b.ctx.Err(); err != nil {
		return 0, context.Cause(w.e.b.ctx)
	}
	w.e.size += len(p)
	if w.e.size > MaxRenderedSize {
		return 0, fmt.Errorf("rendered text larger than %d bytes", MaxRenderedSize)
	}
	return w.buf.Write(p)
}

// required returns v, or fails with msg when v is missing or empty.
func required(msg string, v any) (any, error) {
	switch s := v.(type) {
	case nil:
		return nil, errors.New(msg)
	case string:
		if s == "" {
			return nil, errors.New(msg)
		}
	}
	return v, nil
}

// toYaml writes v as YAML without the trailing newline, as Helm's does.
func toYaml(v any) (string, error) {
	out, err := yaml.Marshal(v)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

// fromYaml reads a YAML mapping.
func fromYaml(s string) (map[string]any, error) {
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		return nil, err
	}
	return m, nil
}

// templateLocation picks the template name, line and column out of a
// text/template error: "template: NAME:LINE:COL: message".
var templateLocation = regexp.MustCompile(`^template: ([^:]+):(\d+)(?::(\d+))?: `)

// templateName picks the template name out of a text/template error
// without a line: "template: NAME: message".
var templateName = regexp.MustCompile(`^template: ([^:]+): `)

// templateProblem turns a text/template error into a Problem at the
// template file and line, keeping text/template's own words after them.
func templateProblem(dir string, err error) configfile.Problem {
	msg := cleanMessage(err.Error())
	m := templateLocation.FindStringSubmatch(msg)
	if m == nil {
		if m := templateName.FindStringSubmatch(msg); m != nil {
			return configfile.Problem{File: path.Join(dir, m[1]), Message: msg[len(m[0]):]}
		}
		return configfile.Problem{File: path.Join(dir, templatesDir), Message: msg}
	}
	line, _ := strconv.Atoi(m[2])
	col, _ := strconv.Atoi(m[3])
	return configfile.Problem{File: path.Join(dir, m[1]), Line: line, Column: col, Message: msg[len(m[0]):]}
}

func (l *loader) templateProblem(err error) configfile.Problem { return templateProblem(l.dir, err) }

package chart

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/mod/semver"

	"github.com/skep-cd/skep/configfile"
)

// Limits on what Load reads: a chart is a small package of text, and a
// repository must not make the controller read or hold an unbounded tree.
const (
	// MaxFileSize bounds each file of a chart.
	MaxFileSize = 1 << 20
	// MaxTotalSize bounds the sum of a chart's files.
	MaxTotalSize = 8 << 20
	// MaxFiles bounds the number of files in a chart directory.
	MaxFiles = 500
)

// File names of the chart format. Templates are the files under
// templatesDir ending in one of templateExts; those whose base name starts
// with "_" hold named templates only and render nothing themselves.
const (
	metadataFile     = "Chart.yaml"
	valuesFile       = "values.yaml"
	schemaFile       = "values.schema.json"
	requirementsFile = "requirements.yaml"
	templatesDir     = "templates"
	ciDir            = "ci"
)

var templateExts = []string{".yaml", ".yml", ".yaml.tmpl", ".yml.tmpl", ".tpl"}

// Metadata is Chart.yaml. Name, Version and the Skep version constraint
// are Skep's; the other keys of Helm's Chart.yaml are accepted, so that
// published charts load unchanged, and carried for display only.
type Metadata struct {
	// APIVersion is Helm's chart API version ("v1", "v2"); it changes nothing.
	APIVersion string `yaml:"apiVersion"`
	// Name is the chart's name: lower-case letters, digits, "-", "_" and ".".
	Name string `yaml:"name"`
	// Version is the chart's own SemVer 2 version, like 1.4.0.
	Version string `yaml:"version"`
	// AppVersion is the version of the application the chart deploys, free text.
	AppVersion  string `yaml:"appVersion"`
	Description string `yaml:"description"`
	// SkepVersion is a SemVer range, like ">=0.3" or ">=0.3, <2", that the
	// version of Skep rendering the chart must satisfy; "" allows every
	// version. See CheckSkepVersion.
	SkepVersion string `yaml:"skepVersion"`

	Type        string            `yaml:"type"`
	Home        string            `yaml:"home"`
	Icon        string            `yaml:"icon"`
	Keywords    []string          `yaml:"keywords"`
	Sources     []string          `yaml:"sources"`
	Maintainers []Maintainer      `yaml:"maintainers"`
	Deprecated  bool              `yaml:"deprecated"`
	Annotations map[string]string `yaml:"annotations"`
	// SwarmcliVersion is the floor of the other chart tool a chart of the
	// published Swarm layout was written for; carried for display, it
	// binds Skep to nothing.
	SwarmcliVersion string `yaml:"swarmcliVersion"`
}

// Maintainer is one entry of Chart.yaml's maintainers.
type Maintainer struct {
	Name  string `yaml:"name"`
	Email string `yaml:"email"`
	URL   string `yaml:"url"`
}

// clone returns a deep copy of m.
func (m Metadata) clone() Metadata {
	m.Keywords = slices.Clone(m.Keywords)
	m.Sources = slices.Clone(m.Sources)
	m.Maintainers = slices.Clone(m.Maintainers)
	m.Annotations = maps.Clone(m.Annotations)
	return m
}

// ValuesFile is one values file: its name (used in errors and in the
// revision record) and its YAML content.
type ValuesFile struct {
	Name string
	Data []byte
}

// Chart is one loaded chart. It is immutable once Load returns it: every
// accessor returns a copy, so one *Chart may be shared between goroutines
// and cached across renders.
type Chart struct {
	dir          string // the chart directory within the fs.FS, for messages
	metadata     Metadata
	values       map[string]any // the chart's defaults
	schema       *schema        // nil without values.schema.json
	templates    []sourceFile   // every template, helpers included, sorted by name
	files        map[string][]byte
	requirements Requirements // decoded by Load when reqSource is static
	reqSource    *sourceFile  // requirements.yaml; nil without one
	ciValues     []ValuesFile
}

// sourceFile is one template file: its name relative to the chart directory
// (the name errors use) and its text.
type sourceFile struct {
	name, text string
}

// helper reports whether the file holds named templates only.
func (s sourceFile) helper() bool { return strings.HasPrefix(path.Base(s.name), "_") }

// Metadata returns a copy of Chart.yaml.
func (c *Chart) Metadata() Metadata { return c.metadata.clone() }

// Dir returns the chart directory as Load was given it.
func (c *Chart) Dir() string { return c.dir }

// Values returns a deep copy of the chart's default values.
func (c *Chart) Values() map[string]any { return copyMap(c.values) }

// CIValues returns the chart's ci/*-values.yaml files, sorted by name. The
// caller owns the slice; the Data bytes are shared and must not be modified.
func (c *Chart) CIValues() []ValuesFile { return slices.Clone(c.ciValues) }

// Templates returns the names of the chart's template files, relative to
// the chart directory, sorted.
func (c *Chart) Templates() []string {
	names := make([]string, len(c.templates))
	for i, t := range c.templates {
		names[i] = t.name
	}
	return names
}

var chartName = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`)

// Load reads the chart in dir (a slash path, "." for the root of fsys),
// checks it and returns it, or returns configfile.Problems listing
// every problem found, each with its file (joined to dir) and, where the
// file gives one, its line. It reads every file of the chart once, within
// the caps above, never outside fsys, and follows no symbolic link; Render
// does no further I/O. Templates are parsed, values.yaml, the schema and
// every ci values file decoded; values are checked against the schema only
// when merged, by Render, since defaults alone may leave required ones out.
func Load(fsys fs.FS, dir string) (*Chart, error) {
	dir = path.Clean(dir)
	if !fs.ValidPath(dir) {
		return nil, configfile.Problems{{File: dir, Message: "want a slash path inside the repository"}}
	}
	l := &loader{dir: dir, chart: &Chart{dir: dir, files: map[string][]byte{}}}
	l.readTree(fsys)
	if len(l.problems) > 0 {
		return nil, l.problems
	}
	l.metadata()
	l.defaults()
	l.schema()
	l.requirements()
	l.templates()
	l.ci()
	if len(l.problems) > 0 {
		l.problems.Sort()
		return nil, l.problems
	}
	return l.chart, nil
}

// loader collects the problems of one Load.
type loader struct {
	dir      string
	chart    *Chart
	problems configfile.Problems
}

// file returns the name of a chart file as messages show it.
func (l *loader) file(name string) string { return path.Join(l.dir, name) }

func (l *loader) add(name string, line int, format string, args ...any) {
	l.problems = append(l.problems, configfile.Problem{File: l.file(name), Line: line, Message: fmt.Sprintf(format, args...)})
}

// readTree reads every regular file below dir into chart.files, keyed by
// its slash path relative to dir.
func (l *loader) readTree(fsys fs.FS) {
	total := 0
	err := fs.WalkDir(fsys, l.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, l.dir), "/")
		if l.dir == "." {
			rel = p
		}
		switch {
		case d.IsDir():
			// A chart kept at a repository's root must not read the repository's own history.
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		case !d.Type().IsRegular():
			l.add(rel, 0, "not a regular file; a chart holds no symbolic links or devices")
			return nil
		}
		if len(l.chart.files) >= MaxFiles {
			return fmt.Errorf("more than %d files; a chart is a small package", MaxFiles)
		}
		data, err := readFile(fsys, p)
		if err != nil {
			l.add(rel, 0, "%v", err)
			return nil
		}
		if total += len(data); total > MaxTotalSize {
			return fmt.Errorf("files larger than %d bytes in all", MaxTotalSize)
		}
		l.chart.files[rel] = data
		return nil
	})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		l.problems = append(l.problems, configfile.Problem{File: l.dir, Message: "no such chart directory"})
	case err != nil:
		l.problems = append(l.problems, configfile.Problem{File: l.dir, Message: unwrapPath(err).Error()})
	case l.chart.files[metadataFile] == nil:
		l.add(metadataFile, 0, "missing; a chart directory holds Chart.yaml")
	}
}

// readFile reads one file, refusing one larger than MaxFileSize without
// reading it whole.
func readFile(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, unwrapPath(err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxFileSize)
	}
	return data, nil
}

// unwrapPath drops the operation and path of an fs.PathError, since
// messages name the file themselves.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// metadata decodes Chart.yaml strictly and checks its fields.
func (l *loader) metadata() {
	var m Metadata
	d := configfile.Decode(l.file(metadataFile), l.chart.files[metadataFile], &m, configfile.Options{
		Want:    "a mapping with name and version",
		Example: "name: web\nversion: 1.0.0\nappVersion: \"2.4\"\n",
	})
	switch {
	case m.Name == "":
		d.Add("name", "required")
	case !chartName.MatchString(m.Name) || len(m.Name) > 63:
		d.Add("name", "want lower-case letters, digits, '-', '_' and '.', at most 63, got %s", configfile.Quote(m.Name))
	}
	switch {
	case m.Version == "":
		d.Add("version", "required")
	case !semver.IsValid("v" + strings.TrimPrefix(m.Version, "v")):
		d.Add("version", "want a SemVer 2 version like 1.2.3, got %s", configfile.Quote(m.Version))
	}
	switch m.APIVersion {
	case "", "v1", "v2":
	default:
		d.Add("apiVersion", "want v1 or v2, got %s", configfile.Quote(m.APIVersion))
	}
	if m.SkepVersion != "" {
		if _, err := parseConstraint(m.SkepVersion); err != nil {
			d.Add("skepVersion", "%v", err)
		}
	}
	l.problems = append(l.problems, d.Problems()...)
	l.chart.metadata = m
}

// defaults reads values.yaml, the chart's default values; a chart without
// one has none.
func (l *loader) defaults() {
	data, ok := l.chart.files[valuesFile]
	l.chart.values = map[string]any{}
	if !ok {
		return
	}
	v, err := parseValues(l.file(valuesFile), data)
	if err != nil {
		l.problems = append(l.problems, problemsOf(err)...)
		return
	}
	l.chart.values = v
}

// requirements parses requirements.yaml as a template and, when it holds
// no template action, decodes it strictly; a templated one is decoded by
// Chart.Requirements, once the values are known.
func (l *loader) requirements() {
	data, ok := l.chart.files[requirementsFile]
	if !ok {
		return
	}
	src := sourceFile{name: requirementsFile, text: string(data)}
	if _, err := newEngine([]sourceFile{src}); err != nil {
		l.problems = append(l.problems, l.templateProblem(err))
		return
	}
	l.chart.reqSource = &src
	if !static(src.text) {
		return
	}
	r, problems := decodeRequirements(l.file(requirementsFile), data)
	l.problems = append(l.problems, problems...)
	l.chart.requirements = r
}

// templates collects and parses the template files.
func (l *loader) templates() {
	for _, name := range slices.Sorted(maps.Keys(l.chart.files)) {
		if !strings.HasPrefix(name, templatesDir+"/") || !hasTemplateExt(name) {
			continue
		}
		src := sourceFile{name: name, text: string(l.chart.files[name])}
		if strings.HasSuffix(name, ".tpl") && !src.helper() {
			l.add(name, 0, "a .tpl file holds named templates only; name it _%s", path.Base(name))
			continue
		}
		l.chart.templates = append(l.chart.templates, src)
	}
	fragments := 0
	for _, t := range l.chart.templates {
		if !t.helper() {
			fragments++
		}
	}
	if fragments == 0 {
		l.add(templatesDir, 0, "no templates; want compose fragments in templates/*.yaml")
		return
	}
	if _, err := newEngine(l.chart.templates); err != nil {
		l.problems = append(l.problems, l.templateProblem(err))
	}
}

func hasTemplateExt(name string) bool {
	for _, ext := range templateExts {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// ci decodes the example values files under ci/.
func (l *loader) ci() {
	for _, name := range slices.Sorted(maps.Keys(l.chart.files)) {
		dir, base := path.Split(name)
		if dir != ciDir+"/" || !(strings.HasSuffix(base, "values.yaml") || strings.HasSuffix(base, "values.yml")) {
			continue
		}
		data := l.chart.files[name]
		if _, err := parseValues(l.file(name), data); err != nil {
			l.problems = append(l.problems, problemsOf(err)...)
			continue
		}
		l.chart.ciValues = append(l.chart.ciValues, ValuesFile{Name: name, Data: data})
	}
}

package artifact

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/configfile"
)

// Shape is the layout of an artifact directory. The zero value means no
// artifact directory.
type Shape string

// The two shapes an environment's artifact directory may have.
const (
	// NativeShape is Skep's own: *.yaml and *.yml files directly in the
	// environment directory, each a list of entries with kind, name,
	// image, source, deploy and labels.
	NativeShape Shape = "native"
	// ReleaseShape is the release-repository shape teams already keep:
	// infrastructure/*.yaml and service/*.yaml under the environment
	// directory, entries with docker, github, provider and deploy, whose
	// short names resolve against LoadOptions.Registry and GitBase.
	ReleaseShape Shape = "release-repository"
)

// The folders of the release-repository shape.
const (
	infrastructureDir = "infrastructure"
	serviceDir        = "service"
)

// Limits on what Load reads, so a hostile or mistaken commit cannot make a
// reconcile read without bound.
const (
	// MaxFileSize bounds one artifact file; a larger one is a problem,
	// refused unread.
	MaxFileSize = 1 << 20
	// MaxEntries bounds the entries of one environment, all files together.
	MaxEntries = 1000
	// MaxFiles bounds the artifact files of one environment.
	MaxFiles = 500
)

// LoadOptions says how Load resolves the short names of the
// release-repository shape. The zero value has no prefixes: a
// release-repository entry is then a problem that names the option to set,
// unless NamesOnly is true. The native shape ignores the options.
type LoadOptions struct {
	// Registry prefixes a docker name to make a service's image, e.g.
	// "registry.example.org/team" makes "registry.example.org/team/web"
	// of "docker: web".
	Registry string
	// GitBase prefixes a github name to make an entry's source, e.g.
	// "https://github.com/team" makes "https://github.com/team/web" of
	// "github: web".
	GitBase string
	// NamesOnly checks the docker and github names themselves where their
	// prefix is unset, instead of reporting the missing prefix, and leaves
	// Image or Source empty. It is for offline validation (skep validate
	// in a release repository's CI), never for a set that is deployed.
	NamesOnly bool
}

// Set is the artifacts of one environment, as loaded and validated by Load.
// It is immutable and safe for concurrent use; its methods return copies.
// A nil *Set holds no entries.
type Set struct {
	shape   Shape
	dir     string
	entries []Entry
	byName  map[string]int
}

// Shape returns the shape the set was declared in.
func (s *Set) Shape() Shape {
	if s == nil {
		return ""
	}
	return s.shape
}

// Dir returns the directory the set was loaded from, as given to Load.
func (s *Set) Dir() string {
	if s == nil {
		return ""
	}
	return s.dir
}

// Len returns the number of entries.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.entries)
}

// Entries returns a copy of every entry, in file order (by path relative
// to Dir) and then in declaration order.
func (s *Set) Entries() []Entry {
	if s == nil {
		return nil
	}
	out := make([]Entry, len(s.entries))
	for i, e := range s.entries {
		out[i] = copyEntry(e)
	}
	return out
}

// Infrastructure returns the infrastructure entry, if the set has one. A
// release-repository set always has exactly one, a native set at most one.
func (s *Set) Infrastructure() (Entry, bool) {
	if s == nil {
		return Entry{}, false
	}
	for _, e := range s.entries {
		if e.Kind == Infrastructure {
			return copyEntry(e), true
		}
	}
	return Entry{}, false
}

// Services returns a copy of the service entries, in Entries order.
func (s *Set) Services() []Entry {
	if s == nil {
		return nil
	}
	var out []Entry
	for _, e := range s.entries {
		if e.Kind == Service {
			out = append(out, copyEntry(e))
		}
	}
	return out
}

// Lookup returns the entry with exactly this name.
func (s *Set) Lookup(name string) (Entry, bool) {
	if s == nil {
		return Entry{}, false
	}
	i, ok := s.byName[name]
	if !ok {
		return Entry{}, false
	}
	return copyEntry(s.entries[i]), true
}

func copyEntry(e Entry) Entry {
	e.Labels = maps.Clone(e.Labels)
	return e
}

// Detect reports whether dir in fsys is an artifact directory, and of which
// shape: a service/ or infrastructure/ folder makes it the
// release-repository shape; otherwise a *.yaml or *.yml file directly in
// dir whose document is a list makes it the native shape. An app-set
// directory, whose files are mappings, is not one. Detect reads at most
// MaxFileSize of each file and never fails: what it cannot read does not
// count.
func Detect(fsys fs.FS, dir string) (Shape, bool) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return "", false
	}
	for _, e := range entries {
		if (e.Name() == serviceDir || e.Name() == infrastructureDir) && isDir(fsys, path.Join(dir, e.Name())) {
			return ReleaseShape, true
		}
	}
	for _, name := range yamlFiles(fsys, dir, entries) {
		if looksNative(fsys, path.Join(dir, name)) {
			return NativeShape, true
		}
	}
	return "", false
}

func isDir(fsys fs.FS, name string) bool {
	// Stat, not the entry's type: a folder may be a symbolic link.
	info, err := fs.Stat(fsys, name)
	return err == nil && info.IsDir()
}

// yamlFiles returns the names of the *.yaml and *.yml files among entries
// of dir, in name order, skipping names that start with a dot. A name
// that cannot be stat'ed but exists (a symlink out of a confined FS) is
// kept, so that reading it reports why rather than the file vanishing
// (see TestLoadThroughARootRefusesSymlinksLeavingTheCheckout).
func yamlFiles(fsys fs.FS, dir string, entries []fs.DirEntry) []string {
	var out []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		info, err := fs.Stat(fsys, path.Join(dir, n))
		if err != nil && errors.Is(err, fs.ErrNotExist) || err == nil && info.IsDir() {
			continue
		}
		out = append(out, n)
	}
	return out
}

// looksNative reports whether the file's first YAML document is a list.
// Of a file over MaxFileSize it reads only the start: whether its first
// line of content begins a list, so that Load reports the size.
func looksNative(fsys fs.FS, name string) bool {
	info, err := fs.Stat(fsys, name)
	if err != nil {
		return false
	}
	if info.Size() > MaxFileSize {
		return startsList(fsys, name)
	}
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return false
	}
	var n yaml.Node
	if yaml.NewDecoder(bytes.NewReader(data)).Decode(&n) != nil {
		return false
	}
	return len(n.Content) == 1 && n.Content[0].Kind == yaml.SequenceNode
}

// file is one artifact file read from the directory: its path relative to
// the directory, which problems and Entry.File carry, and the kind its
// folder gives its entries (release-repository shape only).
type file struct {
	rel  string
	kind Kind
	data []byte
	// problem, when set, is why the file was not read (too large).
	problem string
}

// Load reads the artifact directory dir in fsys, whose shape Detect
// decides, decodes every file strictly, resolves the release-repository
// names with opts and validates the whole environment. An invalid
// directory yields configfile.Problems listing every problem, each with
// its file relative to dir, line, column and field path; other errors
// (dir unreadable, not an artifact directory, bad options) are plain.
//
// Load reads only through fsys: a caller reading an untrusted tree passes
// an FS confined to it, like os.Root.FS.
func Load(fsys fs.FS, dir string, opts LoadOptions) (*Set, error) {
	if err := opts.Check(); err != nil {
		return nil, fmt.Errorf("load artifacts in %s: %w", dir, err)
	}
	if !isDir(fsys, dir) {
		if _, err := fs.Stat(fsys, dir); err != nil {
			return nil, fmt.Errorf("load artifacts: %w", err)
		}
		return nil, fmt.Errorf("load artifacts in %s: not a directory", dir)
	}
	shape, ok := Detect(fsys, dir)
	if !ok {
		return nil, fmt.Errorf("load artifacts in %s: not an artifact directory: want *.yaml files each holding a list of entries, or the folders %s/ and %s/", dir, serviceDir, infrastructureDir)
	}
	files, dirProblems, err := readFiles(fsys, dir, shape)
	if err != nil {
		return nil, fmt.Errorf("load artifacts in %s: %w", dir, err)
	}
	return build(shape, dir, files, dirProblems, opts)
}

// readFiles reads the files of dir in its shape, in path order. Files of
// the other shape found beside them are problems, as are too many files.
func readFiles(fsys fs.FS, dir string, shape Shape) ([]file, configfile.Problems, error) {
	var files []file
	var problems configfile.Problems
	top, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, nil, err
	}
	if shape == NativeShape {
		for _, n := range yamlFiles(fsys, dir, top) {
			files = append(files, file{rel: n})
		}
	} else {
		for _, n := range yamlFiles(fsys, dir, top) {
			if looksNative(fsys, path.Join(dir, n)) {
				problems = append(problems, configfile.Problem{File: n, Message: fmt.Sprintf(
					"a native artifact file beside %s/ and %s/: a directory holds one shape; move its entries into those folders or the folders' entries into native files", serviceDir, infrastructureDir)})
			}
		}
		for _, sub := range []struct {
			name string
			kind Kind
		}{{infrastructureDir, Infrastructure}, {serviceDir, Service}} {
			full := path.Join(dir, sub.name)
			if !isDir(fsys, full) {
				continue
			}
			entries, err := fs.ReadDir(fsys, full)
			if err != nil {
				return nil, nil, err
			}
			for _, n := range yamlFiles(fsys, full, entries) {
				files = append(files, file{rel: sub.name + "/" + n, kind: sub.kind})
			}
		}
	}
	if len(files) > MaxFiles {
		return nil, nil, fmt.Errorf("%d artifact files, more than %d", len(files), MaxFiles)
	}
	for i := range files {
		f := &files[i]
		full := path.Join(dir, f.rel)
		info, err := fs.Stat(fsys, full)
		if err != nil {
			return nil, nil, err
		}
		if info.Size() > MaxFileSize {
			f.problem = fmt.Sprintf("larger than %d bytes (1 MiB); split the file", MaxFileSize)
			continue
		}
		if f.data, err = fs.ReadFile(fsys, full); err != nil {
			return nil, nil, err
		}
	}
	slices.SortStableFunc(files, func(a, b file) int { return strings.Compare(a.rel, b.rel) })
	return files, problems, nil
}

// build decodes and validates files into a Set. It does no I/O, so the
// fuzz target and tests drive it with bytes.
func build(shape Shape, dir string, files []file, problems configfile.Problems, opts LoadOptions) (*Set, error) {
	v := &validator{shape: shape, opts: opts, seen: map[string]seenName{}}
	for _, f := range files {
		v.file(f)
	}
	v.environment()
	for _, d := range v.docs {
		problems = append(problems, d.Problems()...)
	}
	problems = append(problems, v.problems...)
	if len(problems) > 0 {
		problems.Sort()
		return nil, problems
	}
	set := &Set{shape: shape, dir: dir, entries: v.entries, byName: map[string]int{}}
	for i, e := range set.entries {
		set.byName[e.Name] = i
	}
	return set, nil
}

// startsList reports whether the first line of the file that is neither
// blank, a comment nor a document marker starts a YAML list.
func startsList(fsys fs.FS, name string) bool {
	f, err := fsys.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 4096)
	n, _ := io.ReadFull(f, head)
	for _, line := range strings.Split(string(head[:n]), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line == "---" || strings.HasPrefix(line, "#") {
			continue
		}
		return strings.HasPrefix(line, "- ") || line == "-" || strings.HasPrefix(line, "[")
	}
	return false
}

package appset

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/skep-cd/skep/configfile"
)

// MaxFileSize bounds one app-set file; a larger one is refused unread, so
// a wrong path (a log, an image) cannot exhaust the controller's memory.
const MaxFileSize = 4 << 20

// File is one app-set file's name and content. Name is what problems are
// reported against: a path as the user knows it. ParseFiles does not keep
// Data, so the caller may reuse it afterwards.
type File struct {
	Name string
	Data []byte
}

// Parse parses one app-set file. An invalid file yields configfile.Problems listing
// every problem found; name only labels them.
func Parse(name string, data []byte) (*Set, error) {
	return ParseFiles([]File{{Name: name, Data: data}})
}

// ParseFiles parses files as one app set: their applications are merged in
// the order given, and names and releases must be unique across all of them.
// An invalid set yields configfile.Problems, each naming its own file.
// Parsing does no I/O; a git-backed source reads the files and calls this.
// The files of the last valid set parse to that same *Set (see lastParse).
func ParseFiles(files []File) (*Set, error) {
	digest := Digest(files)
	lastParse.Lock()
	set, same := lastParse.set, lastParse.digest == digest
	lastParse.Unlock()
	if set != nil && same {
		return set, nil
	}
	set, err := parseFiles(files)
	if err == nil {
		lastParse.Lock()
		lastParse.digest, lastParse.set = digest, set
		lastParse.Unlock()
	}
	return set, err
}

// lastParse is the last set ParseFiles made and the Digest of its files: a
// source loaded every interval (see Watcher.Run) parses its files again
// only when they changed, which at hundreds of applications is most of
// what a controller at rest does between ticks. A Set is never changed
// once made, so callers may share it.
var lastParse struct {
	sync.Mutex
	digest string
	set    *Set
}

func parseFiles(files []File) (*Set, error) {
	// Every file is parsed even when an earlier one failed, and uniqueness
	// is checked across them all, so that one load reports every problem.
	parsed := make([]*parsedFile, len(files))
	for i, f := range files {
		parsed[i] = parseFile(f)
	}
	checkUnique(parsed)
	checkDependencies(parsed)
	checkGenerators(parsed)
	checkCount(parsed)
	var problems configfile.Problems
	for _, p := range parsed {
		problems = append(problems, p.d.Problems()...)
	}
	if len(problems) > 0 {
		problems.Sort()
		return nil, problems
	}
	set := &Set{byName: map[string]int{}, swarmAt: map[string]configfile.Problem{}}
	// Windows are the whole set's: a file's windows cover the applications
	// of every file their globs match.
	for _, p := range parsed {
		for _, w := range p.doc.SyncWindows {
			set.windows = append(set.windows, toWindow(w))
		}
		for i, g := range p.doc.Generators {
			field := fmt.Sprintf("generators[%d].directories", i)
			line, col := p.d.Position(field)
			set.generators = append(set.generators, generator{
				Generator: Generator{Name: g.Name, Repo: g.Repo, Revision: g.Revision, Directories: slices.Clone(g.Directories)},
				tmpl:      templateOf(g),
				at:        configfile.Problem{File: p.name, Line: line, Column: col, Field: field},
			})
		}
	}
	for _, p := range parsed {
		for i, a := range p.doc.Applications {
			set.byName[a.Name] = len(set.apps)
			app := toApplication(a)
			for _, w := range set.windows {
				if w.Covers(app.Name) {
					app.SyncWindows = append(app.SyncWindows, w)
				}
			}
			set.apps = append(set.apps, app)
			field := fmt.Sprintf("applications[%d].destination.swarm", i)
			line, col := p.d.Position(field)
			set.swarmAt[a.Name] = configfile.Problem{File: p.name, Line: line, Column: col, Field: field}
		}
	}
	return set, nil
}

// MaxApplications bounds an app set, across its files: well above the
// thousand applications Skep is measured with, low enough that a generated
// set cannot start workers without end.
const MaxApplications = 10000

// checkCount files one problem, at the document of the file that goes
// past MaxApplications, when the set is too large.
func checkCount(files []*parsedFile) {
	n := 0
	for _, p := range files {
		n += len(p.doc.Applications)
		if n > MaxApplications {
			p.d.Add("applications", "the app set declares more than %d applications", MaxApplications)
			return
		}
	}
}

// parsedFile is one file decoded, defaulted and validated on its own, with
// the document that holds its positions and problems.
type parsedFile struct {
	name string
	d    *configfile.Document
	doc  fileDoc
}

// parseFile decodes, defaults and validates one file. Problems are kept in
// p.d rather than returned, so that checkUnique can add its own.
func parseFile(f File) *parsedFile {
	p := &parsedFile{name: f.Name}
	if len(f.Data) > MaxFileSize {
		// Decode nothing, only to get a Document to file the problem in.
		p.d = configfile.Decode(f.Name, nil, &p.doc, configfile.Options{})
		p.d.Add("", "larger than %d bytes", MaxFileSize)
		return p
	}
	p.d = configfile.Decode(f.Name, f.Data, &p.doc, configfile.Options{Want: "a mapping with apiVersion and applications"})
	if p.d.Empty() {
		p.d.Add("", "empty; want apiVersion: %s and a list of applications", APIVersion)
		return p
	}
	for i := range p.doc.Applications {
		setDefaults(&p.doc.Applications[i])
	}
	validateDoc(p.d, &p.doc)
	return p
}

// LoadFile reads and parses one app-set file from the controller's
// filesystem.
func LoadFile(name string) (*Set, error) {
	f, err := readOSFile(name)
	if err != nil {
		return nil, err
	}
	return Parse(f.Name, f.Data)
}

// readOSFile reads name, refusing a directory and a file larger than
// MaxFileSize before reading it.
func readOSFile(name string) (File, error) {
	info, err := os.Stat(name)
	if err != nil {
		return File{}, fmt.Errorf("read app set: %w", err)
	}
	if info.IsDir() {
		return File{}, fmt.Errorf("read app set %s: is a directory", name)
	}
	if info.Size() > MaxFileSize {
		return File{}, fmt.Errorf("read app set %s: larger than %d bytes", name, MaxFileSize)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return File{}, fmt.Errorf("read app set: %w", err)
	}
	return File{Name: name, Data: data}, nil
}

// ReadFiles reads the app set at name in fsys: the file itself, or every
// *.yaml and *.yml file directly inside the directory, in name order,
// skipping names that start with a dot. Names in the result are name joined
// with the file's name. An empty directory and a file larger than
// MaxFileSize are errors.
//
// ReadFiles follows symbolic links the way fsys does: a caller reading an
// untrusted tree passes an FS confined to it, like os.Root.FS.
func ReadFiles(fsys fs.FS, name string) ([]File, error) {
	info, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("read app set: %w", err)
	}
	if !info.IsDir() {
		f, err := readFile(fsys, name, info)
		if err != nil {
			return nil, err
		}
		return []File{f}, nil
	}
	entries, err := fs.ReadDir(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("read app set: %w", err)
	}
	var files []File
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		full := path.Join(name, n)
		// Stat, not the entry's type: a file may be a symbolic link, as
		// in a mounted Kubernetes ConfigMap.
		st, err := fs.Stat(fsys, full)
		if err != nil {
			return nil, fmt.Errorf("read app set: %w", err)
		}
		if st.IsDir() {
			continue
		}
		f, err := readFile(fsys, full, st)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("read app set: no *.yaml or *.yml files in %s", name)
	}
	return files, nil
}

// readFile reads name from fsys, refusing it unread when info says it is
// larger than MaxFileSize.
func readFile(fsys fs.FS, name string, info fs.FileInfo) (File, error) {
	if info.Size() > MaxFileSize {
		return File{}, fmt.Errorf("read app set %s: larger than %d bytes", name, MaxFileSize)
	}
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return File{}, fmt.Errorf("read app set: %w", err)
	}
	return File{Name: name, Data: data}, nil
}

// Digest returns a content hash of files, names included, for sources whose
// revision is their content: "sha256:" and 64 hex digits.
func Digest(files []File) string {
	// Each name and content is length-prefixed, so moving bytes between
	// a name and its content, or between files, changes the digest.
	h := sha256.New()
	var n [8]byte
	for _, f := range files {
		for _, part := range [][]byte{[]byte(f.Name), f.Data} {
			binary.BigEndian.PutUint64(n[:], uint64(len(part)))
			h.Write(n[:])
			h.Write(part)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

package appset

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// Source is where an app set comes from: a file, a directory, a git
// repository. Implementations must be safe for one Load at a time; the
// Watcher never calls Load concurrently.
type Source interface {
	// Load reads the app set as the source holds it now. revision
	// identifies that content: a commit for git, Digest of the files
	// otherwise; equal revisions mean equal sets. An invalid set returns
	// Problems and, when it could be read, its revision; an I/O failure
	// returns another error.
	Load(ctx context.Context) (set *Set, revision string, err error)
}

// FileSource loads one app-set file. Its revision is the Digest of the
// file, so an unchanged file reloads as unchanged.
type FileSource struct {
	// Path is the file's path on the controller's filesystem.
	Path string
}

// Load implements Source.
func (s FileSource) Load(ctx context.Context) (*Set, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	f, err := readOSFile(s.Path)
	if err != nil {
		return nil, "", err
	}
	files := []File{f}
	set, err := ParseFiles(files)
	// The digest is returned with Problems too: the Watcher reports which
	// content was invalid.
	return set, Digest(files), err
}

// DirSource loads every *.yaml and *.yml file directly in Dir as one set
// (see ReadFiles). Symbolic links may not leave Dir.
type DirSource struct {
	// Dir is the directory; only its direct children are read.
	Dir string
}

// Load implements Source.
func (s DirSource) Load(ctx context.Context) (*Set, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	// os.Root confines every open to Dir, symbolic links included, so a
	// link in a mounted directory cannot make the controller read
	// another file on its host.
	root, err := os.OpenRoot(s.Dir)
	if err != nil {
		return nil, "", fmt.Errorf("read app set: %w", err)
	}
	defer root.Close()
	files, err := ReadFiles(root.FS(), ".")
	if err != nil {
		return nil, "", fmt.Errorf("app-set directory %s: %w", s.Dir, err)
	}
	// Problems name the files as the operator knows them, not relative to
	// the root.
	for i := range files {
		files[i].Name = filepath.Join(s.Dir, filepath.FromSlash(files[i].Name))
	}
	set, err := ParseFiles(files)
	return set, Digest(files), err
}

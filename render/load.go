package render

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"maps"
	"path"
	"time"
)

// Load renders one compose document held in memory, as Compose renders a
// file: the same interpolation (from vars only), checks, warnings and
// merge rules of docker/cli's loader. name is the document's slash path,
// relative to a virtual root; the errors name it, and relative `file:` and
// `env_file:` references are resolved from its directory. files holds
// every file such a reference may read, keyed by slash path relative to
// the same root; a reference to anything else is an error. Load does no
// I/O at all, does not modify data, files or vars, and is safe to call
// concurrently. Package chart renders charts through it.
func Load(ctx context.Context, name string, data []byte, files map[string][]byte, vars map[string]string) (*Document, error) {
	clean, err := localPath(name)
	if err != nil || clean == "." {
		return nil, &Error{File: name, Err: errors.New("want a relative file name for the document")}
	}
	mem := memFS{clean: data}
	for k, v := range files {
		if k != clean {
			mem[k] = v
		}
	}
	r := &renderer{ctx: ctx, fsys: mem, dir: path.Dir(clean)}
	env := maps.Clone(vars)
	if env == nil {
		env = map[string]string{}
	}
	if err := r.parse(clean, env); err != nil {
		return nil, err
	}
	return r.load(env)
}

// memFS is a read-only file system of whole files, keyed by slash path.
// Directories are not listed: render only opens files by name.
type memFS map[string][]byte

// Open returns the file called name, or fs.ErrNotExist.
func (m memFS) Open(name string) (fs.File, error) {
	data, ok := m[name]
	if !ok || !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &memFile{Reader: bytes.NewReader(data), name: path.Base(name), size: int64(len(data))}, nil
}

// memFile is one open file of a memFS.
type memFile struct {
	*bytes.Reader
	name string
	size int64
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f, nil }
func (f *memFile) Close() error               { return nil }

// The fs.FileInfo of a memFile: a read-only regular file.
func (f *memFile) Name() string       { return f.name }
func (f *memFile) Size() int64        { return f.size }
func (f *memFile) Mode() fs.FileMode  { return 0o444 }
func (f *memFile) ModTime() time.Time { return time.Time{} }
func (f *memFile) IsDir() bool        { return false }
func (f *memFile) Sys() any           { return nil }

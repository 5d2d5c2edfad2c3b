package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Tree is the files of one commit, exported to a directory that is never
// modified while any Tree for it is held. Files are read-only (0444, 0555
// when executable); the directories are not, but the tree is shared, so
// nothing may be written into it. Symlinks are kept as symlinks, even ones
// pointing outside the tree: read through ReadFile (or an os.Root opened
// on Dir) to stay confined. Submodules appear as empty directories.
//
// A Tree's methods are safe for concurrent use. After Release the
// directory may be removed at any time.
type Tree struct {
	dir, commit string
	once        sync.Once
	release     func()
}

// Dir is the absolute path of the exported tree.
func (t *Tree) Dir() string { return t.dir }

// Commit is the full sha of the exported commit.
func (t *Tree) Commit() string { return t.commit }

// Release tells the cache this reconcile is done with the tree. It is safe
// to call more than once.
func (t *Tree) Release() { t.once.Do(t.release) }

// ReadFile returns the content of the file at name, a slash-separated path
// relative to the tree. It refuses absolute paths and ".." elements
// (fs.ErrInvalid) and symlinks that lead outside the tree (ErrOutsideTree),
// which includes every absolute symlink.
func (t *Tree) ReadFile(name string) ([]byte, error) {
	if err := checkRelPath(name); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(t.dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	resolved, err := resolveConfined(root, name)
	var data []byte
	if err == nil {
		data, err = root.ReadFile(resolved)
	}
	if err != nil {
		// os.Root's own PathError names its internal operation ("statat").
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return data, nil
}

// checkRelPath refuses an empty or absolute name and any ".." element,
// before any file is touched.
func checkRelPath(name string) error {
	if name == "" || path.IsAbs(name) || filepath.IsAbs(name) {
		return &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: want a path relative to the tree", fs.ErrInvalid)}
	}
	for _, e := range strings.Split(name, "/") {
		if e == ".." {
			return &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: \"..\" is not allowed", fs.ErrInvalid)}
		}
	}
	return nil
}

// maxLinks bounds symlink chains, as the kernel's ELOOP does.
const maxLinks = 40

// resolveConfined follows the symlinks on name's path inside root and
// returns the path they lead to, or ErrOutsideTree when one leaves root.
// os.Root would refuse such a path too, but without a sentinel to test for.
func resolveConfined(root *os.Root, name string) (string, error) {
	pending := strings.Split(name, "/")
	var done []string
	links := 0
	for len(pending) > 0 {
		e := pending[0]
		pending = pending[1:]
		switch e {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", ErrOutsideTree
			}
			done = done[:len(done)-1]
			continue
		}
		// The full slice expression makes append copy, so done is not
		// changed when e turns out to be a symlink.
		p := strings.Join(append(done[:len(done):len(done)], e), "/")
		fi, err := root.Lstat(p)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, e)
			continue
		}
		if links++; links > maxLinks {
			return "", errors.New("too many levels of symbolic links")
		}
		target, err := root.Readlink(p)
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) || filepath.IsAbs(target) {
			return "", ErrOutsideTree
		}
		pending = append(strings.Split(target, "/"), pending...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return strings.Join(done, "/"), nil
}

// exportTree writes the files of commit h into dst, an empty directory.
// Writes go through os.Root, so a crafted tree cannot place files outside.
// Each file's size is checked against caps before it is read, so a tree
// over a cap stops at the first file past it.
func exportTree(ctx context.Context, g *git.Repository, h plumbing.Hash, dst string, caps caps) error {
	commit, err := g.CommitObject(h)
	if err != nil {
		return err
	}
	tree, err := commit.Tree()
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	budget := &exportBudget{caps: caps}
	for n := 0; ; n++ {
		if n%256 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		name, entry, err := w.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := budget.entry(name); err != nil {
			return err
		}
		if err := exportEntry(g, root, name, entry, budget); err != nil {
			var limit *LimitError
			if errors.As(err, &limit) {
				return err // it names the file
			}
			return fmt.Errorf("export %s: %w", name, err)
		}
	}
}

// exportEntry writes one tree entry under root. Files are created with
// O_EXCL: the directory is fresh, so an existing name means the tree is
// malformed, and a file is never written through a symlink.
func exportEntry(g *git.Repository, root *os.Root, name string, entry object.TreeEntry, budget *exportBudget) error {
	switch entry.Mode {
	case filemode.Dir, filemode.Submodule:
		return root.MkdirAll(name, 0o755)
	case filemode.Symlink:
		target, err := readBlob(g, entry.Hash)
		if err != nil {
			return err
		}
		return root.Symlink(string(target), name)
	case filemode.Regular, filemode.Deprecated, filemode.Executable:
		perm := os.FileMode(0o444)
		if entry.Mode == filemode.Executable {
			perm = 0o555
		}
		blob, err := g.BlobObject(entry.Hash)
		if err != nil {
			return err
		}
		if err := budget.take(name, blob.Size); err != nil {
			return err
		}
		r, err := blob.Reader()
		if err != nil {
			return err
		}
		defer r.Close()
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, r); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return fmt.Errorf("unsupported file mode %s", entry.Mode)
}

// exportBudget is what is left of the caps on one exported tree.
type exportBudget struct {
	caps  caps
	files int
	bytes int64
}

// entry counts the entry at name (a file, directory or link), or returns
// the *LimitError of the cap on their number.
func (b *exportBudget) entry(name string) error {
	if b.files++; b.files > b.caps.treeFiles {
		return &LimitError{Cap: CapTreeFiles, Path: name, Size: int64(b.files), Limit: int64(b.caps.treeFiles)}
	}
	return nil
}

// take counts size bytes of the file at name, or returns the *LimitError
// of the first cap it passes.
func (b *exportBudget) take(name string, size int64) error {
	if size > b.caps.file {
		return &LimitError{Cap: CapFile, Path: name, Size: size, Limit: b.caps.file}
	}
	if b.bytes += size; b.bytes > b.caps.treeBytes {
		return &LimitError{Cap: CapTreeBytes, Path: name, Size: b.bytes, Limit: b.caps.treeBytes}
	}
	return nil
}

// readBlob returns a symlink's target, at most 4 KiB (PATH_MAX): a larger
// blob is not a target any filesystem accepts.
func readBlob(g *git.Repository, h plumbing.Hash) ([]byte, error) {
	blob, err := g.BlobObject(h)
	if err != nil {
		return nil, err
	}
	r, err := blob.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, 4096))
}

// treeSet tracks the exported trees of one repository: how many Trees hold
// each, and when each was last released, for the LRU clean-up.
type treeSet struct {
	dir  string // <repo>/trees
	keep int    // unheld trees kept

	mu      sync.Mutex
	entries map[string]*treeEntry // by commit sha
}

// treeEntry is one exported tree's holds and last use.
type treeEntry struct {
	held     int
	lastUsed time.Time
}

// loadTreeSet adopts the complete trees a previous process left in dir
// and removes half-written ones. Exports are renamed into place when done,
// so a directory named by a sha is complete.
func loadTreeSet(dir string, keep int) *treeSet {
	s := &treeSet{dir: dir, keep: keep, entries: map[string]*treeEntry{}}
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if isFullSHA(de.Name()) && de.IsDir() {
			info, err := de.Info()
			if err == nil {
				s.entries[de.Name()] = &treeEntry{lastUsed: info.ModTime()}
			}
			continue
		}
		_ = os.RemoveAll(filepath.Join(dir, de.Name()))
	}
	return s
}

// hold marks the tree of sha held and reports whether it exists.
func (s *treeSet) hold(sha string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[sha]
	if ok {
		e.held++
	}
	return ok
}

// add moves a finished export from tmp into place, held once.
func (s *treeSet) add(sha, tmp string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Rename(tmp, filepath.Join(s.dir, sha)); err != nil {
		return err
	}
	s.entries[sha] = &treeEntry{held: 1, lastUsed: time.Now()}
	return nil
}

// release drops one hold and removes the least recently used unheld trees
// beyond the keep limit.
func (s *treeSet) release(sha string) {
	var doomed []string
	s.mu.Lock()
	if e, ok := s.entries[sha]; ok {
		e.held--
		e.lastUsed = time.Now()
	}
	var idle []string
	for k, e := range s.entries {
		if e.held <= 0 {
			idle = append(idle, k)
		}
	}
	if len(idle) > s.keep {
		sort.Slice(idle, func(i, j int) bool { return s.entries[idle[i]].lastUsed.Before(s.entries[idle[j]].lastUsed) })
		for _, k := range idle[:len(idle)-s.keep] {
			// Renamed away under the lock so a concurrent export of the same
			// commit finds the name free; deleted after unlocking.
			gone, err := os.MkdirTemp(s.dir, ".gone-")
			if err == nil {
				err = os.Rename(filepath.Join(s.dir, k), filepath.Join(gone, "t"))
			}
			if err != nil {
				_ = os.Remove(gone)
				continue
			}
			delete(s.entries, k)
			doomed = append(doomed, gone)
		}
	}
	s.mu.Unlock()
	for _, d := range doomed {
		_ = os.RemoveAll(d)
	}
}

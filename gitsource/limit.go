package gitsource

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Defaults of the caps in Options. go-git holds each object whole while it
// indexes a received pack, so DefaultMaxFileBytes is what one fetch may hold
// in memory beyond its small buffers; the others bound the disk.
const (
	DefaultMaxFileBytes = 64 << 20
	DefaultMaxPackBytes = 512 << 20
	DefaultMaxTreeBytes = 1 << 30
	DefaultMaxTreeFiles = 100_000
)

// ErrTooLarge means a repository is over one of Options' caps. Retrying
// will not help until git changes or the cap is raised; errors.As finds the
// *LimitError that says which cap.
var ErrTooLarge = errors.New("repository over a size cap")

// Cap names one of Options' caps.
type Cap string

// The caps.
const (
	CapFile      Cap = "file"            // one file (one object) in bytes: Options.MaxFileBytes
	CapPack      Cap = "pack"            // the bytes one fetch receives: Options.MaxPackBytes
	CapTreeBytes Cap = "tree bytes"      // the bytes of one exported tree: Options.MaxTreeBytes
	CapTreeFiles Cap = "files in a tree" // the entries (files, directories, links) of one exported tree: Options.MaxTreeFiles
)

// LimitError is a repository over one of Options' caps. Path is the file
// when it is known: always on checkout, never while a fetch is received,
// since the path of an object is in the trees that come with it. Size is
// what was seen when the cap was passed (bytes, or files for
// CapTreeFiles), which for a pack is where receiving stopped. It matches
// ErrTooLarge.
type LimitError struct {
	Cap    Cap
	Path   string
	Object string // the kind of object over CapFile while receiving: "blob", "tree", …
	Size   int64
	Limit  int64
}

// Error names the file or object, its size and the cap.
func (e *LimitError) Error() string {
	switch e.Cap {
	case CapFile:
		if e.Path != "" {
			return fmt.Sprintf("%s: %s is %s, over the %s cap on one file", ErrTooLarge, e.Path, bytesText(e.Size), bytesText(e.Limit))
		}
		return fmt.Sprintf("%s: the pack holds a %s of %s, over the %s cap on one file; nothing of this fetch was kept", ErrTooLarge, e.Object, bytesText(e.Size), bytesText(e.Limit))
	case CapPack:
		return fmt.Sprintf("%s: the fetch received more than %s, the cap on one fetch; nothing of it was kept", ErrTooLarge, bytesText(e.Limit))
	case CapTreeFiles:
		return fmt.Sprintf("%s: the tree has more than %d files and directories, the cap on one tree (at %s)", ErrTooLarge, e.Limit, e.Path)
	default:
		return fmt.Sprintf("%s: the tree's files add up to more than %s, the cap on one tree (at %s)", ErrTooLarge, bytesText(e.Limit), e.Path)
	}
}

// Is reports whether target is ErrTooLarge.
func (e *LimitError) Is(target error) bool { return target == ErrTooLarge }

// bytesText is n in the largest binary unit that keeps it at least 1.
func bytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// largeObject is the size past which a clone's object is streamed from
// disk on export rather than read whole.
const largeObject = 1 << 20

// caps are Options' caps with the defaults applied.
type caps struct {
	file, pack, treeBytes int64
	treeFiles             int
}

func newCaps(o Options) caps {
	c := caps{file: o.MaxFileBytes, pack: o.MaxPackBytes, treeBytes: o.MaxTreeBytes, treeFiles: o.MaxTreeFiles}
	if c.file == 0 {
		c.file = DefaultMaxFileBytes
	}
	if c.pack == 0 {
		c.pack = max(DefaultMaxPackBytes, 2*c.file)
	}
	if c.treeBytes == 0 {
		c.treeBytes = DefaultMaxTreeBytes
	}
	if c.treeFiles == 0 {
		c.treeFiles = DefaultMaxTreeFiles
	}
	return c
}

// cappedStorage is a clone's storage whose received packs are checked
// against the caps while they arrive (see packGuard). Every other method
// is filesystem.Storage's.
type cappedStorage struct {
	*filesystem.Storage
	dir              string // the bare clone, for the temporary pack of a refused fetch
	maxPack, maxFile int64
}

// PackfileWriter is filesystem.Storage's, behind a packGuard.
func (s *cappedStorage) PackfileWriter() (io.WriteCloser, error) {
	w, err := s.Storage.PackfileWriter()
	if err != nil {
		return nil, err
	}
	return newPackGuard(w, s.dir, s.maxPack, s.maxFile), nil
}

// packGuard passes a pack on to go-git's writer while a scanner reads the
// same bytes and checks each object's size from its header, before go-git
// has any reason to hold it: go-git indexes a pack only once it is whole,
// and then reads each object into memory at once. A pack over a cap stops
// at the first write past it, and its temporary file is removed.
//
// It is used by one goroutine, go-git's fetch, which always closes it;
// Close waits for the scanner's goroutine.
type packGuard struct {
	w       io.WriteCloser
	dir     string
	maxPack int64
	n       int64
	scan    *io.PipeWriter
	done    chan error
	err     error
}

func newPackGuard(w io.WriteCloser, dir string, maxPack, maxFile int64) *packGuard {
	r, scan := io.Pipe()
	g := &packGuard{w: w, dir: dir, maxPack: maxPack, scan: scan, done: make(chan error, 1)}
	go func() {
		err := scanPack(r, maxFile)
		// Writes fail with err from now on; after a clean scan the rest
		// (the checksum) is drained so that they do not block.
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		r.CloseWithError(err)
		g.done <- err
	}()
	return g
}

func (g *packGuard) Write(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if g.n += int64(len(p)); g.n > g.maxPack {
		g.err = &LimitError{Cap: CapPack, Size: g.n, Limit: g.maxPack}
		return 0, g.err
	}
	// The scanner sees the bytes first: go-git never gets an object the
	// scanner refused.
	if _, err := g.scan.Write(p); err != nil {
		g.err = err
		return 0, err
	}
	return g.w.Write(p)
}

// Close ends the scan and go-git's pack. A refused pack's error is the
// refusal, not go-git's complaint about the pack it then found cut short.
func (g *packGuard) Close() error {
	_ = g.scan.Close()
	scanErr := <-g.done
	err := g.w.Close()
	var limit *LimitError
	switch {
	case errors.As(g.err, &limit):
		err = g.err
	case errors.As(scanErr, &limit):
		err = scanErr
	default:
		return err
	}
	// go-git leaves the temporary file of a pack it could not index.
	tmp, _ := filepath.Glob(filepath.Join(g.dir, "objects", "pack", "tmp_pack_*"))
	for _, f := range tmp {
		_ = os.Remove(f)
	}
	return err
}

// scanPack reads a pack from r and returns a *LimitError for the first
// object larger than maxFile: a whole object by the size in its header, a
// delta by the size of the object it makes, read from the delta's own
// header. Other problems with the pack are left to go-git, which reads the
// same bytes: scanPack then returns nil.
func scanPack(r io.Reader, maxFile int64) error {
	s := packfile.NewScanner(r)
	_, count, err := s.Header()
	if err != nil {
		return nil
	}
	for range count {
		h, err := s.NextObjectHeader()
		if err != nil {
			return nil
		}
		if h.Length > maxFile {
			return &LimitError{Cap: CapFile, Object: h.Type.String(), Size: h.Length, Limit: maxFile}
		}
		if h.Type != plumbing.OFSDeltaObject && h.Type != plumbing.REFDeltaObject {
			if _, _, err := s.NextObject(io.Discard); err != nil {
				return nil
			}
			continue
		}
		var d deltaHeader
		if _, _, err := s.NextObject(&d); err != nil {
			return nil
		}
		if size, ok := d.target(); ok && size > uint64(maxFile) {
			return &LimitError{Cap: CapFile, Object: "delta-encoded object", Size: int64(min(size, 1<<62)), Limit: maxFile}
		}
	}
	return nil
}

// deltaHeader keeps the first bytes of a delta, which start with the
// sizes of its base and of the object it makes, each a little-endian base
// 128 number (as encoding/binary's Uvarint reads them).
type deltaHeader struct {
	b [2 * binary.MaxVarintLen64]byte
	n int
}

func (d *deltaHeader) Write(p []byte) (int, error) {
	d.n += copy(d.b[d.n:], p)
	return len(p), nil
}

// target is the size of the object the delta makes; ok is false when the
// header is cut short, which go-git reports.
func (d *deltaHeader) target() (uint64, bool) {
	b := d.b[:d.n]
	_, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, false
	}
	size, m := binary.Uvarint(b[n:])
	return size, m > 0
}

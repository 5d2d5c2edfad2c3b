package chartrepo

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"testing/fstest"
)

// limits bounds one extraction.
type limits struct {
	maxBytes int64 // sum of the files' sizes
	maxFiles int   // entries of any type, directories included
}

// extract reads a gzip-compressed tar archive into memory and returns its
// files and the one top-level directory that holds them all (Helm packs a
// chart as <name>/...). Only regular files and directories are accepted:
// an absolute name, a ".." element, a link, a device, a FIFO, a duplicate
// file or an entry past a cap is refused with ErrUnsafeArchive or
// ErrTooLarge. Nothing touches the disk. The caller owns the returned map.
func extract(data []byte, lim limits) (fstest.MapFS, string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("read gzip: %w", err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	files := fstest.MapFS{}
	top := ""
	var total int64
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, "", fmt.Errorf("read tar: %w", err)
		}
		if n >= lim.maxFiles {
			return nil, "", failf(ErrTooLarge, "archive holds more than %d entries", lim.maxFiles)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue // PAX metadata for the whole archive, not a file
		}
		name, err := entryName(h.Name)
		if err != nil {
			return nil, "", err
		}
		first, _, _ := strings.Cut(name, "/")
		switch {
		case top == "":
			top = first
		case first != top:
			return nil, "", failf(ErrUnsafeArchive, "entries %s and %s are not under one top-level directory", top, name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue // MapFS makes the directories its files imply
		case tar.TypeReg:
		default:
			return nil, "", failf(ErrUnsafeArchive, "entry %s is a %s; only files and directories are accepted", name, typeName(h.Typeflag))
		}
		if name == top {
			return nil, "", failf(ErrUnsafeArchive, "entry %s is a file at the top level; want a chart directory", name)
		}
		if _, dup := files[name]; dup {
			return nil, "", failf(ErrUnsafeArchive, "entry %s appears twice", name)
		}
		if h.Size < 0 || h.Size > lim.maxBytes-total {
			return nil, "", failf(ErrTooLarge, "archive content is larger than %s", size(lim.maxBytes))
		}
		body, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if err != nil {
			return nil, "", fmt.Errorf("read tar entry %s: %w", name, err)
		}
		total += int64(len(body))
		files[name] = &fstest.MapFile{Data: body, Mode: 0o444}
	}
	if len(files) == 0 {
		return nil, "", failf(ErrUnsafeArchive, "archive holds no files")
	}
	// A file under one name and a directory under another (a/b and a/b/c)
	// would make MapFS show both; refuse the ambiguity.
	for name := range files {
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if _, ok := files[dir]; ok {
				return nil, "", failf(ErrUnsafeArchive, "entry %s is both a file and a directory", dir)
			}
		}
	}
	return files, top, nil
}

// entryName cleans a tar entry's name into an fs.FS path, refusing one
// that is absolute or climbs out with "..".
func entryName(raw string) (string, error) {
	name := strings.TrimSuffix(strings.TrimPrefix(raw, "./"), "/")
	if strings.HasPrefix(raw, "/") || strings.Contains(raw, `\`) {
		return "", failf(ErrUnsafeArchive, "entry %q is not a relative slash path", raw)
	}
	for _, elem := range strings.Split(name, "/") {
		if elem == ".." {
			return "", failf(ErrUnsafeArchive, "entry %q climbs out of the archive", raw)
		}
	}
	if !fs.ValidPath(name) || name == "." {
		return "", failf(ErrUnsafeArchive, "entry %q is not a clean relative path", raw)
	}
	return name, nil
}

// typeName names a tar entry type for an error.
func typeName(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "FIFO"
	}
	return fmt.Sprintf("entry of type %q", t)
}

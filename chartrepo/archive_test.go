package chartrepo

import (
	"archive/tar"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

var testLimits = limits{maxBytes: 1 << 20, maxFiles: 20}

func TestExtract(t *testing.T) {
	tests := []struct {
		name    string
		entries []tarEntry
		lim     limits
		want    error  // nil: extracted
		wantDir string // for a success
	}{
		{name: "a chart under one top folder, with ./ prefixes", entries: append([]tarEntry{{Name: "./web/files/a", Body: "a"}}, webChart("1.0.0")...), wantDir: "web"},
		{name: "a PAX global header is skipped", entries: append([]tarEntry{{Name: "pax_global_header", Type: tar.TypeXGlobalHeader}}, webChart("1.0.0")...), wantDir: "web"},
		{name: "a symbolic link", entries: []tarEntry{{Name: "web/Chart.yaml", Body: "x"}, {Name: "web/v", Type: tar.TypeSymlink, Linkname: "/etc/passwd"}}, want: ErrUnsafeArchive},
		{name: "a hard link", entries: []tarEntry{{Name: "web/Chart.yaml", Body: "x"}, {Name: "web/v", Type: tar.TypeLink, Linkname: "web/Chart.yaml"}}, want: ErrUnsafeArchive},
		{name: "a character device", entries: []tarEntry{{Name: "web/Chart.yaml", Body: "x"}, {Name: "web/null", Type: tar.TypeChar}}, want: ErrUnsafeArchive},
		{name: "a FIFO", entries: []tarEntry{{Name: "web/Chart.yaml", Body: "x"}, {Name: "web/p", Type: tar.TypeFifo}}, want: ErrUnsafeArchive},
		{name: "an absolute path", entries: []tarEntry{{Name: "/web/Chart.yaml", Body: "x"}}, want: ErrUnsafeArchive},
		{name: "a .. element", entries: []tarEntry{{Name: "web/../x", Body: "x"}}, want: ErrUnsafeArchive},
		{name: "a leading ..", entries: []tarEntry{{Name: "../web/Chart.yaml", Body: "x"}}, want: ErrUnsafeArchive},
		{name: "a backslash", entries: []tarEntry{{Name: `web\..\..\x`, Body: "x"}}, want: ErrUnsafeArchive},
		{name: "two top folders", entries: []tarEntry{{Name: "web/Chart.yaml", Body: "x"}, {Name: "db/Chart.yaml", Body: "x"}}, want: ErrUnsafeArchive},
		{name: "a file at the top level", entries: []tarEntry{{Name: "Chart.yaml", Body: "x"}}, want: ErrUnsafeArchive},
		{name: "a duplicate file", entries: []tarEntry{{Name: "web/a", Body: "x"}, {Name: "web/a", Body: "y"}}, want: ErrUnsafeArchive},
		{name: "a name both file and directory", entries: []tarEntry{{Name: "web/a", Body: "x"}, {Name: "web/a/b", Body: "y"}}, want: ErrUnsafeArchive},
		{name: "no files", entries: []tarEntry{{Name: "web/", Type: tar.TypeDir}}, want: ErrUnsafeArchive},
		{name: "more entries than the cap", entries: webChart("1.0.0"), lim: limits{maxBytes: 1 << 20, maxFiles: 3}, want: ErrTooLarge},
		{name: "more bytes than the cap", entries: webChart("1.0.0"), lim: limits{maxBytes: 40, maxFiles: 20}, want: ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := tt.lim
			if lim == (limits{}) {
				lim = testLimits
			}
			files, dir, err := extract(buildArchive(t, tt.entries), lim)
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("extract = %v, want %v", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if dir != tt.wantDir {
				t.Errorf("dir = %q, want %q", dir, tt.wantDir)
			}
			if _, err := fs.ReadFile(files, dir+"/Chart.yaml"); err != nil {
				t.Errorf("no Chart.yaml: %v", err)
			}
		})
	}
}

func TestExtractRefusesWhatIsNotGzip(t *testing.T) {
	if _, _, err := extract([]byte("not an archive"), testLimits); err == nil || !strings.Contains(err.Error(), "gzip") {
		t.Fatalf("extract = %v, want a gzip error", err)
	}
}

// FuzzExtract checks that extract, on any input, returns an error or files
// that are all valid, relative paths under the returned directory within
// the caps, and never panics.
func FuzzExtract(f *testing.F) {
	seeds := [][]tarEntry{
		webChart("1.0.0"),
		{{Name: "web/Chart.yaml", Body: "x"}, {Name: "web/../../etc/passwd", Body: "x"}},
		{{Name: "web/Chart.yaml", Body: "x"}, {Name: "web/v", Type: tar.TypeSymlink, Linkname: "/etc"}},
	}
	for _, s := range seeds {
		data := buildArchive(f, s)
		if len(data) == 0 {
			f.Fatal("empty seed")
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		files, dir, err := extract(data, testLimits)
		if err != nil {
			return
		}
		var total int64
		for name, file := range files {
			if !fs.ValidPath(name) || !strings.HasPrefix(name, dir+"/") {
				t.Errorf("file %q is not a valid path under %q", name, dir)
			}
			total += int64(len(file.Data))
		}
		if total > testLimits.maxBytes || len(files) > testLimits.maxFiles {
			t.Errorf("extracted %d files, %d bytes: over the caps", len(files), total)
		}
		if err := fstest.TestFS(files, dir); err != nil && len(files) > 0 {
			t.Errorf("extracted files are not a sound fs.FS: %v", err)
		}
	})
}

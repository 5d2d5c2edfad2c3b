package gitsource

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// randomText is n bytes that do not compress, as a built binary or an
// archive in a repository does.
func randomText(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// packFiles lists the packs and the temporary pack files of a clone.
func packFiles(t *testing.T, c *Cache, repoURL string) []string {
	t.Helper()
	r, err := c.repo(repoURL)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(r.dir, "git", "objects", "pack", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// A repository holding a file over a cap is refused while the fetch
// receives it, before go-git holds the object in memory; the refusal is
// final (not transient), keeps nothing of the pack, and another repository
// of the same cache checks out as before.
func TestFetchRefusesARepositoryOverTheCapsAndKeepsNothing(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name    string
		random  map[string]int    // files of random bytes, by size
		files   map[string]string // and others
		opts    Options
		wantCap Cap
		want    string // in the message
	}{
		{
			name:    "a file that does not compress, over the cap on one file",
			random:  map[string]int{"assets/big.bin": 4 * mib},
			opts:    Options{MaxFileBytes: 1 * mib},
			wantCap: CapFile,
			want:    "blob of 4.0 MiB, over the 1.0 MiB cap on one file",
		},
		{
			name:    "a file of zeros, a few KiB in the pack, over the cap on one file",
			files:   map[string]string{"assets/zeros.img": strings.Repeat("\x00", 4*mib)},
			opts:    Options{MaxFileBytes: 1 * mib},
			wantCap: CapFile,
			want:    "blob of 4.0 MiB, over the 1.0 MiB cap on one file",
		},
		{
			name:    "files each under the cap on one file, over the cap on one fetch together",
			random:  map[string]int{"a.bin": 900 << 10, "b.bin": 900 << 10, "c.bin": 900 << 10},
			opts:    Options{MaxFileBytes: 1 * mib, MaxPackBytes: 2 * mib},
			wantCap: CapPack,
			want:    "received more than 2.0 MiB, the cap on one fetch",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{"compose.yaml": "services: {}\n"}
			for name, content := range tc.files {
				files[name] = content
			}
			for name, size := range tc.random {
				files[name] = randomText(t, size)
			}
			big := newTestRepo(t, filepath.Join(root, "big"))
			bigHead := big.commit("add assets", files)
			small := newTestRepo(t, filepath.Join(root, "small"))
			smallHead := small.commit("compose", map[string]string{"compose.yaml": "services: {}\n"})
			server := serveHTTP(t, root, "", "", "")

			c := newCache(t, tc.opts)
			if _, err := c.Resolve(t.Context(), server.URL+"/big", "main"); err != nil {
				t.Fatal(err)
			}
			_, err := c.Checkout(t.Context(), server.URL+"/big", bigHead)
			var limit *LimitError
			if !errors.As(err, &limit) || !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Checkout = %v, want a *LimitError matching ErrTooLarge", err)
			}
			if limit.Cap != tc.wantCap || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Checkout = %v (cap %q), want cap %q and %q", err, limit.Cap, tc.wantCap, tc.want)
			}
			var re *RemoteError
			if !errors.As(err, &re) || re.Transient() {
				t.Errorf("Checkout = %v, want a RemoteError that is not transient", err)
			}
			if files := packFiles(t, c, server.URL+"/big"); len(files) != 0 {
				t.Errorf("the refused fetch left %v", files)
			}
			// Until the remote's refs move, the refusal stands without
			// asking the remote for the pack again.
			fetches := c.Stats().Fetches
			c.Forget(server.URL + "/big")
			if _, err := c.Resolve(t.Context(), server.URL+"/big", "main"); err != nil {
				t.Fatal(err)
			}
			if _, again := c.Checkout(t.Context(), server.URL+"/big", bigHead); !errors.Is(again, ErrTooLarge) || again.Error() != err.Error() {
				t.Errorf("second Checkout = %v, want %v", again, err)
			}
			if n := c.Stats().Fetches - fetches; n != 0 {
				t.Errorf("second Checkout fetched %d times, want the refusal remembered", n)
			}

			tree, err := c.Checkout(t.Context(), server.URL+"/small", smallHead)
			if err != nil {
				t.Fatalf("Checkout of the other repository = %v", err)
			}
			defer tree.Release()
			if data, err := tree.ReadFile("compose.yaml"); err != nil || string(data) != "services: {}\n" {
				t.Errorf("other repository's compose.yaml = %q, %v", data, err)
			}
		})
	}
}

// A clone that already holds a commit (fetched under higher caps, or
// before the caps were lowered) is checked against the caps when its tree
// is exported, and the refusal names the file; no tree is left behind.
func TestCheckoutRefusesATreeOverTheCapsNamingTheFile(t *testing.T) {
	root := t.TempDir()
	repo := newTestRepo(t, filepath.Join(root, "app"))
	head := repo.commit("files", map[string]string{
		"compose.yaml":       "services: {}\n",
		"assets/a.bin":       strings.Repeat("a", 6<<10),
		"assets/b.bin":       strings.Repeat("b", 6<<10),
		"assets/large/c.bin": strings.Repeat("c", 20<<10),
	})
	server := serveHTTP(t, root, "", "", "")
	url := server.URL + "/app"
	dir := t.TempDir()
	warm := newCache(t, Options{Dir: dir})
	tree, err := warm.Checkout(t.Context(), url, head)
	if err != nil {
		t.Fatal(err)
	}
	tree.Release()

	cases := []struct {
		name string
		opts Options
		want string
	}{
		{name: "a file over the cap on one file", opts: Options{MaxFileBytes: 16 << 10},
			want: "assets/large/c.bin is 20.0 KiB, over the 16.0 KiB cap on one file"},
		{name: "files adding up to over the cap on one tree", opts: Options{MaxTreeBytes: 10 << 10},
			want: "the tree's files add up to more than 10.0 KiB, the cap on one tree (at assets/b.bin)"},
		{name: "more files and directories than the cap on one tree", opts: Options{MaxTreeFiles: 3},
			want: "the tree has more than 3 files and directories, the cap on one tree (at assets/large)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Dir = t.TempDir()
			if err := os.CopyFS(tc.opts.Dir, os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			c := newCache(t, tc.opts)
			// Only the clone is kept: the exported tree would be reused.
			r, err := c.repo(url)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(filepath.Join(r.trees.dir, head)); err != nil {
				t.Fatal(err)
			}
			delete(r.trees.entries, head)
			_, err = c.Checkout(t.Context(), url, head)
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Checkout = %v, want ErrTooLarge saying %q", err, tc.want)
			}
			if c.Stats().Fetches != 0 {
				t.Errorf("fetches = %d, want the commit found in the clone", c.Stats().Fetches)
			}
			left, _ := os.ReadDir(r.trees.dir)
			if len(left) != 0 {
				t.Errorf("trees left after the refusal: %v", left)
			}
		})
	}
}

// The size a delta makes is read from its header, as go-git writes one.
func TestDeltaHeaderReadsTheSizeOfTheObjectItMakes(t *testing.T) {
	base, target := &plumbing.MemoryObject{}, &plumbing.MemoryObject{}
	base.SetType(plumbing.BlobObject)
	target.SetType(plumbing.BlobObject)
	baseText := bytes.Repeat([]byte("line of text\n"), 100)
	targetText := append(bytes.Repeat(baseText, 300), "and more\n"...)
	if _, err := base.Write(baseText); err != nil {
		t.Fatal(err)
	}
	if _, err := target.Write(targetText); err != nil {
		t.Fatal(err)
	}
	delta, err := packfile.GetDelta(base, target)
	if err != nil {
		t.Fatal(err)
	}
	r, err := delta.Reader()
	if err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	if _, err := raw.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	var d deltaHeader
	if _, err := d.Write(raw.Bytes()); err != nil {
		t.Fatal(err)
	}
	if size, ok := d.target(); !ok || size != uint64(len(targetText)) {
		t.Errorf("target() = %d, %v, want %d, true", size, ok, len(targetText))
	}
	var cut deltaHeader
	_, _ = cut.Write(raw.Bytes()[:1])
	if _, ok := cut.target(); ok {
		t.Error("target() of a cut header is ok, want not")
	}
}

package gitsource

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A fork's pull request reaches the base repository only as the ref the
// forge keeps for it; no branch or tag of the base names its head, so a
// plain fetch never brings it. FetchRef does, and Checkout and Changed
// then need no fetch of their own.
func TestFetchRefBringsAPullRequestHeadNoBranchNames(t *testing.T) {
	root := t.TempDir()
	h := newHistory(t, filepath.Join(root, "app"))
	r := h.repo
	r.git("checkout", "-q", "-b", "fork", h.head)
	forkHead := r.commit("from a fork", map[string]string{"app/compose.yaml": "services: {web: {image: b}}\n", "NOTES": "n\n"})
	r.git("checkout", "-q", "main")
	r.git("update-ref", "refs/pull/9/head", forkHead)
	r.git("branch", "-D", "fork")
	server := serveHTTP(t, root, "", "", "")
	c := newCache(t, Options{})
	url := server.URL + "/app"

	if _, err := c.Checkout(t.Context(), url, forkHead); !errors.Is(err, ErrRevisionNotFound) {
		t.Fatalf("Checkout of a head only a pull ref names = %v, want ErrRevisionNotFound before FetchRef", err)
	}
	got, err := c.FetchRef(t.Context(), url, "refs/pull/9/head")
	if err != nil || got != forkHead {
		t.Fatalf("FetchRef = %q, %v; want %s", got, err, forkHead)
	}
	fetches := c.Stats().Fetches
	tree, err := c.Checkout(t.Context(), url, forkHead)
	if err != nil {
		t.Fatalf("Checkout after FetchRef: %v", err)
	}
	tree.Release()
	changed, err := c.Changed(t.Context(), url, h.head, forkHead)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"NOTES", "app/compose.yaml"}, changed); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}
	if again, err := c.FetchRef(t.Context(), url, "refs/pull/9/head"); err != nil || again != forkHead {
		t.Errorf("FetchRef again = %q, %v", again, err)
	}
	if n := c.Stats().Fetches; n != fetches {
		t.Errorf("fetches after FetchRef = %d, want %d: the commit was in the clone", n, fetches)
	}
	if _, err := c.FetchRef(t.Context(), url, "refs/pull/10/head"); !errors.Is(err, ErrRevisionNotFound) {
		t.Errorf("FetchRef of a ref not advertised = %v, want ErrRevisionNotFound", err)
	}
	if _, err := c.FetchRef(t.Context(), url, "main:refs/heads/x"); err == nil {
		t.Error("FetchRef took a refspec, want only a ref name")
	}
}

// Changed is what the head brings since it left the base: commits the
// base gained meanwhile are not the pull request's.
func TestChangedListsOnlyWhatTheHeadBringsSinceTheMergeBase(t *testing.T) {
	root := t.TempDir()
	h := newHistory(t, filepath.Join(root, "app"))
	r := h.repo
	r.git("checkout", "-q", "feature")
	head := r.commit("pr", map[string]string{"app/values.yaml": "a: 1\n", "app/compose.yaml": ""})
	r.git("checkout", "-q", "main")
	base := r.commit("base moves on", map[string]string{"other/file": "x\n"})
	server := serveHTTP(t, root, "", "", "")
	c := newCache(t, Options{})
	url := server.URL + "/app"
	got, err := c.Changed(t.Context(), url, base, head)
	if err != nil {
		t.Fatal(err)
	}
	// feature branched at "tagged" and changed README, then this change.
	want := []string{"README", "app/compose.yaml", "app/values.yaml"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Changed (-want +got):\n%s", diff)
	}
	if n := c.Stats().Fetches; n != 1 {
		t.Errorf("fetches = %d, want the one that brought both commits", n)
	}
	if _, err := c.Changed(t.Context(), url, "main", head); err == nil {
		t.Error("Changed took a branch name, want full shas only")
	}
}

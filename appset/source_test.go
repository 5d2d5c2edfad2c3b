package appset

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/configfile"
)

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const validWeb = "apiVersion: skep/v1\napplications:\n  - {name: web, source: {repo: /r}}\n"

func TestFileSourceRevisionFollowsContent(t *testing.T) {
	name := filepath.Join(t.TempDir(), "applications.yaml")
	writeFile(t, name, validWeb)
	src := FileSource{Path: name}

	set, rev1, err := src.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"web"}, set.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if _, again, _ := src.Load(t.Context()); again != rev1 {
		t.Errorf("revision moved without a change: %s then %s", rev1, again)
	}

	writeFile(t, name, validWeb+"  - {name: api, source: {repo: /r}}\n")
	_, rev2, err := src.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rev2 == rev1 {
		t.Errorf("revision %s did not change with the content", rev1)
	}
}

func TestFileSourceReportsProblemsWithTheFilePathAndRevision(t *testing.T) {
	name := filepath.Join(t.TempDir(), "applications.yaml")
	writeFile(t, name, "apiVersion: skep/v1\napplications:\n  - {name: web}\n")
	set, rev, err := FileSource{Path: name}.Load(t.Context())
	var problems configfile.Problems
	if !errors.As(err, &problems) || set != nil {
		t.Fatalf("Load = %v, %v; want configfile.Problems and no set", set, err)
	}
	if problems[0].File != name || rev == "" {
		t.Errorf("problem file %q, revision %q; want %q and a revision", problems[0].File, rev, name)
	}
}

func TestFileSourceMissingFileIsNotProblems(t *testing.T) {
	_, _, err := FileSource{Path: filepath.Join(t.TempDir(), "nope.yaml")}.Load(t.Context())
	var problems configfile.Problems
	if !errors.Is(err, fs.ErrNotExist) || errors.As(err, &problems) {
		t.Errorf("Load(missing) = %v, want a not-exist error that is not configfile.Problems", err)
	}
}

func TestDirSourceMergesFilesAndNamesEachInProblems(t *testing.T) {
	set, rev, err := DirSource{Dir: "testdata/dir-valid"}.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"web", "api"}, set.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if rev == "" {
		t.Error("no revision")
	}

	_, _, err = DirSource{Dir: "testdata/dir-duplicate"}.Load(t.Context())
	var problems configfile.Problems
	if !errors.As(err, &problems) {
		t.Fatalf("Load(dir-duplicate) = %v, want configfile.Problems", err)
	}
	want := configfile.Problems{{
		File: filepath.Join("testdata/dir-duplicate", "b.yaml"), Line: 5, Column: 11, Field: "applications[1].name",
		Message: `name "web" is already used by applications[0] at testdata/dir-duplicate/a.yaml:3:11`,
	}}
	if diff := cmp.Diff(want, problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestDirSourceFollowsLinksOnlyInsideTheDirectory(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "apps.yaml"), validWeb)

	inside := t.TempDir()
	// A mounted ConfigMap: the file is a link into a hidden directory.
	if err := os.Mkdir(filepath.Join(inside, "..data"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(inside, "..data", "apps.yaml"), validWeb)
	if err := os.Symlink("..data/apps.yaml", filepath.Join(inside, "apps.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (DirSource{Dir: inside}).Load(t.Context()); err != nil {
		t.Fatalf("link inside the directory: %v", err)
	}

	if err := os.Symlink(filepath.Join(outside, "apps.yaml"), filepath.Join(inside, "escape.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (DirSource{Dir: inside}).Load(t.Context()); err == nil {
		t.Error("a link leaving the directory was followed")
	}
}

func TestSourcesStopOnACancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, src := range []Source{FileSource{Path: "testdata/valid/minimal.yaml"}, DirSource{Dir: "testdata/dir-valid"}} {
		if _, _, err := src.Load(ctx); err == nil {
			t.Errorf("%T.Load(cancelled) succeeded", src)
		}
	}
}

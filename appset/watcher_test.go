package appset

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/configfile"
)

// loadResult is what a scriptedSource returns from one Load.
type loadResult struct {
	set      *Set
	revision string
	err      error
}

// scriptedSource returns its results in order, then the last one forever.
type scriptedSource struct {
	mu      sync.Mutex
	results []loadResult
	calls   int
}

func (s *scriptedSource) Load(context.Context) (*Set, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.results[min(s.calls, len(s.results)-1)]
	s.calls++
	return r.set, r.revision, r.err
}

// valid returns a result holding a set of the named applications, with
// revision rev.
func valid(t *testing.T, rev string, names ...string) loadResult {
	t.Helper()
	doc := "apiVersion: skep/v1\napplications:\n"
	for _, n := range names {
		doc += fmt.Sprintf("  - {name: %s, source: {repo: /r}}\n", n)
	}
	set, err := Parse(rev+".yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return loadResult{set: set, revision: rev}
}

func invalid(rev string) loadResult {
	return loadResult{revision: rev, err: configfile.Problems{{File: "applications.yaml", Line: 3, Message: "bad at " + rev}}}
}

// view is the comparable part of a Snapshot.
type view struct {
	Names       []string
	Revision    string
	Err         string
	ErrRevision string
	Stale       bool
}

func viewOf(s Snapshot) view {
	return view{Names: s.Set.Names(), Revision: s.Revision, Err: errorText(s.Err), ErrRevision: s.ErrRevision, Stale: s.Stale}
}

func TestWatcherSwapsOnlyValidSets(t *testing.T) {
	unreadable := loadResult{err: errors.New("read app set: permission denied")}
	steps := []struct {
		name        string
		load        loadResult
		wantChanged bool
		want        view
	}{
		{
			name: "a first load that fails leaves no set and is not stale",
			load: unreadable,
			want: view{Err: "read app set: permission denied"},
		},
		{
			name:        "a first valid set is swapped in",
			load:        valid(t, "r1", "web"),
			wantChanged: true,
			want:        view{Names: []string{"web"}, Revision: "r1"},
		},
		{
			name: "the same revision again changes nothing",
			load: valid(t, "r1", "web"),
			want: view{Names: []string{"web"}, Revision: "r1"},
		},
		{
			name: "an invalid set keeps the last good one and marks it stale",
			load: invalid("r2"),
			want: view{Names: []string{"web"}, Revision: "r1", Err: "applications.yaml:3: bad at r2", ErrRevision: "r2", Stale: true},
		},
		{
			name: "an unreadable source keeps the last good set too",
			load: unreadable,
			want: view{Names: []string{"web"}, Revision: "r1", Err: "read app set: permission denied", Stale: true},
		},
		{
			name: "returning to the running revision clears the error without a swap",
			load: valid(t, "r1", "web"),
			want: view{Names: []string{"web"}, Revision: "r1"},
		},
		{
			name:        "a new valid revision is swapped in",
			load:        valid(t, "r3", "web", "api"),
			wantChanged: true,
			want:        view{Names: []string{"web", "api"}, Revision: "r3"},
		},
	}
	src := &scriptedSource{}
	w := NewWatcher(src)
	if got := viewOf(w.Current()); !cmp.Equal(got, view{}) {
		t.Fatalf("new Watcher holds %+v, want nothing", got)
	}
	for _, step := range steps {
		src.results = []loadResult{step.load}
		src.calls = 0
		changed, err := w.Reload(t.Context())
		if (err != nil) != (step.load.err != nil) {
			t.Fatalf("%s: Reload error = %v, want %v", step.name, err, step.load.err)
		}
		if changed != step.wantChanged {
			t.Errorf("%s: Reload changed = %t, want %t", step.name, changed, step.wantChanged)
		}
		if diff := cmp.Diff(step.want, viewOf(w.Current())); diff != "" {
			t.Errorf("%s: snapshot (-want +got):\n%s", step.name, diff)
		}
	}
}

// The controller loads an app set of generators alone as a file and as a
// directory, and swaps it in: applications defaults to [].
func TestWatcherLoadsAnAppSetOfGeneratorsAlone(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "applications.yaml"), generatorsOnly)
	for _, src := range []Source{FileSource{Path: filepath.Join(dir, "applications.yaml")}, DirSource{Dir: dir}} {
		w := NewWatcher(src)
		changed, err := w.Reload(t.Context())
		if err != nil || !changed {
			t.Fatalf("%T: Reload = %t, %v; want a new set", src, changed, err)
		}
		snap := w.Current()
		if snap.Set == nil || snap.Set.Len() != 0 || len(snap.Set.Generators()) != 1 || snap.Err != nil {
			t.Errorf("%T: snapshot %+v, want the set with its one generator and no error", src, viewOf(snap))
		}
	}
}

const generatorsOnly = `apiVersion: skep/v1
generators:
  - {name: stacks, repo: /srv/git/stacks, directories: ["stacks/*"]}
`

func TestWatcherKeepsTheSameSetForTheSameRevision(t *testing.T) {
	first, second := valid(t, "r1", "web"), valid(t, "r1", "web")
	w := NewWatcher(&scriptedSource{results: []loadResult{first, second}})
	for range 2 {
		if _, err := w.Reload(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if w.Current().Set != first.set {
		t.Error("an equal revision replaced the set callers already hold")
	}
}

// TestWatcherSnapshotsAreWhole runs readers against reloads that flip
// between two sets; under -race it also checks the swap is race-free.
func TestWatcherSnapshotsAreWhole(t *testing.T) {
	a, b := valid(t, "a", "a"), valid(t, "b", "b")
	src := &scriptedSource{}
	for range 200 {
		src.results = append(src.results, a, b)
	}
	w := NewWatcher(src)
	if _, err := w.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				s := w.Current()
				if names := s.Set.Names(); len(names) != 1 || names[0] != s.Revision {
					errs <- fmt.Sprintf("snapshot revision %q holds %v", s.Revision, names)
					return
				}
			}
		})
	}
	var reloads sync.WaitGroup
	for range 2 {
		reloads.Go(func() {
			for range 200 {
				if _, err := w.Reload(ctx); err != nil {
					errs <- err.Error()
					return
				}
			}
		})
	}
	reloads.Wait()
	cancel()
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestWatcherRunReportsEachNewOutcomeOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &scriptedSource{results: []loadResult{
			valid(t, "r1", "web"), // reported: the first outcome
			valid(t, "r1", "web"), // same: quiet
			invalid("r2"),         // reported: an error appeared
			invalid("r2"),         // same error: quiet
			valid(t, "r3", "api"), // reported: a new set
		}}
		w := NewWatcher(src)
		var got []view
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.Run(ctx, time.Minute, func(s Snapshot) { got = append(got, viewOf(s)) })
		}()
		for range 5 {
			synctest.Wait()
			time.Sleep(time.Minute)
		}
		// The reloads are on the interval's grid (package tickgrid): the
		// first comes between half an interval and one and a half after
		// the start, so five and a half intervals hold exactly five.
		time.Sleep(30 * time.Second)
		synctest.Wait()
		cancel()
		<-done

		want := []view{
			{Names: []string{"web"}, Revision: "r1"},
			{Names: []string{"web"}, Revision: "r1", Err: "applications.yaml:3: bad at r2", ErrRevision: "r2", Stale: true},
			{Names: []string{"api"}, Revision: "r3"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("onChange calls (-want +got):\n%s", diff)
		}
		if src.calls != 6 {
			t.Errorf("Run loaded %d times in 5.5 intervals, want 6", src.calls)
		}
	})
}

func TestWatcherWakeReloadsBeforeTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &scriptedSource{results: []loadResult{valid(t, "r1", "web"), valid(t, "r2", "web", "api")}}
		w := NewWatcher(src)
		var got []view
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.Run(ctx, time.Hour, func(s Snapshot) { got = append(got, viewOf(s)) })
		}()
		synctest.Wait() // the first load ran; Run now waits an hour
		w.Wake()
		synctest.Wait()
		cancel()
		<-done

		want := []view{
			{Names: []string{"web"}, Revision: "r1"},
			{Names: []string{"web", "api"}, Revision: "r2"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("onChange calls (-want +got):\n%s", diff)
		}
		if src.calls != 2 {
			t.Errorf("Run loaded %d times after one wake within the hour, want 2 (the start and the wake)", src.calls)
		}
	})
}

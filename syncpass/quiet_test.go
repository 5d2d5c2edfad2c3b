package syncpass

import (
	"errors"
	"testing"
	"time"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/stack"
	"github.com/skep-cd/skep/swarm"
)

// TestQuietKeyNamesEverythingAPlainPassReads: equal keys mean a pass would
// conclude the same; a key is "" whenever a pass must run in full.
func TestQuietKeyNamesEverythingAPlainPassReads(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	env := Env{Owner: "c1", Live: swarm.NewWatcher(nil, swarm.WatcherOptions{})}
	app := appset.Application{Name: "web", Release: "web", Source: appset.AppSource{Repo: "https://git.example/web.git", Revision: "main"}}
	own := func(version uint64) dswarm.Service {
		return dswarm.Service{ID: "s1", Meta: dswarm.Meta{Version: dswarm.Version{Index: version}},
			Spec: dswarm.ServiceSpec{Annotations: dswarm.Annotations{Name: "web_api", Labels: map[string]string{stack.LabelNamespace: "web"}}}}
	}
	other := func(version uint64) dswarm.Service {
		return dswarm.Service{ID: "s2", Meta: dswarm.Meta{Version: dswarm.Version{Index: version}},
			Spec: dswarm.ServiceSpec{Annotations: dswarm.Annotations{Name: "shop_api", Labels: map[string]string{stack.LabelNamespace: "shop"}}}}
	}
	record := dswarm.Config{ID: "r1", Meta: dswarm.Meta{Version: dswarm.Version{Index: 7}}, Spec: dswarm.ConfigSpec{Annotations: dswarm.Annotations{
		Name: "web-rev-1", Labels: map[string]string{stack.LabelKind: "revision", stack.LabelController: "c1", stack.LabelApplication: "web"}}}}
	snap := func(version uint64, services []dswarm.Service, configs ...dswarm.Config) swarm.Snapshot {
		return swarm.NewSnapshot(swarm.Contents{Services: services, Configs: configs, TakenAt: at, Version: version})
	}
	base := Input{App: app, Live: snap(1, []dswarm.Service{own(1), other(1)}, record), SeenWrites: true}
	d := desired{commit: "c1", source: app.Source}
	key := func(in Input, d desired) string {
		var qi quietInputs
		return quietKey(env, in, d, &qi)
	}
	want := key(base, d)
	if want == "" {
		t.Fatal("a plain pass at rest has no quiet key")
	}
	with := func(f func(*Input)) Input { in := base; f(&in); return in }
	for _, tc := range []struct {
		name  string
		in    Input
		d     desired
		equal bool // the key equals the base one; false: differs (or is "")
		empty bool
	}{
		{name: "the same inputs give the same key", in: base, d: d, equal: true},
		{name: "another stack's deploy keeps the key", in: with(func(in *Input) { in.Live = snap(2, []dswarm.Service{own(1), other(2)}, record) }), d: d, equal: true},
		{name: "a change of the application's own service moves the key", in: with(func(in *Input) { in.Live = snap(2, []dswarm.Service{own(2), other(1)}, record) }), d: d},
		{name: "a new recorded revision moves the key", in: with(func(in *Input) {
			r := record
			r.Version.Index = 8
			in.Live = snap(2, []dswarm.Service{own(1), other(1)}, r)
		}), d: d},
		{name: "a new commit moves the key", in: base, d: desired{commit: "c2", source: app.Source}},
		{name: "a new definition moves the key", in: with(func(in *Input) { in.App.SyncPolicy.Automated = true }), d: d},
		{name: "a requested sync runs in full", in: with(func(in *Input) { in.Ask.Sync = true }), d: d, empty: true},
		{name: "a held revision runs in full", in: with(func(in *Input) { in.Ask.Revision = "c0" }), d: d, empty: true},
		{name: "a forced deploy runs in full", in: with(func(in *Input) { in.Ask.Force = true }), d: d, empty: true},
		{name: "a sync that sets prune runs in full", in: with(func(in *Input) { in.Ask.Prune = new(bool) }), d: d, empty: true},
		{name: "one release of a release file runs in full", in: with(func(in *Input) { in.Ask.Release = true }), d: d, empty: true},
		{name: "an application with previews runs in full", in: with(func(in *Input) { in.Previews = 1 }), d: d, empty: true},
		{name: "an artifact that previews branches runs in full", in: base,
			d: desired{commit: "c1", source: app.Source, artifacts: []artifact.Object{{Entry: artifact.Entry{Name: "web", Deploy: artifact.Deploy{Preview: true}}}}}, empty: true},
		{name: "a snapshot that failed runs in full", in: with(func(in *Input) {
			in.Live = swarm.NewSnapshot(swarm.Contents{TakenAt: at, Err: errors.New("swarm does not answer")})
		}), d: d, empty: true},
		{name: "a snapshot that has not seen the application's last write runs in full", in: with(func(in *Input) { in.SeenWrites = false }), d: d, empty: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := key(tc.in, tc.d)
			switch {
			case tc.empty && got != "":
				t.Errorf("key = %q, want none", got)
			case !tc.empty && got == "":
				t.Error("no key, want one")
			case tc.equal != (got == want):
				t.Errorf("key equals the base one: %t, want %t", got == want, tc.equal)
			}
		})
	}
	t.Run("without a live snapshot a pass runs in full", func(t *testing.T) {
		var qi quietInputs
		if got := quietKey(Env{}, base, d, &qi); got != "" {
			t.Errorf("key = %q, want none", got)
		}
	})
}

// TestQuietInputsAreKeptForOneGeneration: the costly parts of the key are
// computed once per app-set generation and snapshot, and not kept at all
// for generation 0.
func TestQuietInputsAreKeptForOneGeneration(t *testing.T) {
	env := Env{Owner: "c1", Live: swarm.NewWatcher(nil, swarm.WatcherOptions{})}
	in := Input{App: appset.Application{Name: "web", Release: "web"}, SeenWrites: true,
		Live: swarm.NewSnapshot(swarm.Contents{TakenAt: time.Unix(1, 0), Version: 3})}
	qi := quietInputs{gen: 5}
	first := quietKey(env, in, desired{commit: "c1"}, &qi)
	if qi.definition == "" || qi.own.state == "" || qi.own.version != 3 {
		t.Fatalf("quiet inputs kept = %+v, want the definition and the own state of version 3", qi)
	}
	if again := quietKey(env, in, desired{commit: "c1"}, &qi); again != first {
		t.Errorf("a second key from the kept inputs = %q, want %q", again, first)
	}
	none := quietInputs{}
	quietKey(env, in, desired{commit: "c1"}, &none)
	if none.definition != "" || none.own.state != "" {
		t.Errorf("generation 0 kept %+v, want nothing", none)
	}
}

package syncpass

import (
	"errors"
	"slices"
	"strconv"
	"testing"

	dswarm "github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/apply"
	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/stack"
)

// release is a fixture release of services in the waves given, with hooks
// at the phases given.
func release(waves map[string]int, hooks ...stack.HookPhase) stack.Release {
	rel := stack.Release{Name: "web", Services: map[string]dswarm.ServiceSpec{}}
	for name, w := range waves {
		rel.Services["web_"+name] = dswarm.ServiceSpec{Annotations: dswarm.Annotations{Name: "web_" + name,
			Labels: map[string]string{stack.LabelWave: strconv.Itoa(w)}}}
	}
	for i, p := range hooks {
		rel.Hooks = append(rel.Hooks, stack.Hook{Service: "hook" + strconv.Itoa(i), Phase: p})
	}
	return rel
}

// TestWritePlan: the order of a sync is data. Each case names what a
// release holds and the steps that write it, in order.
func TestWritePlan(t *testing.T) {
	waitApp := appset.Application{Name: "web", Release: "web"}
	waitApp.SyncPolicy.Wait = true
	plain := appset.Application{Name: "web", Release: "web"}
	rollsBack := plain
	rollsBack.SyncPolicy.Rollback = appset.RollbackRelease
	creating := &chartRender{create: []apply.RequiredNetwork{{Name: "shared"}}}
	for _, tc := range []struct {
		name     string
		app      appset.Application
		rel      stack.Release
		chart    *chartRender
		recorded bool
		live     bool
		self     bool
		want     []string
	}{
		{name: "a release without a live snapshot is announced, then written whole",
			app: plain, rel: release(map[string]int{"api": 0}),
			want: []string{"announce", "release"}},
		{name: "with a live snapshot, what a renamed application left is re-stamped first",
			app: plain, rel: release(map[string]int{"api": 0}), live: true,
			want: []string{"restamp", "announce", "release"}},
		{name: "a policy that waits waits for health after the release",
			app: waitApp, rel: release(map[string]int{"api": 0}), live: true,
			want: []string{"restamp", "announce", "release", "wait"}},
		{name: "pre-sync hooks run after the configs, networks and secrets and before any service",
			app: plain, rel: release(map[string]int{"api": 0}, stack.PreSync), live: true,
			want: []string{"restamp", "announce", "configs", "pre-sync", "release"}},
		{name: "post-sync hooks run after the release and its wait",
			app: waitApp, rel: release(map[string]int{"api": 0}, stack.PostSync), live: true,
			want: []string{"restamp", "announce", "release", "wait", "post-sync"}},
		{name: "each earlier wave is written and waited for before the next; the last goes with the whole release",
			app: plain, rel: release(map[string]int{"db": 0, "api": 1, "web": 2}), live: true,
			want: []string{"restamp", "announce", "wave 0", "wait wave 0", "wave 1", "wait wave 1", "release"}},
		{name: "a recorded chart is checked to render the same twice before anything",
			app: plain, rel: release(map[string]int{"api": 0}), chart: &chartRender{}, recorded: true, live: true,
			want: []string{"stable", "restamp", "announce", "release"}},
		{name: "a chart's first deploy is not checked for stability",
			app: plain, rel: release(map[string]int{"api": 0}), chart: &chartRender{},
			want: []string{"announce", "release"}},
		{name: "networks a chart's requirements create come first after the announce",
			app: plain, rel: release(map[string]int{"api": 0}), chart: creating,
			want: []string{"announce", "required", "release"}},
		{name: "the controller's own service is written last, after the hooks",
			app: waitApp, rel: release(map[string]int{"api": 0}, stack.PostSync), live: true, self: true,
			want: []string{"restamp", "announce", "release", "wait", "post-sync", "self"}},
		{name: "a release rollback waits for health, even without wait, and rolls back after the wait",
			app: rollsBack, rel: release(map[string]int{"db": 0, "api": 1}), live: true,
			want: []string{"restamp", "announce", "wave 0", "wait wave 0", "release", "wait", "rollback"}},
		{name: "a release rollback comes before the post-sync hooks and the controller's own service",
			app: rollsBack, rel: release(map[string]int{"api": 0}, stack.PostSync), live: true, self: true,
			want: []string{"restamp", "announce", "release", "wait", "rollback", "post-sync", "self"}},
		{name: "without a live snapshot there is nothing to wait on nor roll back",
			app: rollsBack, rel: release(map[string]int{"api": 0}),
			want: []string{"announce", "release"}},
		{name: "everything at once, in its order",
			app: waitApp, rel: release(map[string]int{"db": 0, "api": 1}, stack.PreSync, stack.PostSync), chart: creating, recorded: true, live: true, self: true,
			want: []string{"stable", "restamp", "announce", "required", "configs", "pre-sync", "wave 0", "wait wave 0", "release", "wait", "post-sync", "self"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range writePlan(tc.app, tc.rel, tc.chart, tc.recorded, tc.live, tc.self) {
				got = append(got, s.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("writePlan = %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestEveryWritingStepAsksTheFence: before a step that writes, a refused
// fence stops the plan with ErrFenced; the stable check and the waits
// write nothing and pass.
func TestEveryWritingStepAsksTheFence(t *testing.T) {
	why := errors.New("lease expired")
	env := Env{Fleet: Fleet{Fence: func() error { return why }}}
	for kind := stepStable; kind <= stepSelf; kind++ {
		s := writeStep{kind: kind}
		err := env.fenceStep(s)
		writes := kind != stepStable && kind != stepWaitWave && kind != stepWait
		if writes != errors.Is(err, ErrFenced) || writes && !errors.Is(err, why) {
			t.Errorf("step %s under a refused fence = %v, want refused %v", s, err, writes)
		}
	}
	if err := (Env{}).fenceStep(writeStep{kind: stepRelease}); err != nil {
		t.Errorf("a loop without a fence refused a step: %v", err)
	}
}

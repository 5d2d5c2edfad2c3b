package prune

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/stack"
)

type networkSpec = network.CreateOptions

var owner = stack.Owner{Controller: "ctl-a", Application: "shop", Release: "shop"}

func labels(o stack.Owner, extra ...string) map[string]string {
	l := o.Labels()
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

func service(name string, mounts ...string) swarm.ServiceSpec {
	cs := &swarm.ContainerSpec{Image: "img"}
	for _, m := range mounts {
		cs.Mounts = append(cs.Mounts, mount.Mount{Type: mount.TypeVolume, Source: m, Target: "/" + m})
	}
	return swarm.ServiceSpec{Annotations: swarm.Annotations{Name: name}, TaskTemplate: swarm.TaskSpec{ContainerSpec: cs}}
}

func release(services ...swarm.ServiceSpec) stack.Release {
	r := stack.Release{Name: "shop", Services: map[string]swarm.ServiceSpec{}}
	for _, s := range services {
		r.Services[s.Name] = s
	}
	return r
}

func TestOrphansDecisions(t *testing.T) {
	other := stack.Owner{Controller: "ctl-b", Application: "shop", Release: "shop"}
	oldApp := stack.Owner{Controller: "ctl-a", Application: "shop-old", Release: "shop"}
	liveApp := stack.Owner{Controller: "ctl-a", Application: "billing", Release: "shop"}
	recorded := release(service("shop_web"), service("shop_old", "shop_data"), service("shop_gone"))
	recorded.Configs = map[string]swarm.ConfigSpec{"shop_conf-abc": {}}
	base := Input{
		Owner:        owner,
		Declared:     release(service("shop_web")),
		Recorded:     []Record{{Application: "shop", Release: recorded}},
		Applications: []string{"shop", "billing"},
	}
	for _, tc := range []struct {
		name   string
		modify func(*Input)
		obj    Object
		want   Decision
	}{
		{"an owned, recorded, undeclared service is deleted", nil,
			Object{Kind: KindService, ID: "1", Name: "shop_old", Labels: labels(owner)}, Delete},
		{"a declared service is kept", nil,
			Object{Kind: KindService, ID: "1", Name: "shop_web", Labels: labels(owner)}, Keep},
		{"a service made by hand in the namespace is unmanaged", nil,
			Object{Kind: KindService, ID: "1", Name: "shop_old", Labels: map[string]string{stack.LabelNamespace: "shop"}}, Unmanaged},
		{"an unlabelled service named into the namespace is unmanaged", nil,
			Object{Kind: KindService, ID: "1", Name: "shop_old"}, Unmanaged},
		{"another controller's service is unmanaged", nil,
			Object{Kind: KindService, ID: "1", Name: "shop_old", Labels: labels(other)}, Unmanaged},
		{"another live application's service is unmanaged", nil,
			Object{Kind: KindService, ID: "1", Name: "shop_old", Labels: labels(liveApp)}, Unmanaged},
		{"an owned service no revision lists is unmanaged", nil,
			Object{Kind: KindService, ID: "1", Name: "shop_never", Labels: labels(owner)}, Unmanaged},
		{"a revision of another application proves nothing",
			func(in *Input) { in.Recorded[0].Application = "billing" },
			Object{Kind: KindService, ID: "1", Name: "shop_old", Labels: labels(owner)}, Unmanaged},
		{"a revision of another release proves nothing",
			func(in *Input) { in.Recorded[0].Release.Name = "other" },
			Object{Kind: KindService, ID: "1", Name: "shop_old", Labels: labels(owner)}, Unmanaged},
		{"a revision config is kept", nil,
			Object{Kind: KindConfig, ID: "1", Name: "skep-rev-shop-3", Labels: labels(owner, stack.LabelKind, "revision")}, Keep},
		{"an owned recorded config is deleted", nil,
			Object{Kind: KindConfig, ID: "1", Name: "shop_conf-abc", Labels: labels(owner)}, Delete},
		{"a config a declared service refers to is kept",
			func(in *Input) {
				s := service("shop_web")
				s.TaskTemplate.ContainerSpec.Configs = []*swarm.ConfigReference{{ConfigName: "shop_conf-abc"}}
				in.Declared = release(s)
			},
			Object{Kind: KindConfig, ID: "1", Name: "shop_conf-abc", Labels: labels(owner)}, Keep},
		{"a volume is kept without pruneVolumes", nil,
			Object{Kind: KindVolume, ID: "shop_data", Name: "shop_data", Labels: labels(owner)}, Keep},
		{"a volume is deleted with pruneVolumes",
			func(in *Input) { in.PruneVolumes = true },
			Object{Kind: KindVolume, ID: "shop_data", Name: "shop_data", Labels: labels(owner)}, Delete},
		{"a volume with only the namespace label is unmanaged even with pruneVolumes",
			func(in *Input) { in.PruneVolumes = true },
			Object{Kind: KindVolume, ID: "shop_data", Name: "shop_data", Labels: map[string]string{stack.LabelNamespace: "shop"}}, Unmanaged},
		{"the controller's own stack is kept",
			func(in *Input) { in.OwnStack = "shop" },
			Object{Kind: KindService, ID: "1", Name: "shop_old", Labels: labels(owner)}, Keep},
		{"a renamed application's service is re-stamped, not deleted", nil,
			Object{Kind: KindService, ID: "1", Name: "shop_old", Labels: labels(oldApp)}, Restamp},
		{"a renamed application's revision config is re-stamped", nil,
			Object{Kind: KindConfig, ID: "1", Name: "skep-rev-shop-1", Labels: labels(oldApp, stack.LabelKind, "revision")}, Restamp},
		{"an application leaving the app set does not re-stamp",
			func(in *Input) { in.Applications = []string{"billing"} },
			Object{Kind: KindService, ID: "1", Name: "shop_old", Labels: labels(oldApp)}, Unmanaged},
		{"an owner without controller id proves nothing",
			func(in *Input) { in.Owner.Controller = "" },
			Object{Kind: KindService, ID: "1", Name: "shop_old", Labels: labels(stack.Owner{Application: "shop", Release: "shop"})}, Unmanaged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			in.Recorded = slices.Clone(base.Recorded)
			if tc.modify != nil {
				tc.modify(&in)
			}
			in.Live = []Object{tc.obj}
			p := Orphans(in)
			if len(p.Items) != 1 {
				t.Fatalf("Orphans() has %d items, want 1: %+v", len(p.Items), p.Items)
			}
			if got := p.Items[0].Decision; got != tc.want {
				t.Errorf("Orphans() decided %s (%s), want %s", got, p.Items[0].Reason, tc.want)
			}
		})
	}
}

func TestOrphansIgnoresObjectsOutsideTheNamespace(t *testing.T) {
	in := Input{
		Owner:    owner,
		Recorded: []Record{{Application: "shop", Release: release(service("shopfront_web"), service("shop_web"))}},
		Live: []Object{
			{Kind: KindService, ID: "1", Name: "shopfront_web", Labels: labels(stack.Owner{Controller: "ctl-a", Application: "shop", Release: "shopfront"})},
			{Kind: KindService, ID: "2", Name: "shop_web", Labels: labels(owner)},
		},
	}
	p := Orphans(in)
	want := []Item{{Object: in.Live[1], Decision: Delete, Reason: "no longer declared"}}
	if diff := cmp.Diff(want, p.Items); diff != "" {
		t.Errorf("Orphans() items mismatch (-want +got):\n%s", diff)
	}
}

func TestOrphansOrdersServicesFirst(t *testing.T) {
	rec := release(service("shop_b", "shop_v"))
	rec.Networks = map[string]networkSpec{"shop_net": {}}
	rec.Configs = map[string]swarm.ConfigSpec{"shop_c": {}}
	rec.Secrets = map[string]swarm.SecretSpec{"shop_s": {}}
	var live []Object
	for _, o := range []struct {
		k    Kind
		name string
	}{{KindVolume, "shop_v"}, {KindSecret, "shop_s"}, {KindNetwork, "shop_net"}, {KindConfig, "shop_c"}, {KindService, "shop_b"}} {
		live = append(live, Object{Kind: o.k, ID: o.name, Name: o.name, Labels: labels(owner)})
	}
	p := Orphans(Input{Owner: owner, Live: live, PruneVolumes: true, Recorded: []Record{{Application: "shop", Release: rec}}})
	var got []string
	for _, o := range p.Deletions() {
		got = append(got, string(o.Kind)+":"+o.Name)
	}
	want := []string{"service:shop_b", "network:shop_net", "config:shop_c", "secret:shop_s", "volume:shop_v"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Deletions() order mismatch (-want +got):\n%s", diff)
	}
}

// TestOrphansNeverDeleteWithoutFullProof builds random namespaces mixing
// owned, foreign, other-controller, other-application, renamed, revision,
// declared and unrecorded objects, and checks every Delete against the
// proof computed independently here, and that every provable orphan is
// deleted.
func TestOrphansNeverDeleteWithoutFullProof(t *testing.T) {
	kinds := []Kind{KindService, KindNetwork, KindConfig, KindSecret, KindVolume}
	rng := rand.New(rand.NewPCG(4, 2))
	deleted, restamped, unmanaged := 0, 0, 0
	for round := range 3000 {
		in := Input{
			Owner:        owner,
			PruneVolumes: rng.IntN(2) == 0,
			Applications: []string{"shop", "billing"},
		}
		if rng.IntN(10) == 0 {
			in.OwnStack = "shop"
		}
		if rng.IntN(10) == 0 {
			in.Applications = []string{"billing"} // the owner itself left
		}
		declared := stack.Release{Name: "shop", Services: map[string]swarm.ServiceSpec{}}
		rec := stack.Release{Name: "shop", Services: map[string]swarm.ServiceSpec{}}
		otherRec := stack.Release{Name: "shop", Services: map[string]swarm.ServiceSpec{}}
		// The proof is checked against these sets, kept here, not against
		// what Orphans derives from the releases.
		declNames, recNames := map[Kind]map[string]bool{}, map[Kind]map[string]bool{}
		add := func(r *stack.Release, k Kind, name string) {
			for _, set := range []struct {
				rel   *stack.Release
				names map[Kind]map[string]bool
			}{{&declared, declNames}, {&rec, recNames}} {
				if set.rel == r {
					if set.names[k] == nil {
						set.names[k] = map[string]bool{}
					}
					set.names[k][name] = true
				}
			}
			switch k {
			case KindService:
				r.Services[name] = service(name)
			case KindNetwork:
				if r.Networks == nil {
					r.Networks = map[string]networkSpec{}
				}
				r.Networks[name] = networkSpec{}
			case KindConfig:
				if r.Configs == nil {
					r.Configs = map[string]swarm.ConfigSpec{}
				}
				r.Configs[name] = swarm.ConfigSpec{}
			case KindSecret:
				if r.Secrets == nil {
					r.Secrets = map[string]swarm.SecretSpec{}
				}
				r.Secrets[name] = swarm.SecretSpec{}
			case KindVolume:
				r.Services["shop_vol_"+name] = service("shop_vol_"+name, name)
			}
		}
		for i := range 4 + rng.IntN(12) {
			k := kinds[rng.IntN(len(kinds))]
			name := fmt.Sprintf("shop_o%d", i)
			if rng.IntN(8) == 0 {
				name = fmt.Sprintf("elsewhere_o%d", i)
			}
			var l map[string]string
			switch rng.IntN(9) {
			case 0: // foreign: no labels, or only the namespace
				if rng.IntN(2) == 0 {
					l = map[string]string{stack.LabelNamespace: "shop"}
				}
			case 1:
				l = labels(stack.Owner{Controller: "ctl-b", Application: "shop", Release: "shop"})
			case 2:
				l = labels(stack.Owner{Controller: "ctl-a", Application: "billing", Release: "shop"})
			case 3: // renamed: an application no longer in the app set
				l = labels(stack.Owner{Controller: "ctl-a", Application: "shop-old", Release: "shop"})
			case 4:
				l = labels(owner, stack.LabelKind, "revision")
			case 5: // owned, with a wrong release label
				l = labels(owner, stack.LabelRelease, "shop2")
			default:
				l = labels(owner)
			}
			if rng.IntN(3) == 0 {
				add(&declared, k, name)
			}
			if rng.IntN(3) > 0 {
				add(&rec, k, name)
			}
			if rng.IntN(4) == 0 {
				add(&otherRec, k, name)
			}
			in.Live = append(in.Live, Object{Kind: k, ID: fmt.Sprint(i), Name: name, Labels: l})
		}
		in.Declared = declared
		in.Recorded = []Record{{Application: "shop", Release: rec}, {Application: "billing", Release: otherRec}}
		if rng.IntN(10) == 0 {
			in.Recorded = nil
		}

		p := Orphans(in)
		inPlan := map[string]bool{}
		for _, it := range p.Items {
			o := it.Object
			inPlan[o.ID] = true
			proven := owner.Owns(o.Labels) && o.Labels[stack.LabelKind] == "" &&
				inNamespace(o, "shop") && !declNames[o.Kind][o.Name] &&
				in.Recorded != nil && recNames[o.Kind][o.Name] &&
				in.OwnStack != "shop" && (o.Kind != KindVolume || in.PruneVolumes)
			switch {
			case it.Decision == Delete && !proven:
				t.Fatalf("round %d: deletes %s %q (labels %v) without full proof; input %+v", round, o.Kind, o.Name, o.Labels, in)
			case it.Decision != Delete && proven:
				t.Fatalf("round %d: %s %q is a provable orphan but was %s (%s)", round, o.Kind, o.Name, it.Decision, it.Reason)
			case it.Decision == Restamp && o.Labels[stack.LabelApplication] != "shop-old":
				t.Fatalf("round %d: re-stamps %s %q of application %q", round, o.Kind, o.Name, o.Labels[stack.LabelApplication])
			}
			switch it.Decision {
			case Delete:
				deleted++
			case Restamp:
				restamped++
			case Unmanaged:
				unmanaged++
			}
		}
		for _, o := range in.Live {
			if inPlan[o.ID] != inNamespace(o, "shop") {
				t.Fatalf("round %d: %s %q in plan = %v, in namespace = %v", round, o.Kind, o.Name, inPlan[o.ID], !inPlan[o.ID])
			}
		}
	}
	if deleted < 100 || restamped < 100 || unmanaged < 100 {
		t.Errorf("random mixes too tame: %d deletions, %d re-stamps, %d unmanaged", deleted, restamped, unmanaged)
	}
}

func TestAllowed(t *testing.T) {
	ok := Gates{Applications: []string{"shop"}}
	for _, tc := range []struct {
		name  string
		gates Gates
		want  []error
	}{
		{"a loaded, reconciled, non-empty app set allows prune", ok, nil},
		{"a failed app set load holds prune", Gates{AppSetLoadFailed: true, LoadError: "line 3: bad", Applications: []string{"shop"}}, []error{ErrAppSetUnavailable}},
		{"a stale app set holds prune", Gates{AppSetStale: true, Applications: []string{"shop"}}, []error{ErrAppSetUnavailable}},
		{"an empty app set holds prune", Gates{}, []error{ErrAppSetEmpty}},
		{"an application not reconciled yet holds prune", Gates{Applications: []string{"shop", "b"}, NotReconciled: []string{"b"}}, []error{ErrNotReconciled}},
		{"another application declaring the release holds prune", Gates{Applications: []string{"shop", "b"}, DeclaredBy: []string{"b"}}, []error{ErrDeclaredElsewhere}},
		{"a write the live snapshot has not seen holds prune", Gates{Applications: []string{"shop"}, WritesUnseen: []string{"gone"}}, []error{ErrSnapshotBehind}},
		{"every reason is reported", Gates{AppSetLoadFailed: true, NotReconciled: []string{"x"}, DeclaredBy: []string{"y"}, WritesUnseen: []string{"z"}},
			[]error{ErrAppSetUnavailable, ErrAppSetEmpty, ErrNotReconciled, ErrDeclaredElsewhere, ErrSnapshotBehind}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Allowed(tc.gates)
			if (err == nil) != (tc.want == nil) {
				t.Fatalf("Allowed() = %v, want reasons %v", err, tc.want)
			}
			for _, reason := range tc.want {
				if !errors.Is(err, reason) {
					t.Errorf("Allowed() = %v, want it to wrap %v", err, reason)
				}
			}
			var held *HeldError
			if err != nil && !errors.As(err, &held) {
				t.Errorf("Allowed() = %T, want *HeldError", err)
			}
		})
	}
}

package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/google/go-cmp/cmp"

	"github.com/skep-cd/skep/stack"
)

const rounds = 300

var sampleStrings = []string{"", "a", "b", "web", "app:v1", "x=y", "/data", "tcp", "é ü", `q"uote`}

// fill sets v to a random value: pointers, maps and slices are sometimes nil
// or empty, so the absent-value rules are exercised as much as the values.
func fill(r *rand.Rand, v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if depth > 8 || r.IntN(3) == 0 {
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(r, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(r, v.Field(i), depth+1)
			}
		}
	case reflect.Map:
		if r.IntN(3) == 0 {
			return
		}
		m := reflect.MakeMap(v.Type())
		for range r.IntN(3) {
			k := reflect.New(v.Type().Key()).Elem()
			fill(r, k, depth+1)
			e := reflect.New(v.Type().Elem()).Elem()
			fill(r, e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Slice:
		if r.IntN(3) == 0 {
			return
		}
		n := r.IntN(4)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(r, s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.String:
		v.SetString(sampleStrings[r.IntN(len(sampleStrings))])
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(r.IntN(4)))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(r.IntN(4)))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(r.IntN(4)) / 2)
	}
}

func randomRelease(r *rand.Rand) stack.Release {
	rel := stack.Release{Name: "web"}
	fill(r, reflect.ValueOf(&rel.Services).Elem(), 0)
	fill(r, reflect.ValueOf(&rel.Networks).Elem(), 0)
	fill(r, reflect.ValueOf(&rel.Configs).Elem(), 0)
	fill(r, reflect.ValueOf(&rel.Secrets).Elem(), 0)
	return rel
}

// viaJSON is what a recorded revision looks like after it was stored.
func viaJSON(t *testing.T, rel stack.Release) stack.Release {
	t.Helper()
	js, err := json.Marshal(rel)
	if err != nil {
		t.Fatalf("json.Marshal() error = %v", err)
	}
	var back stack.Release
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatalf("json.Unmarshal() error = %v", err)
	}
	return back
}

func TestPropertyCompareWithItselfIsUnchanged(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range rounds {
		desired := randomRelease(r)
		for _, rec := range []struct {
			how string
			rel stack.Release
		}{
			{"same value", desired},
			{"after a JSON round trip", viaJSON(t, desired)},
		} {
			got := Compare(desired, &rec.rel, Options{})
			if got.Action != Unchanged || got.Changed() {
				t.Fatalf("round %d, recorded is the %s: Compare() = %s, changes:\n%+v", i, rec.how, got.Action, got.Changes)
			}
		}
	}
}

func TestPropertyReorderingIsUnchanged(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range rounds {
		desired := randomRelease(r)
		rec := viaJSON(t, desired)
		// Give each container spec env with unique keys, then shuffle it and
		// the keyed or set-like lists on the recorded side.
		for name, s := range desired.Services {
			if s.TaskTemplate.ContainerSpec == nil {
				continue
			}
			env := make([]string, r.IntN(5))
			for j := range env {
				env[j] = fmt.Sprintf("K%d=%s", j, sampleStrings[r.IntN(len(sampleStrings))])
			}
			s.TaskTemplate.ContainerSpec.Env = env
			desired.Services[name] = s

			rs := rec.Services[name]
			c := rs.TaskTemplate.ContainerSpec
			c.Env = append([]string(nil), env...)
			r.Shuffle(len(c.Env), func(a, b int) { c.Env[a], c.Env[b] = c.Env[b], c.Env[a] })
			r.Shuffle(len(c.CapabilityAdd), func(a, b int) { c.CapabilityAdd[a], c.CapabilityAdd[b] = c.CapabilityAdd[b], c.CapabilityAdd[a] })
			if p := rs.TaskTemplate.Placement; p != nil {
				r.Shuffle(len(p.Constraints), func(a, b int) { p.Constraints[a], p.Constraints[b] = p.Constraints[b], p.Constraints[a] })
			}
			if e := rs.EndpointSpec; e != nil && !duplicateKeys(e.Ports) {
				r.Shuffle(len(e.Ports), func(a, b int) { e.Ports[a], e.Ports[b] = e.Ports[b], e.Ports[a] })
			}
		}
		got := Compare(desired, &rec, Options{})
		if got.Changed() {
			t.Fatalf("round %d: reordered recorded spec gives changes:\n%+v", i, got.Changes)
		}
	}
}

// duplicateKeys reports whether two ports share a target and protocol;
// their order then decides which is "#2", so shuffling them is a change.
func duplicateKeys(ports []swarm.PortConfig) bool {
	seen := map[string]bool{}
	for _, p := range ports {
		k, _ := naturalKey(reflect.ValueOf(p))
		if seen[k] {
			return true
		}
		seen[k] = true
	}
	return false
}

// TestPropertyFieldsAreSymmetric: swapping sides swaps Old/New and
// Added/Removed and changes nothing else.
func TestPropertyFieldsAreSymmetric(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range rounds {
		var a, b swarm.ServiceSpec
		fill(r, reflect.ValueOf(&a).Elem(), 0)
		fill(r, reflect.ValueOf(&b).Elem(), 0)
		forward := Fields(a, b, Options{})
		var swapped []FieldDiff
		for _, f := range Fields(b, a, Options{}) {
			swapped = append(swapped, FieldDiff{Path: f.Path, Old: f.New, New: f.Old, Added: f.Removed, Removed: f.Added})
		}
		if diff := cmp.Diff(forward, swapped); diff != "" {
			t.Fatalf("round %d: Fields(a, b) and Fields(b, a) disagree (-forward +swapped):\n%s", i, diff)
		}
		for _, f := range forward {
			if f.Path == "" || (f.Added && f.Old != "") || (f.Removed && f.New != "") || (f.Added && f.Removed) {
				t.Fatalf("round %d: malformed field diff %+v", i, f)
			}
		}

		var na, nb network.CreateOptions
		fill(r, reflect.ValueOf(&na).Elem(), 0)
		fill(r, reflect.ValueOf(&nb).Elem(), 0)
		if len(Fields(na, nb, Options{})) != len(Fields(nb, na, Options{})) {
			t.Fatalf("round %d: network field diffs differ in number by direction", i)
		}
	}
}

func TestPropertyRandomPlansRender(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := range rounds {
		desired, old := randomRelease(r), randomRelease(r)
		p := Compare(desired, &old, Options{MaskEnv: true})
		if p.Action != Upgrade && p.Action != Unchanged {
			t.Fatalf("round %d: Compare() action = %q, want upgrade or unchanged", i, p.Action)
		}
		if p.Changed() != (p.Action == Upgrade) {
			t.Fatalf("round %d: Changed() = %v with action %s", i, p.Changed(), p.Action)
		}
		if err := Render(io.Discard, []Release{p}); err != nil {
			t.Fatalf("round %d: Render() error = %v", i, err)
		}
	}
}

package swarm

import (
	"slices"
	"testing"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
)

func service(id, name string, labels map[string]string) swarm.Service {
	return swarm.Service{ID: id, Spec: swarm.ServiceSpec{Annotations: swarm.Annotations{Name: name, Labels: labels}}}
}

func config(id, name string, labels map[string]string) swarm.Config {
	return swarm.Config{ID: id, Spec: swarm.ConfigSpec{Annotations: swarm.Annotations{Name: name, Labels: labels}}}
}

func indexedSnapshot() Snapshot {
	return Snapshot{
		services: []swarm.Service{
			service("s1", "shop_web", nil),
			service("s2", "shop_db", map[string]string{labelNamespace: "shop"}),
			service("s3", "shop_eu_web", map[string]string{labelNamespace: "shop_eu"}),
			service("s4", "shopping_web", nil),
			service("s5", "renamed", map[string]string{labelNamespace: "shop"}),
			service("s6", "_odd", nil),
		},
		tasks: []swarm.Task{
			{ID: "t1", ServiceID: "s1"}, {ID: "t2", ServiceID: "s2"}, {ID: "t3", ServiceID: "s1"},
		},
		networks: []network.Summary{{ID: "n1", Name: "shop_default"}, {ID: "n2", Name: "ingress"}},
		configs: []swarm.Config{
			config("c1", "shop_settings-1", nil),
			config("c2", "skep-rev-shop-1", map[string]string{"io.skep.application": "shop", "io.skep.kind": "revision"}),
			config("c3", "skep-rev-shopping-1", map[string]string{"io.skep.application": "shopping"}),
			config("c4", "skep-rev-shop-2", map[string]string{"io.skep.application": "shop"}),
		},
		idx: &index{},
	}
}

func ids[T any](xs []T, id func(T) string) []string {
	var out []string
	for _, x := range xs {
		out = append(out, id(x))
	}
	return out
}

func TestSnapshotNamespaceHoldsPrefixedAndLabelledObjectsOnly(t *testing.T) {
	for _, s := range []Snapshot{indexedSnapshot(), func() Snapshot { s := indexedSnapshot(); s.idx = nil; return s }()} {
		ns := s.Namespace("shop")
		// shop_eu_web is named "shop_…" and so belongs to shop as well, as
		// docker stack rm shop would take it; shopping_web does not.
		if got, want := ids(ns.Services, func(x swarm.Service) string { return x.ID }), []string{"s1", "s2", "s3", "s5"}; !slices.Equal(got, want) {
			t.Errorf("services of shop = %v, want %v", got, want)
		}
		if got, want := ids(ns.Networks, func(x network.Summary) string { return x.ID }), []string{"n1"}; !slices.Equal(got, want) {
			t.Errorf("networks of shop = %v, want %v", got, want)
		}
		if got, want := ids(ns.Configs, func(x swarm.Config) string { return x.ID }), []string{"c1"}; !slices.Equal(got, want) {
			t.Errorf("configs of shop = %v, want %v", got, want)
		}
		if got, want := ids(s.Namespace("shop_eu").Services, func(x swarm.Service) string { return x.ID }), []string{"s3"}; !slices.Equal(got, want) {
			t.Errorf("services of shop_eu = %v, want %v", got, want)
		}
		if got := s.Namespace("shopping").Services; len(got) != 1 || got[0].ID != "s4" {
			t.Errorf("services of shopping = %v, want s4", got)
		}
		if got := s.Namespace("nothing"); got.Services != nil || got.Networks != nil || got.Configs != nil {
			t.Errorf("an empty namespace = %+v", got)
		}
		if got := s.Namespace(""); got.Services != nil {
			t.Errorf("the empty namespace holds %v", got.Services)
		}
	}
}

func TestSnapshotLookupsByNameServiceAndLabel(t *testing.T) {
	s := indexedSnapshot()
	if svc, ok := s.Service("shop_db"); !ok || svc.ID != "s2" {
		t.Errorf("Service(shop_db) = %v, %v", svc.ID, ok)
	}
	if _, ok := s.Service("shop"); ok {
		t.Error("Service(shop) found a service")
	}
	if got := ids(s.TasksOf("s1"), func(x swarm.Task) string { return x.ID }); !slices.Equal(got, []string{"t1", "t3"}) {
		t.Errorf("TasksOf(s1) = %v", got)
	}
	if got := s.TasksOf("s4"); got != nil {
		t.Errorf("TasksOf(s4) = %v", got)
	}
	if got := ids(s.ConfigsLabelled("io.skep.application", "shop"), func(x swarm.Config) string { return x.ID }); !slices.Equal(got, []string{"c2", "c4"}) {
		t.Errorf("configs labelled shop = %v", got)
	}
	// What a lookup returns is a copy: changing it leaves the snapshot alone.
	s.Namespace("shop").Services[0].Spec.Name = "changed"
	if svc, _ := s.Service("shop_web"); svc.ID != "s1" {
		t.Error("a lookup's result shares its elements with the snapshot")
	}
	var zero Snapshot
	if _, ok := zero.Service("x"); ok || zero.Namespace("x").Services != nil {
		t.Error("the zero snapshot holds something")
	}
}

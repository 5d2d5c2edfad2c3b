package swarm

import (
	"strings"
	"sync"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
)

// labelNamespace is the label docker stack deploy (and Skep) puts on the
// objects of a stack namespace.
const labelNamespace = "com.docker.stack.namespace"

// index is what a snapshot's lookups go through, built once on first use
// and shared by the snapshot's copies: an application's tick asks for its
// own namespace and services, and must not walk (or copy) every object of
// the swarm to find them.
type index struct {
	once       sync.Once
	services   map[string]int   // by name
	tasks      map[string][]int // by service id
	namespaces map[string]*nsIndex
	configs    map[string][]int // by "key=value" of each label
	nodes      map[string]swarm.Node
}

// nsIndex holds the positions of one namespace's objects.
type nsIndex struct{ services, networks, configs []int }

func (s *Snapshot) lookup() *index {
	if s.idx == nil {
		// A snapshot not built by the Watcher (the zero value, tests):
		// index it for this call only.
		s.idx = &index{}
	}
	s.idx.once.Do(func() { s.idx.build(s) })
	return s.idx
}

func (x *index) build(s *Snapshot) {
	x.services = make(map[string]int, len(s.services))
	x.tasks = make(map[string][]int, len(s.services))
	x.namespaces = map[string]*nsIndex{}
	x.configs = map[string][]int{}
	ns := func(name string) *nsIndex {
		n := x.namespaces[name]
		if n == nil {
			n = &nsIndex{}
			x.namespaces[name] = n
		}
		return n
	}
	for i, svc := range s.services {
		x.services[svc.Spec.Name] = i
		for _, name := range namespacesOf(svc.Spec.Name, svc.Spec.Labels[labelNamespace]) {
			n := ns(name)
			n.services = append(n.services, i)
		}
	}
	for i, t := range s.tasks {
		x.tasks[t.ServiceID] = append(x.tasks[t.ServiceID], i)
	}
	if len(s.nodes) > 0 {
		x.nodes = make(map[string]swarm.Node, len(s.nodes))
		for _, n := range s.nodes {
			x.nodes[n.ID] = n
		}
	}
	for i, n := range s.networks {
		for _, name := range namespacesOf(n.Name, "") {
			o := ns(name)
			o.networks = append(o.networks, i)
		}
	}
	for i, c := range s.configs {
		for _, name := range namespacesOf(c.Spec.Name, "") {
			o := ns(name)
			o.configs = append(o.configs, i)
		}
		for k, v := range c.Spec.Labels {
			x.configs[k+"="+v] = append(x.configs[k+"="+v], i)
		}
	}
}

// namespacesOf lists the namespaces an object named name belongs to:
// every prefix of name that ends before an underscore (a stack's objects
// are named "<namespace>_<name>", and a namespace may itself hold
// underscores), and its namespace label when it has one.
func namespacesOf(name, label string) []string {
	var out []string
	for i := range len(name) {
		if name[i] == '_' && i > 0 {
			out = append(out, name[:i])
		}
	}
	if label != "" && !strings.HasPrefix(name, label+"_") {
		out = append(out, label)
	}
	return out
}

// Namespace is what occupies one stack namespace in a snapshot.
type Namespace struct {
	// Services are labelled with the namespace or named "<namespace>_…".
	Services []swarm.Service
	// Networks and Configs are named "<namespace>_…".
	Networks []network.Summary
	Configs  []swarm.Config
}

// Namespace returns the objects of namespace ns, in the snapshot's order.
func (s Snapshot) Namespace(ns string) Namespace {
	var out Namespace
	n := s.lookup().namespaces[ns]
	if n == nil {
		return out
	}
	for _, i := range n.services {
		out.Services = append(out.Services, s.services[i])
	}
	for _, i := range n.networks {
		out.Networks = append(out.Networks, s.networks[i])
	}
	for _, i := range n.configs {
		out.Configs = append(out.Configs, s.configs[i])
	}
	return out
}

// NodesByID returns the snapshot's nodes by id, built once per snapshot
// and shared by every caller: it must be treated as read-only. Nil when
// the snapshot holds no node.
func (s Snapshot) NodesByID() map[string]swarm.Node { return s.lookup().nodes }

// ConfigsLabelled returns the configs whose label key has value.
func (s Snapshot) ConfigsLabelled(key, value string) []swarm.Config {
	var out []swarm.Config
	for _, i := range s.lookup().configs[key+"="+value] {
		out = append(out, s.configs[i])
	}
	return out
}

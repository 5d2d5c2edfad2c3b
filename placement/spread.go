package placement

import (
	"maps"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/swarm"
)

// Skew is a replicated service whose tasks sit unevenly on the nodes that
// may run them, as Swarm leaves them once a drained or lost node is back:
// it never moves a running task by itself.
type Skew struct {
	Service string
	// Short names the eligible nodes holding the fewest of its tasks (by
	// hostname, sorted): those a forced update would fill.
	Short []string
	// Counts is how many of its tasks each eligible node runs, by hostname.
	Counts map[string]int
}

// Skewed returns, sorted by service, the replicated services of services
// (live, by name) whose running tasks sit unevenly on their eligible
// nodes (ready, active, matching the constraints and the spec's
// platforms): two nodes of one spread group (placement preferences), or
// two groups, differ by two tasks or more while the fuller one could give
// one away (max_replicas_per_node). A service is judged only once every
// task it asks for runs: one still starting is not skewed yet. Global
// services and jobs never are. It is pure; tasks may hold other services'.
func Skewed(services map[string]swarm.Service, nodes []swarm.Node, tasks []swarm.Task) []Skew {
	byService := map[string][]swarm.Task{}
	for _, t := range tasks {
		if t.DesiredState == swarm.TaskStateRunning {
			byService[t.ServiceID] = append(byService[t.ServiceID], t)
		}
	}
	var out []Skew
	for _, name := range slices.Sorted(maps.Keys(services)) {
		s := services[name]
		if sk, ok := skewOf(s, eligible(s.Spec, nodes), byService[s.ID]); ok {
			sk.Service = name
			out = append(out, sk)
		}
	}
	return out
}

// skewOf judges one replicated service whose tasks meant to run are tasks.
func skewOf(s swarm.Service, nodes []swarm.Node, tasks []swarm.Task) (Skew, bool) {
	m := s.Spec.Mode
	if m.Replicated == nil || m.Replicated.Replicas == nil || len(nodes) < 2 {
		return Skew{}, false
	}
	counts := map[string]int{}
	for _, n := range nodes {
		counts[n.ID] = 0
	}
	for _, t := range tasks {
		if t.Status.State != swarm.TaskStateRunning {
			return Skew{}, false // still settling
		}
		if _, ok := counts[t.NodeID]; ok {
			counts[t.NodeID]++
		}
	}
	if len(tasks) != int(*m.Replicated.Replicas) {
		return Skew{}, false
	}
	maxPer := 0
	var prefs []swarm.PlacementPreference
	if p := s.Spec.TaskTemplate.Placement; p != nil {
		maxPer, prefs = int(p.MaxReplicas), p.Preferences
	}
	groups := spreadGroups(nodes, prefs)
	short := unevenIn(groups, counts, maxPer)
	if short == nil && len(groups) > 1 {
		short = unevenAcross(groups, counts, maxPer)
	}
	if short == nil {
		return Skew{}, false
	}
	sk := Skew{Counts: map[string]int{}}
	for _, n := range nodes {
		sk.Counts[hostname(n)] = counts[n.ID]
		if slices.Contains(short, n.ID) {
			sk.Short = append(sk.Short, hostname(n))
		}
	}
	slices.Sort(sk.Short)
	return sk, true
}

// unevenIn returns the ids of the emptiest nodes of the first group in
// which two nodes differ by two tasks or more, the emptier able to take
// one; nil when none does.
func unevenIn(groups [][]swarm.Node, counts map[string]int, maxPer int) []string {
	for _, g := range groups {
		low, high := -1, -1
		for _, n := range g {
			c := counts[n.ID]
			high = max(high, c)
			if (maxPer == 0 || c < maxPer) && (low < 0 || c < low) {
				low = c
			}
		}
		if low >= 0 && high-low >= 2 {
			var ids []string
			for _, n := range g {
				if counts[n.ID] == low {
					ids = append(ids, n.ID)
				}
			}
			return ids
		}
	}
	return nil
}

// unevenAcross returns the ids of the nodes of the emptiest groups when
// two groups differ by two tasks or more, the emptier with room; nil
// otherwise.
func unevenAcross(groups [][]swarm.Node, counts map[string]int, maxPer int) []string {
	totals := make([]int, len(groups))
	low, high := -1, -1
	for i, g := range groups {
		for _, n := range g {
			totals[i] += counts[n.ID]
		}
		high = max(high, totals[i])
		if (maxPer == 0 || totals[i] < maxPer*len(g)) && (low < 0 || totals[i] < low) {
			low = totals[i]
		}
	}
	if low < 0 || high-low < 2 {
		return nil
	}
	var ids []string
	for i, g := range groups {
		if totals[i] == low {
			for _, n := range g {
				ids = append(ids, n.ID)
			}
		}
	}
	return ids
}

// spreadGroups splits nodes by the values they hold for the spread
// preferences' descriptors, as Swarm spreads over them (a node without
// the label is a group of its own kind); one group without preferences.
func spreadGroups(nodes []swarm.Node, prefs []swarm.PlacementPreference) [][]swarm.Node {
	by := map[string][]swarm.Node{}
	for _, n := range nodes {
		var key []string
		for _, p := range prefs {
			if p.Spread != nil {
				key = append(key, constraint{key: p.Spread.SpreadDescriptor}.nodeValue(n))
			}
		}
		k := strings.Join(key, "\x00")
		by[k] = append(by[k], n)
	}
	var out [][]swarm.Node
	for _, k := range slices.Sorted(maps.Keys(by)) {
		out = append(out, by[k])
	}
	return out
}

// eligible returns the nodes that may run spec's tasks: ready, active,
// matching every constraint and one of the spec's platforms. A
// constraint that does not parse matches no node.
func eligible(spec swarm.ServiceSpec, nodes []swarm.Node) []swarm.Node {
	var out []swarm.Node
	p := spec.TaskTemplate.Placement
	for _, n := range nodes {
		if n.Status.State != swarm.NodeStateReady || n.Spec.Availability != swarm.NodeAvailabilityActive {
			continue
		}
		ok := true
		if p != nil {
			for _, text := range p.Constraints {
				c, err := parseConstraint(text)
				ok = ok && err == nil && c.matches(n)
			}
			if len(p.Platforms) > 0 {
				ok = ok && slices.ContainsFunc(platformsOf(spec, nil), func(pl Platform) bool { return platformMatches(pl, n) })
			}
		}
		if ok {
			out = append(out, n)
		}
	}
	return out
}

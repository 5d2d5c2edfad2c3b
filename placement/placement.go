// Package placement says, before a deploy, what no node of a swarm can
// satisfy for each service of a release: Swarm accepts a service that can
// never run and leaves its tasks pending ("no suitable node") for ever.
//
// Check is a pure function of values: the services' specs, the nodes and
// tasks of a live snapshot, and the platforms of each image (from its
// manifest in the registry, which the caller reads). It applies the rules
// of Swarm's scheduler in its order: a node must be ready and active,
// match every constraint (node.id, node.hostname, node.ip, node.role,
// node.platform.os and .arch, node.labels.*, engine.labels.*), run one of
// the image's platforms, and have the reservations free; and the eligible
// nodes must hold the replicas asked for within max_replicas_per_node.
//
// It never does I/O and never decides for the caller: a service it reports
// may still be deployed (an opt-out is the caller's). It judges only what
// it knows: a service without reservations, constraints or known platforms
// has nothing of those rules to fail. The tasks of the services being
// checked are taken as replaced, so an update is not refused for the
// resources its own old tasks hold.
package placement

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/swarm"
)

// Rule names what a service fails. The strings are stable: tests and
// callers branch on them.
type Rule string

// The rules, in the order Check applies them.
const (
	// RuleNoNode: no node is ready and active (all down, drained or paused).
	RuleNoNode Rule = "no-node"
	// RuleConstraint: the placement constraints leave no node.
	RuleConstraint Rule = "constraint"
	// RulePlatform: no node left runs one of the image's platforms.
	RulePlatform Rule = "platform"
	// RuleResources: no node left has the reservations free, or the nodes
	// that have hold fewer replicas than asked.
	RuleResources Rule = "resources"
	// RuleMaxReplicas: max_replicas_per_node times the nodes left is fewer
	// than the replicas asked.
	RuleMaxReplicas Rule = "max-replicas-per-node"
)

// Platform is one os/architecture an image is built for. An empty field
// matches any node.
type Platform struct {
	OS, Architecture, Variant string
}

func (p Platform) String() string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// Input is what Check judges. Check keeps none of it and changes none.
type Input struct {
	// Services are the release's services, by full name (ns_web).
	Services map[string]swarm.ServiceSpec
	// Nodes are the swarm's nodes as a manager lists them.
	Nodes []swarm.Node
	// Tasks are the swarm's tasks: those meant to run hold their
	// reservations on their node.
	Tasks []swarm.Task
	// Live are the swarm's services, to tell which tasks belong to the
	// services being checked; nil when none of them exists yet.
	Live []swarm.Service
	// Images are the platforms of each image, by the reference the spec
	// names. An image that is absent, or whose list is empty, is not
	// judged on platform; a spec's own Placement.Platforms (which a
	// resolved digest sets, as docker stack deploy does) is used first.
	Images map[string][]Platform
}

// Problem is what no node satisfies for one service.
type Problem struct {
	Service string
	Rule    Rule
	// Message says it in one line, naming the nodes and numbers involved.
	Message string
}

func (p Problem) String() string { return p.Service + ": " + p.Message }

// Check returns, for each service that cannot be placed as declared, the
// first rule it fails, sorted by service. It returns nil when every service
// can be placed.
func Check(in Input) []Problem {
	// Messages list nodes by hostname, whatever order the swarm gave.
	in.Nodes = slices.SortedFunc(slices.Values(in.Nodes), func(a, b swarm.Node) int { return strings.Compare(hostname(a), hostname(b)) })
	replaced := map[string]bool{}
	for _, s := range in.Live {
		if _, ok := in.Services[s.Spec.Name]; ok {
			replaced[s.ID] = true
		}
	}
	free := freeResources(in.Nodes, in.Tasks, replaced)
	var out []Problem
	for _, name := range slices.Sorted(maps.Keys(in.Services)) {
		spec := in.Services[name]
		if p, ok := checkService(name, spec, in, free); !ok {
			out = append(out, p)
		}
	}
	return out
}

// checkService applies the rules to one service in the scheduler's order.
func checkService(name string, spec swarm.ServiceSpec, in Input, free map[string]swarm.Resources) (Problem, bool) {
	fail := func(rule Rule, format string, args ...any) (Problem, bool) {
		return Problem{Service: name, Rule: rule, Message: fmt.Sprintf(format, args...)}, false
	}
	wanted, global := replicasOf(spec)
	if wanted == 0 && !global {
		return Problem{}, true
	}
	var nodes []swarm.Node
	for _, n := range in.Nodes {
		if n.Status.State == swarm.NodeStateReady && n.Spec.Availability == swarm.NodeAvailabilityActive {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return fail(RuleNoNode, "no node is ready and active (%s)", describeNodes(in.Nodes))
	}
	placement := spec.TaskTemplate.Placement
	if placement == nil {
		placement = &swarm.Placement{}
	}

	// Constraints: each alone first, so a key no node has is named.
	var constraints []constraint
	for _, text := range placement.Constraints {
		c, err := parseConstraint(text)
		if err != nil {
			return fail(RuleConstraint, "constraint %q: %v", text, err)
		}
		if !slices.ContainsFunc(nodes, c.matches) {
			return fail(RuleConstraint, "constraint %q matches none of the %d ready, active nodes (%s)", text, len(nodes), c.describe(nodes))
		}
		constraints = append(constraints, c)
	}
	nodes = slices.DeleteFunc(nodes, func(n swarm.Node) bool {
		return !all(constraints, func(c constraint) bool { return c.matches(n) })
	})
	if len(nodes) == 0 {
		return fail(RuleConstraint, "constraints %s together match no node", quoteAll(placement.Constraints))
	}

	platforms := platformsOf(spec, in.Images)
	if len(platforms) > 0 {
		left := slices.DeleteFunc(slices.Clone(nodes), func(n swarm.Node) bool {
			return !slices.ContainsFunc(platforms, func(p Platform) bool { return platformMatches(p, n) })
		})
		if len(left) == 0 {
			return fail(RulePlatform, "the image is built for %s; the nodes %s run %s", joinPlatforms(platforms), placedBy(constraints), nodePlatforms(nodes))
		}
		nodes = left
	}

	reserve := reservations(spec)
	maxPer := int(placement.MaxReplicas)
	room := map[string]int{}
	fits := 0
	var short []string
	for _, n := range nodes {
		k := fitting(reserve, free[n.ID])
		if maxPer > 0 && (k < 0 || k > maxPer) {
			k = maxPer
		}
		room[n.ID] = k
		if k != 0 {
			fits++
		} else {
			short = append(short, fmt.Sprintf("%s has %s free", hostname(n), describeResources(free[n.ID])))
		}
	}
	if !reserve.empty() && fits == 0 {
		return fail(RuleResources, "reserves %s per task; no node %s has it free (%s)", describeResources(reserve.Resources), placedBy(constraints), strings.Join(short, ", "))
	}
	if global {
		if !reserve.empty() && len(short) > 0 {
			return fail(RuleResources, "global: reserves %s per task, which %d of its %d nodes lack (%s)", describeResources(reserve.Resources), len(short), len(nodes), strings.Join(short, ", "))
		}
		return Problem{}, true
	}
	if maxPer > 0 && reserve.empty() && maxPer*len(nodes) < wanted {
		return fail(RuleMaxReplicas, "%d replicas at most %d per node need %d nodes; %d %s eligible (%s)",
			wanted, maxPer, (wanted+maxPer-1)/maxPer, len(nodes), plural(len(nodes), "is", "are"), hostnames(nodes))
	}
	if !reserve.empty() || maxPer > 0 {
		total, unbounded := 0, false
		for _, k := range room {
			if k < 0 {
				unbounded = true
			}
			total += max(k, 0)
		}
		if !unbounded && total < wanted {
			rule, why := RuleResources, fmt.Sprintf("reserving %s each", describeResources(reserve.Resources))
			if reserve.empty() {
				rule, why = RuleMaxReplicas, fmt.Sprintf("at most %d per node", maxPer)
			} else if maxPer > 0 {
				why += fmt.Sprintf(", at most %d per node", maxPer)
			}
			return fail(rule, "%d replicas %s; the eligible nodes hold %d (%s)", wanted, why, total, describeRoom(nodes, room))
		}
	}
	return Problem{}, true
}

// replicasOf is the number of tasks spec asks for, and whether it runs one
// per eligible node instead.
func replicasOf(spec swarm.ServiceSpec) (int, bool) {
	m := spec.Mode
	switch {
	case m.Global != nil, m.GlobalJob != nil:
		return 0, true
	case m.ReplicatedJob != nil:
		if m.ReplicatedJob.MaxConcurrent != nil {
			return int(*m.ReplicatedJob.MaxConcurrent), false
		}
		return 1, false
	case m.Replicated != nil && m.Replicated.Replicas != nil:
		return int(*m.Replicated.Replicas), false
	}
	return 1, false
}

// all reports whether f holds for every element of s.
func all[T any](s []T, f func(T) bool) bool {
	for _, v := range s {
		if !f(v) {
			return false
		}
	}
	return true
}

// constraint is one parsed placement constraint: key == value or key != value.
type constraint struct {
	text, key, value string
	equal            bool
}

// parseConstraint reads "key==value" or "key!=value", as Swarm does.
func parseConstraint(text string) (constraint, error) {
	for _, op := range []string{"==", "!="} {
		if key, value, ok := strings.Cut(text, op); ok {
			c := constraint{text: text, key: strings.TrimSpace(key), value: strings.TrimSpace(value), equal: op == "=="}
			if c.key == "" || c.value == "" {
				return constraint{}, fmt.Errorf("want key == value or key != value")
			}
			if !knownKey(c.key) {
				return constraint{}, fmt.Errorf("the scheduler reads no key %q, so no node can match (want node.id, node.hostname, node.ip, node.role, node.platform.os, node.platform.arch, node.labels.NAME or engine.labels.NAME)", c.key)
			}
			return c, nil
		}
	}
	return constraint{}, fmt.Errorf("want key == value or key != value")
}

// knownKey reports whether Swarm's scheduler reads key; any other key
// matches no node.
func knownKey(key string) bool {
	switch strings.ToLower(key) {
	case "node.id", "node.hostname", "node.ip", "node.role", "node.platform.os", "node.platform.arch":
		return true
	}
	_, label := labelKey(key)
	return label != ""
}

// labelKey splits node.labels.NAME and engine.labels.NAME; the name keeps
// its case (Swarm compares label names exactly, values without case).
func labelKey(key string) (kind, name string) {
	for _, prefix := range []string{"node.labels.", "engine.labels."} {
		if len(key) > len(prefix) && strings.EqualFold(key[:len(prefix)], prefix) {
			return prefix, key[len(prefix):]
		}
	}
	return "", ""
}

// nodeValue is what n holds for c's key, "" when it has none.
func (c constraint) nodeValue(n swarm.Node) string {
	switch strings.ToLower(c.key) {
	case "node.id":
		return n.ID
	case "node.hostname":
		return n.Description.Hostname
	case "node.ip":
		return n.Status.Addr
	case "node.role":
		return string(n.Spec.Role)
	case "node.platform.os":
		return n.Description.Platform.OS
	case "node.platform.arch":
		return n.Description.Platform.Architecture
	}
	switch kind, name := labelKey(c.key); kind {
	case "node.labels.":
		return n.Spec.Labels[name]
	case "engine.labels.":
		return n.Description.Engine.Labels[name]
	}
	return ""
}

// matches applies c to n as Swarm does: values compare without case, and
// node.ip takes an address or a CIDR prefix.
func (c constraint) matches(n swarm.Node) bool {
	have := c.nodeValue(n)
	var match bool
	if strings.EqualFold(c.key, "node.ip") {
		match = ipMatches(c.value, have)
	} else {
		match = strings.EqualFold(c.value, have)
	}
	return match == c.equal
}

// ipMatches reports whether addr is the address or within the prefix want.
func ipMatches(want, addr string) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	if p, err := netip.ParsePrefix(want); err == nil {
		return p.Contains(a)
	}
	w, err := netip.ParseAddr(want)
	return err == nil && w == a
}

// describe says what the nodes hold for c's key: "zone=a on skep-m1,
// skep-w1; zone unset on skep-m2".
func (c constraint) describe(nodes []swarm.Node) string {
	by := map[string][]string{}
	for _, n := range nodes {
		v := c.nodeValue(n)
		if v == "" {
			v = "(unset)"
		}
		by[v] = append(by[v], hostname(n))
	}
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%s %s on %s", c.key, v, strings.Join(by[v], ", ")))
	}
	return strings.Join(parts, "; ")
}

// platformsOf returns the platforms spec's tasks may run on: the spec's
// own, else the image's.
func platformsOf(spec swarm.ServiceSpec, images map[string][]Platform) []Platform {
	if p := spec.TaskTemplate.Placement; p != nil && len(p.Platforms) > 0 {
		out := make([]Platform, 0, len(p.Platforms))
		for _, pl := range p.Platforms {
			out = append(out, Platform{OS: pl.OS, Architecture: pl.Architecture})
		}
		return out
	}
	if cs := spec.TaskTemplate.ContainerSpec; cs != nil {
		return images[cs.Image]
	}
	return nil
}

// platformMatches applies Swarm's platform filter: an empty field matches,
// and x86_64 is amd64, aarch64 arm64. Manifests' variants are not
// compared: nodes do not announce one.
func platformMatches(p Platform, n swarm.Node) bool {
	os, arch := n.Description.Platform.OS, normalizeArch(n.Description.Platform.Architecture)
	return (p.OS == "" || strings.EqualFold(p.OS, os)) && (p.Architecture == "" || normalizeArch(p.Architecture) == arch)
}

// normalizeArch writes an architecture as images name it.
func normalizeArch(arch string) string {
	switch a := strings.ToLower(arch); a {
	case "x86_64", "x86-64":
		return "amd64"
	case "aarch64":
		return "arm64"
	case "i386", "i686":
		return "386"
	case "armv7l", "armv6l", "armhf", "armel":
		// Manifests say arm (and a variant) where nodes say armv7l.
		return "arm"
	default:
		return a
	}
}

// reservation is what one task of a service reserves.
type reservation struct{ swarm.Resources }

func reservations(spec swarm.ServiceSpec) reservation {
	if r := spec.TaskTemplate.Resources; r != nil && r.Reservations != nil {
		return reservation{*r.Reservations}
	}
	return reservation{}
}

func (r reservation) empty() bool {
	return r.NanoCPUs == 0 && r.MemoryBytes == 0 && len(discrete(r.GenericResources)) == 0
}

// discrete sums the discrete generic resources by kind; named ones count
// one each.
func discrete(gen []swarm.GenericResource) map[string]int64 {
	out := map[string]int64{}
	for _, g := range gen {
		switch {
		case g.DiscreteResourceSpec != nil:
			out[g.DiscreteResourceSpec.Kind] += g.DiscreteResourceSpec.Value
		case g.NamedResourceSpec != nil:
			out[g.NamedResourceSpec.Kind]++
		}
	}
	return out
}

// freeResources is, per node id, what its tasks meant to run leave free of
// what it announces; the tasks of replaced services are not counted.
func freeResources(nodes []swarm.Node, tasks []swarm.Task, replaced map[string]bool) map[string]swarm.Resources {
	free := map[string]swarm.Resources{}
	left := map[string]map[string]int64{}
	for _, n := range nodes {
		free[n.ID] = swarm.Resources{NanoCPUs: n.Description.Resources.NanoCPUs, MemoryBytes: n.Description.Resources.MemoryBytes}
		left[n.ID] = discrete(n.Description.Resources.GenericResources)
	}
	for _, t := range tasks {
		f, ok := free[t.NodeID]
		if !ok || replaced[t.ServiceID] || t.Spec.Resources == nil || t.Spec.Resources.Reservations == nil {
			continue
		}
		if t.DesiredState != swarm.TaskStateRunning && t.DesiredState != swarm.TaskStateReady {
			continue
		}
		r := t.Spec.Resources.Reservations
		f.NanoCPUs -= r.NanoCPUs
		f.MemoryBytes -= r.MemoryBytes
		free[t.NodeID] = f
		for kind, n := range discrete(r.GenericResources) {
			left[t.NodeID][kind] -= n
		}
	}
	for id, f := range free {
		for _, kind := range slices.Sorted(maps.Keys(left[id])) {
			f.GenericResources = append(f.GenericResources, swarm.GenericResource{
				DiscreteResourceSpec: &swarm.DiscreteGenericResource{Kind: kind, Value: left[id][kind]}})
		}
		free[id] = f
	}
	return free
}

// fitting is how many tasks reserving r fit in free; -1 when r reserves
// nothing (no bound).
func fitting(r reservation, free swarm.Resources) int {
	if r.empty() {
		return -1
	}
	n := -1
	bound := func(have, want int64) {
		if want <= 0 {
			return
		}
		k := int(max(have, 0) / want)
		if n < 0 || k < n {
			n = k
		}
	}
	bound(free.NanoCPUs, r.NanoCPUs)
	bound(free.MemoryBytes, r.MemoryBytes)
	have := discrete(free.GenericResources)
	for kind, want := range discrete(r.GenericResources) {
		bound(have[kind], want)
	}
	return n
}

// describeResources writes resources for people: "2 CPUs, 512 MiB, gpu 1".
func describeResources(r swarm.Resources) string {
	var parts []string
	if r.NanoCPUs != 0 {
		parts = append(parts, fmt.Sprintf("%g CPUs", float64(r.NanoCPUs)/1e9))
	}
	if r.MemoryBytes != 0 {
		parts = append(parts, bytesOf(r.MemoryBytes))
	}
	d := discrete(r.GenericResources)
	for _, kind := range slices.Sorted(maps.Keys(d)) {
		parts = append(parts, fmt.Sprintf("%s %d", kind, d[kind]))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// bytesOf writes a size in MiB or GiB.
func bytesOf(n int64) string {
	if n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// describeRoom lists how many tasks each node holds.
func describeRoom(nodes []swarm.Node, room map[string]int) string {
	var parts []string
	for _, n := range nodes {
		parts = append(parts, fmt.Sprintf("%s %d", hostname(n), max(room[n.ID], 0)))
	}
	return strings.Join(parts, ", ")
}

// describeNodes says what each node is, for a service no node can take.
func describeNodes(nodes []swarm.Node) string {
	if len(nodes) == 0 {
		return "the swarm lists no node"
	}
	var parts []string
	for _, n := range nodes {
		parts = append(parts, fmt.Sprintf("%s %s, %s", hostname(n), n.Status.State, n.Spec.Availability))
	}
	return strings.Join(parts, "; ")
}

// hostname names a node, by id when it announces no hostname.
func hostname(n swarm.Node) string {
	if n.Description.Hostname != "" {
		return n.Description.Hostname
	}
	return n.ID
}

func hostnames(nodes []swarm.Node) string {
	var names []string
	for _, n := range nodes {
		names = append(names, hostname(n))
	}
	return strings.Join(names, ", ")
}

// placedBy says which nodes a rule looked at: all the ready ones, or those
// the constraints left.
func placedBy(constraints []constraint) string {
	if len(constraints) == 0 {
		return "ready and active"
	}
	return "the constraints leave"
}

// nodePlatforms lists the nodes' platforms: "linux/amd64 (skep-m1, skep-w1)".
func nodePlatforms(nodes []swarm.Node) string {
	by := map[string][]string{}
	for _, n := range nodes {
		p := n.Description.Platform.OS + "/" + normalizeArch(n.Description.Platform.Architecture)
		by[p] = append(by[p], hostname(n))
	}
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%s (%s)", p, strings.Join(by[p], ", ")))
	}
	return strings.Join(parts, ", ")
}

func joinPlatforms(ps []Platform) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return strings.Join(out, ", ")
}

func quoteAll(ss []string) string {
	var out []string
	for _, s := range ss {
		out = append(out, fmt.Sprintf("%q", s))
	}
	return strings.Join(out, " and ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

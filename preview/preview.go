package preview

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/stack"
)

// Labels a preview's objects carry besides the ownership labels.
const (
	// LabelBranch names the branch a preview release was made for.
	LabelBranch = "io.skep.preview.branch"
	// LabelHash is the branch's hash, the suffix of the release name.
	LabelHash = "io.skep.preview.hash"
	// LabelDomain is the preview's domain.
	LabelDomain = "io.skep.preview.domain"
)

// DefaultDomain is the domain template when the application sets none.
const DefaultDomain = "{hash}.{artifact}.{environment}.{baseDomain}"

// Hash returns the first 8 hex digits of the SHA-256 of branch: the
// preview's short, stable name ("1d0fd508").
func Hash(branch string) string {
	sum := sha256.Sum256([]byte(branch))
	return hex.EncodeToString(sum[:])[:8]
}

// Name returns the release name of release's preview for branch.
func Name(release, branch string) string { return release + "-" + Hash(branch) }

// DomainVars fill a domain template.
type DomainVars struct {
	Hash, Artifact, Environment, BaseDomain, Branch string
}

// Domain fills template ("" means DefaultDomain): {hash}, {artifact},
// {environment}, {baseDomain} and {branch} (with "/" as "-"). Empty parts
// and the dots around them are left out, so a missing base domain gives
// "1d0fd508.web.testing", not a name ending in a dot.
func Domain(template string, v DomainVars) string {
	if template == "" {
		template = DefaultDomain
	}
	d := strings.NewReplacer("{hash}", v.Hash, "{artifact}", v.Artifact, "{environment}", v.Environment,
		"{baseDomain}", v.BaseDomain, "{branch}", strings.ReplaceAll(v.Branch, "/", "-")).Replace(template)
	parts := strings.Split(d, ".")
	return strings.Join(slices.DeleteFunc(parts, func(p string) bool { return p == "" }), ".")
}

// Branch is one branch a preview is made for.
type Branch struct {
	Name   string
	Commit string
	Hash   string
}

// Selection says which branches get previews. Its zero value selects every
// branch but the excluded ones.
type Selection struct {
	// Include are glob patterns (path.Match, "*" not crossing "/"; "**"
	// matches everything); empty means every branch.
	Include []string
	// Ignore are glob patterns of branches never previewed.
	Ignore []string
	// Exclude names branches never previewed: the default branch and the
	// branch the main release tracks.
	Exclude []string
	// Max bounds the previews; 0 means no bound. Beyond it, the branches
	// are taken in name order and the rest reported.
	Max int
}

// CollisionError says two branches hash to the same preview name; neither
// gets a preview until one is renamed.
type CollisionError struct{ Hash, First, Second string }

func (e *CollisionError) Error() string {
	return fmt.Sprintf("branches %q and %q both hash to preview %s; rename one of them", e.First, e.Second, e.Hash)
}

// Select returns the branches (name → head commit) that get a preview, in
// name order, the ones left out by Max, and a *CollisionError for each
// pair of branches whose hashes collide (both are left out).
func Select(branches map[string]string, s Selection) (chosen []Branch, over []string, collisions []error) {
	byHash := map[string]string{}
	collided := map[string]bool{}
	var candidates []Branch
	for _, name := range slices.Sorted(maps.Keys(branches)) {
		if slices.Contains(s.Exclude, name) || matchAny(s.Ignore, name) || (len(s.Include) > 0 && !matchAny(s.Include, name)) {
			continue
		}
		h := Hash(name)
		if first, ok := byHash[h]; ok {
			collisions = append(collisions, &CollisionError{Hash: h, First: first, Second: name})
			collided[h] = true
			continue
		}
		byHash[h] = name
		candidates = append(candidates, Branch{Name: name, Commit: branches[name], Hash: h})
	}
	for _, b := range candidates {
		switch {
		case collided[b.Hash]:
		case s.Max > 0 && len(chosen) >= s.Max:
			over = append(over, b.Name)
		default:
			chosen = append(chosen, b)
		}
	}
	return chosen, over, collisions
}

// matchAny reports whether name matches one of the glob patterns.
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if p == "**" || p == "*" && !strings.Contains(name, "/") {
			return true
		}
		if ok, err := path.Match(p, name); err == nil && ok {
			return true
		}
		// "dependabot/*" should also catch "dependabot/npm/x".
		if strings.HasSuffix(p, "/*") && strings.HasPrefix(name, strings.TrimSuffix(p, "*")) {
			return true
		}
	}
	return false
}

// Options shape one preview copy of a release.
type Options struct {
	// Name is the preview release's name (see Name).
	Name   string
	Branch Branch
	Domain string
	// Replicas is each replicated service's replica count; 0 means 1.
	Replicas uint64
	// PortShift moves published ports by PortShift×Slot instead of
	// dropping them; 0 drops them.
	PortShift int
	// Slot numbers the preview from 1, for PortShift.
	Slot int
}

// Make returns a copy of rel safe to run beside the main release as the
// preview opts describes. rel must already be the preview's own release
// (converted with the preview's name as its namespace and owner, so every
// object and reference is the preview's); Make sets replicas, drops or
// shifts published ports, drops network aliases, rewrites Traefik and
// Caddy routing to the preview's domain with unique router, service and
// middleware names, and adds the preview labels. rel is not modified.
func Make(rel stack.Release, opts Options) stack.Release {
	out := rel
	out.Services = make(map[string]swarm.ServiceSpec, len(rel.Services))
	replicas := max(opts.Replicas, 1)
	for name, spec := range rel.Services {
		s := copyService(spec)
		s.Labels = previewLabels(routing(s.Labels, opts.Branch.Hash, opts.Domain), opts)
		if cs := s.TaskTemplate.ContainerSpec; cs != nil {
			cs.Labels = routing(cs.Labels, opts.Branch.Hash, opts.Domain)
		}
		if s.Mode.Replicated != nil {
			s.Mode.Replicated = &swarm.ReplicatedService{Replicas: &replicas}
		}
		s.EndpointSpec = ports(s.EndpointSpec, opts)
		for i := range s.TaskTemplate.Networks {
			// An alias would answer for the main release's service name.
			s.TaskTemplate.Networks[i].Aliases = nil
		}
		out.Services[name] = s
	}
	return out
}

// previewLabels adds the preview's own labels to a copy of labels.
func previewLabels(labels map[string]string, opts Options) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	out[LabelBranch] = opts.Branch.Name
	out[LabelHash] = opts.Branch.Hash
	if opts.Domain != "" {
		out[LabelDomain] = opts.Domain
	}
	return out
}

// ports drops or shifts the published ports of an endpoint spec copy.
func ports(ep *swarm.EndpointSpec, opts Options) *swarm.EndpointSpec {
	if ep == nil {
		return nil
	}
	c := *ep
	c.Ports = nil
	if opts.PortShift > 0 {
		for _, p := range ep.Ports {
			if p.PublishedPort != 0 {
				p.PublishedPort += uint32(opts.PortShift * max(opts.Slot, 1))
			}
			c.Ports = append(c.Ports, p)
		}
	}
	return &c
}

var (
	// traefikName finds the router, service or middleware a Traefik label
	// names: traefik.http.routers.<name>.rule.
	traefikName = regexp.MustCompile(`^(traefik\.(?:http|tcp|udp)\.(?:routers|services|middlewares))\.([^.]+)(\..*)?$`)
	// hostRule finds the host matchers of a Traefik rule.
	hostRule = regexp.MustCompile(`(Host|HostSNI|HostRegexp)\(([^)]*)\)`)
	// caddySite finds Caddy-docker-proxy's site address labels: caddy, caddy_0, caddy_1…
	caddySite = regexp.MustCompile(`^caddy(_\d+)?$`)
)

// routing rewrites the routing labels of Traefik and Caddy-docker-proxy
// for a preview: names get the hash as a suffix, and host rules and site
// addresses name the preview's domain. Other labels are copied unchanged.
func routing(labels map[string]string, hash, domain string) map[string]string {
	if labels == nil {
		return nil
	}
	names := map[string]bool{} // routers, services and middlewares the labels define
	for k := range labels {
		if m := traefikName.FindStringSubmatch(k); m != nil {
			names[m[2]] = true
		}
	}
	suffix := func(n string) string { return n + "-" + hash }
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		switch m := traefikName.FindStringSubmatch(k); {
		case m != nil:
			k = m[1] + "." + suffix(m[2]) + m[3]
			switch {
			case strings.HasSuffix(k, ".rule") && domain != "":
				v = hostRule.ReplaceAllString(v, "Host(`"+domain+"`)")
			case strings.HasSuffix(k, ".service") || strings.HasSuffix(k, ".middlewares"):
				v = renameRefs(v, names, suffix)
			}
		case caddySite.MatchString(k) && domain != "":
			v = domain
		}
		out[k] = v
	}
	return out
}

// renameRefs renames, in a comma-separated list of Traefik names, those
// the labels define (a "name@provider" reference elsewhere is kept).
func renameRefs(v string, names map[string]bool, suffix func(string) string) string {
	parts := strings.Split(v, ",")
	for i, p := range parts {
		if n := strings.TrimSpace(p); names[n] {
			parts[i] = suffix(n)
		}
	}
	return strings.Join(parts, ",")
}

// copyService copies the parts of a spec Make changes, so the input is
// never written.
func copyService(in swarm.ServiceSpec) swarm.ServiceSpec {
	s := in
	s.Labels = maps.Clone(in.Labels)
	if in.TaskTemplate.ContainerSpec != nil {
		cs := *in.TaskTemplate.ContainerSpec
		cs.Labels = maps.Clone(cs.Labels)
		s.TaskTemplate.ContainerSpec = &cs
	}
	s.TaskTemplate.Networks = slices.Clone(in.TaskTemplate.Networks)
	return s
}

// Slots assigns each chosen preview a stable slot from 1: a preview keeps
// the slot it has (taken, by preview name), and a new one takes the lowest
// free slot. The result maps preview name to slot.
func Slots(names []string, taken map[string]int) map[string]int {
	out := map[string]int{}
	used := map[int]bool{}
	for _, n := range names {
		if s, ok := taken[n]; ok && s > 0 && !used[s] {
			out[n], used[s] = s, true
		}
	}
	next := 1
	for _, n := range names {
		if _, ok := out[n]; ok {
			continue
		}
		for used[next] {
			next++
		}
		out[n], used[next] = next, true
	}
	return out
}

// SlotOf reads a slot number from a label value; 0 when absent or invalid.
func SlotOf(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

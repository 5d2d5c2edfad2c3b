package prune

import (
	"fmt"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/docker/docker/api/types/volume"

	"github.com/skep-cd/skep/stack"
)

// Record is what one recorded revision says Skep created: the revision's
// application and the release it applied (apply.Revision's Application and
// Release fields). A record of another application or release proves
// nothing and is ignored.
type Record struct {
	Application string
	Release     stack.Release
}

// Input is everything Orphans decides from. Orphans neither modifies nor
// keeps it.
type Input struct {
	// Owner names the controller, application and release being pruned.
	// An Owner without a controller id or release proves nothing: every
	// object is then Unmanaged.
	Owner stack.Owner
	// Declared is what git declares now for the release (the rendered
	// stack.Release); the zero value declares nothing, as when the release
	// or the whole application is gone. Configs and secrets its services
	// refer to and volumes they mount count as declared.
	Declared stack.Release
	// Live holds the live objects of the swarm; objects outside the
	// release's namespace (label com.docker.stack.namespace or the
	// "<release>_" name prefix) are ignored, not reported.
	Live []Object
	// Recorded are the owner's recorded revisions of the release, any order.
	Recorded []Record
	// Applications are the names of the applications in the current app
	// set; they tell a renamed application's objects (Restamp) from another
	// live application's (Unmanaged).
	Applications []string
	// OwnStack is the stack namespace the controller itself runs in, if
	// any; nothing in it is ever deleted or re-stamped.
	OwnStack string
	// PruneVolumes allows deleting volumes; without it they are kept.
	PruneVolumes bool
}

// Orphans decides, for every live object in the namespace of
// in.Owner.Release, whether prune deletes, keeps, re-stamps or only reports
// it. An object is Delete only when all of these hold:
//   - its labels name in.Owner exactly (controller, application, release);
//   - it is not a bookkeeping object (label io.skep.kind, as on revisions);
//   - in.Declared does not declare it;
//   - a record of in.Owner's application and release lists it;
//   - it is not in in.OwnStack, and it is not a volume unless PruneVolumes.
//
// Orphans is pure and safe to call concurrently.
func Orphans(in Input) Plan {
	owner := in.Owner
	p := Plan{Owner: owner, Items: []Item{}}
	if owner.Release == "" {
		return p
	}
	declared := namesOf(in.Declared, true)
	recorded := names{}
	for _, r := range in.Recorded {
		if r.Application == owner.Application && r.Release.Name == owner.Release {
			recorded.add(namesOf(r.Release, false))
		}
	}
	for _, obj := range in.Live {
		if !inNamespace(obj, owner.Release) {
			continue
		}
		d, why := decide(in, obj, declared, recorded)
		p.Items = append(p.Items, Item{Object: obj, Decision: d, Reason: why})
	}
	sortItems(p.Items)
	return p
}

// decide applies the proof of the package doc to one object, in order:
// the first case that holds gives the decision and its reason. Delete is
// reached only when every earlier case failed to keep the object.
func decide(in Input, obj Object, declared, recorded names) (Decision, string) {
	owner, labels := in.Owner, obj.Labels
	switch {
	case in.OwnStack != "" && (owner.Release == in.OwnStack || inNamespace(obj, in.OwnStack)):
		return Keep, "the controller's own stack"
	case owner.Controller == "":
		return Unmanaged, "no controller id to prove ownership with"
	case renamed(in, labels):
		return Restamp, fmt.Sprintf("created for application %q, which left the app set; %q declares the release now",
			labels[stack.LabelApplication], owner.Application)
	case !owner.Owns(labels):
		return Unmanaged, foreignReason(labels)
	case labels[stack.LabelKind] != "":
		return Keep, fmt.Sprintf("skep bookkeeping (%s)", labels[stack.LabelKind])
	case declared.has(obj.Kind, obj.Name):
		return Keep, "declared"
	case obj.Kind == KindVolume && !in.PruneVolumes:
		return Keep, "no longer declared; volumes are deleted only with pruneVolumes"
	case !recorded.has(obj.Kind, obj.Name):
		return Unmanaged, "labelled as this application's, but no recorded revision shows skep created it"
	}
	return Delete, "no longer declared"
}

// renamed reports whether labels name this controller and release but an
// application that left the app set, while the owner's application (in
// the app set) declares the release.
func renamed(in Input, labels map[string]string) bool {
	app := labels[stack.LabelApplication]
	return labels[stack.LabelController] == in.Owner.Controller &&
		labels[stack.LabelRelease] == in.Owner.Release &&
		app != "" && app != in.Owner.Application &&
		!slices.Contains(in.Applications, app) &&
		slices.Contains(in.Applications, in.Owner.Application)
}

// foreignReason says whose an Unmanaged object is, by its labels.
func foreignReason(labels map[string]string) string {
	ctl, app := labels[stack.LabelController], labels[stack.LabelApplication]
	switch {
	case ctl == "" && app == "":
		return "not created by skep"
	case ctl == "":
		return fmt.Sprintf("labelled for application %q without a controller id", app)
	}
	return fmt.Sprintf("owned by controller %q, application %q, release %q", ctl, app, labels[stack.LabelRelease])
}

// inNamespace reports whether obj belongs to the stack namespace ns, the
// way `docker stack` sees it: by label, or by the "<ns>_" name prefix.
func inNamespace(obj Object, ns string) bool {
	return obj.Labels[stack.LabelNamespace] == ns || strings.HasPrefix(obj.Name, ns+"_")
}

// names are object names by kind.
type names map[Kind]map[string]bool

func (n names) put(k Kind, name string) {
	if name == "" {
		return
	}
	if n[k] == nil {
		n[k] = map[string]bool{}
	}
	n[k][name] = true
}

func (n names) add(other names) {
	for k, set := range other {
		for name := range set {
			n.put(k, name)
		}
	}
}

func (n names) has(k Kind, name string) bool { return n[k][name] }

// namesOf lists the objects a release holds: its services, networks,
// configs and secrets, and the named volumes its services mount. With refs,
// configs and secrets its services refer to (external ones included) count
// too, so nothing a declared service uses is taken from under it.
func namesOf(rel stack.Release, refs bool) names {
	n := names{}
	for name := range rel.Services {
		n.put(KindService, name)
	}
	for name := range rel.Networks {
		n.put(KindNetwork, name)
	}
	for name := range rel.Configs {
		n.put(KindConfig, name)
	}
	for name := range rel.Secrets {
		n.put(KindSecret, name)
	}
	for _, spec := range rel.Services {
		cs := spec.TaskTemplate.ContainerSpec
		if cs == nil {
			continue
		}
		for _, m := range cs.Mounts {
			if m.Type == mount.TypeVolume {
				n.put(KindVolume, m.Source)
			}
		}
		if !refs {
			continue
		}
		for _, r := range cs.Configs {
			if r != nil {
				n.put(KindConfig, r.ConfigName)
			}
		}
		for _, r := range cs.Secrets {
			if r != nil {
				n.put(KindSecret, r.SecretName)
			}
		}
	}
	return n
}

// LiveObjects turns what the Engine lists into Objects, keeping each
// object's labels map (not copied; Orphans only reads it). Networks that
// are not swarm-scoped are left out: a stack's networks are.
func LiveObjects(services []swarm.Service, networks []network.Summary, configs []swarm.Config, secrets []swarm.Secret, volumes []*volume.Volume) []Object {
	out := make([]Object, 0, len(services)+len(networks)+len(configs)+len(secrets)+len(volumes))
	for _, s := range services {
		out = append(out, Object{Kind: KindService, ID: s.ID, Name: s.Spec.Name, Labels: s.Spec.Labels})
	}
	for _, n := range networks {
		if n.Scope == "swarm" {
			out = append(out, Object{Kind: KindNetwork, ID: n.ID, Name: n.Name, Labels: n.Labels})
		}
	}
	for _, c := range configs {
		out = append(out, Object{Kind: KindConfig, ID: c.ID, Name: c.Spec.Name, Labels: c.Spec.Labels})
	}
	for _, s := range secrets {
		out = append(out, Object{Kind: KindSecret, ID: s.ID, Name: s.Spec.Name, Labels: s.Spec.Labels})
	}
	for _, v := range volumes {
		if v != nil {
			out = append(out, Object{Kind: KindVolume, ID: v.Name, Name: v.Name, Labels: v.Labels})
		}
	}
	return out
}

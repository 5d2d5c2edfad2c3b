package chart

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/configfile"
)

// Requirements is requirements.yaml: the external swarm objects a chart's
// release uses but does not declare as its own. Each entry is written
// either as the object's real name alone (the short form) or as a mapping
// in the layout published Swarm charts use; see docs/charts.md. The zero
// value requires nothing.
type Requirements struct {
	Networks []NetworkRequirement `yaml:"networks"`
	Configs  []ObjectRequirement  `yaml:"configs"`
	Secrets  []ObjectRequirement  `yaml:"secrets"`
}

// NetworkRequirement is one external network. The short form (a name)
// only requires it; the mapping form defaults Driver to "overlay" and
// Attachable and AutoCreate to true, as the published layout does.
type NetworkRequirement struct {
	// Name is the network's real name on the swarm.
	Name string `yaml:"name"`
	// Driver is the driver a network created for AutoCreate gets.
	Driver string `yaml:"driver"`
	// Attachable makes a created network attachable by standalone containers.
	Attachable bool `yaml:"attachable"`
	// AutoCreate asks the controller to create the network when it is
	// missing and the application's allow list names it.
	AutoCreate bool `yaml:"autoCreate"`
	// Description says what the network is for; commands and the API show it.
	Description string `yaml:"description"`
}

// ObjectRequirement is one external config or secret. Neither is ever
// created: its content is not the chart's to give.
type ObjectRequirement struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// UnmarshalScalar reads the short form, a name alone.
func (n *NetworkRequirement) UnmarshalScalar(node *yaml.Node) error {
	name, err := shortName(node)
	n.Name = name
	return err
}

// UnmarshalScalar reads the short form, a name alone.
func (o *ObjectRequirement) UnmarshalScalar(node *yaml.Node) error {
	name, err := shortName(node)
	o.Name = name
	return err
}

func shortName(node *yaml.Node) (string, error) {
	if node.ShortTag() != "!!str" {
		return "", fmt.Errorf("want a name or a mapping with name, got %s", configfile.Describe(node))
	}
	return node.Value, nil
}

func (r Requirements) clone() Requirements {
	return Requirements{Networks: slices.Clone(r.Networks), Configs: slices.Clone(r.Configs), Secrets: slices.Clone(r.Secrets)}
}

// Entries lists every requirement, networks first, then configs and
// secrets, each in file order; for display.
func (r Requirements) Entries() []Entry {
	var out []Entry
	for _, n := range r.Networks {
		e := Entry{Kind: "network", Name: n.Name, Description: n.Description, AutoCreate: n.AutoCreate}
		if n.AutoCreate {
			e.Driver, e.Attachable = n.Driver, n.Attachable
		}
		out = append(out, e)
	}
	for _, o := range r.Configs {
		out = append(out, Entry{Kind: "config", Name: o.Name, Description: o.Description})
	}
	for _, o := range r.Secrets {
		out = append(out, Entry{Kind: "secret", Name: o.Name, Description: o.Description})
	}
	return out
}

// Entry is one requirement as commands and the API show it.
type Entry struct {
	// Kind is "network", "config" or "secret".
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// AutoCreate is true for a network the controller creates when
	// missing, with Driver and Attachable; both are zero otherwise.
	AutoCreate bool   `json:"autoCreate,omitempty"`
	Driver     string `json:"driver,omitempty"`
	Attachable bool   `json:"attachable,omitempty"`
}

// String reads like "network traefik-public (created when missing): Overlay
// network shared with Traefik".
func (e Entry) String() string {
	s := e.Kind + " " + e.Name
	if e.AutoCreate {
		s += " (created when missing)"
	}
	if e.Description != "" {
		s += ": " + e.Description
	}
	return s
}

// decodeRequirements decodes a requirements.yaml strictly, applies the
// mapping form's defaults and checks every entry; file names it in
// problems.
func decodeRequirements(file string, data []byte) (Requirements, configfile.Problems) {
	var r Requirements
	d := configfile.Decode(file, data, &r, configfile.Options{
		Want:    "a mapping of networks, configs and secrets",
		Example: "networks:\n  - name: traefik-public\n    autoCreate: true\n    description: Overlay shared with Traefik\nsecrets: [db-password]\n",
	})
	for i := range r.Networks {
		n, field := &r.Networks[i], fmt.Sprintf("networks[%d]", i)
		if !d.Present(field + ".name") {
			continue // the short form, or a mapping without a name (reported below)
		}
		if n.Driver == "" {
			n.Driver = defaultDriver
		}
		if !d.Present(field + ".attachable") {
			n.Attachable = true
		}
		if !d.Present(field + ".autoCreate") {
			n.AutoCreate = true
		}
	}
	names := func(kind string, n int, name func(int) string) {
		seen := map[string]string{}
		for i := range n {
			field := fmt.Sprintf("%s[%d]", kind, i)
			switch v := name(i); {
			case v == "":
				d.Add(field+".name", "required: the object's real name on the swarm")
			case seen[v] != "":
				d.Add(field+".name", "%s is listed twice; first as %s", configfile.Quote(v), seen[v])
			default:
				seen[v] = field
			}
		}
	}
	names("networks", len(r.Networks), func(i int) string { return r.Networks[i].Name })
	names("configs", len(r.Configs), func(i int) string { return r.Configs[i].Name })
	names("secrets", len(r.Secrets), func(i int) string { return r.Secrets[i].Name })
	return r, d.Problems()
}

// defaultDriver is the driver of a network created for a requirement that
// names none, as the published layout and docker stack deploy default it.
const defaultDriver = "overlay"

// static reports whether a requirements.yaml holds no template action, so
// Load can decode it once for every render.
func static(text string) bool { return !strings.Contains(text, "{{") }

// Requirements returns requirements.yaml as rendered for opts; the zero
// value when the chart has none. The file is a template like the chart's
// others, with the same context and helpers, so names can follow the
// release's values; a file without template actions is decoded once, by
// Load. Problems name requirements.yaml and the line of the rendered
// text, which is the file's own line unless an action spans lines.
// Requirements does no I/O and is safe to call concurrently.
func (c *Chart) Requirements(ctx context.Context, opts RenderOptions) (Requirements, error) {
	if c.reqSource == nil || static(c.reqSource.text) {
		return c.requirements.clone(), nil
	}
	if err := ctx.Err(); err != nil {
		return Requirements{}, fmt.Errorf("chart %s: %w", c.metadata.Name, err)
	}
	values, err := c.MergeValues(opts.ValuesFiles, opts.Set)
	if err != nil {
		return Requirements{}, err
	}
	e, err := newEngine(append(slices.Clone(c.templates), *c.reqSource))
	if err != nil {
		return Requirements{}, configfile.Problems{templateProblem(c.dir, err)}
	}
	data := Context{
		Values:    copyMap(values),
		Release:   Release{Name: opts.ReleaseName, Namespace: opts.ReleaseName, Revision: opts.Revision, Service: "Skep"},
		Chart:     c.metadata.clone(),
		Artifacts: maps.Clone(opts.Artifacts),
		Preview:   opts.Preview,
	}
	// The file renders under the bounds of a chart render (docs/charts.md).
	timeout := cmp.Or(opts.Timeout, RenderTimeout)
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errRenderTimeout)
	defer cancel()
	e.b = &budget{ctx: ctx}
	text, err := e.execute(requirementsFile, data)
	if err != nil && ctx.Err() != nil {
		return Requirements{}, c.stopped(ctx, requirementsFile, timeout)
	}
	if err != nil {
		return Requirements{}, configfile.Problems{templateProblem(c.dir, err)}
	}
	r, problems := decodeRequirements(path.Join(c.dir, requirementsFile), []byte(text))
	if len(problems) > 0 {
		return Requirements{}, problems
	}
	return r, nil
}

// Objects names swarm objects by kind: what an application's allow list
// grants, or what exists on the swarm.
type Objects struct {
	Networks []string
	Configs  []string
	Secrets  []string
}

// Unmet is one required object a release cannot use.
type Unmet struct {
	// Kind is "network", "config" or "secret".
	Kind string
	Name string
	// Description is the requirement's own, shown with the problem.
	Description string
	// NotAllowed is true when the application's allow list does not name
	// the object; Absent when the swarm has no object of that name. Both
	// may be true.
	NotAllowed, Absent bool
}

// String says what is missing and what to do about it.
func (u Unmet) String() string {
	var why []string
	if u.NotAllowed {
		why = append(why, "is not in the application's allow list")
	}
	if u.Absent {
		why = append(why, fmt.Sprintf("does not exist on the swarm (create it with docker %s create)", u.Kind))
	}
	what := fmt.Sprintf("%s %q", u.Kind, u.Name)
	if u.Description != "" {
		what += fmt.Sprintf(" (%s)", u.Description)
	}
	return what + " " + strings.Join(why, " and ")
}

// UnmetError lists every requirement of a chart that is not met.
type UnmetError struct {
	Chart string
	Unmet []Unmet
}

// Error names the chart and each unmet requirement, one per line.
func (e *UnmetError) Error() string {
	lines := make([]string, 0, len(e.Unmet)+1)
	lines = append(lines, fmt.Sprintf("chart %s: %d requirement(s) of requirements.yaml not met:", e.Chart, len(e.Unmet)))
	for _, u := range e.Unmet {
		lines = append(lines, "  "+u.String())
	}
	return strings.Join(lines, "\n")
}

// Check compares req with what the application allows and what exists on
// the swarm, both passed in (Check does no I/O). A network marked
// AutoCreate that is allowed but absent is not unmet: it is returned in
// create, in requirements order, for the caller to create. Every other
// required object that is not allowed or not present is listed in an
// *UnmetError, in requirements order; err is nil when none is. chart names
// the chart in the message.
func Check(chart string, req Requirements, allowed, existing Objects) (create []NetworkRequirement, err error) {
	var unmet []Unmet
	for _, n := range req.Networks {
		u := Unmet{Kind: "network", Name: n.Name, Description: n.Description,
			NotAllowed: !slices.Contains(allowed.Networks, n.Name), Absent: !slices.Contains(existing.Networks, n.Name)}
		switch {
		case u.Absent && !u.NotAllowed && n.AutoCreate:
			create = append(create, n)
		case u.NotAllowed || u.Absent:
			unmet = append(unmet, u)
		}
	}
	for _, k := range []struct {
		kind        string
		want        []ObjectRequirement
		allow, have []string
	}{
		{"config", req.Configs, allowed.Configs, existing.Configs},
		{"secret", req.Secrets, allowed.Secrets, existing.Secrets},
	} {
		for _, o := range k.want {
			u := Unmet{Kind: k.kind, Name: o.Name, Description: o.Description,
				NotAllowed: !slices.Contains(k.allow, o.Name), Absent: !slices.Contains(k.have, o.Name)}
			if u.NotAllowed || u.Absent {
				unmet = append(unmet, u)
			}
		}
	}
	if len(unmet) > 0 {
		return create, &UnmetError{Chart: chart, Unmet: unmet}
	}
	return create, nil
}

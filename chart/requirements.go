package chart

import (
	"fmt"
	"slices"
	"strings"
)

// Requirements is requirements.yaml: the external swarm objects a chart's
// release uses but does not create. Each name is the object's real name
// in the swarm. The zero value requires nothing.
type Requirements struct {
	Networks []string `yaml:"networks"`
	Configs  []string `yaml:"configs"`
	Secrets  []string `yaml:"secrets"`
}

func (r Requirements) clone() Requirements {
	return Requirements{Networks: slices.Clone(r.Networks), Configs: slices.Clone(r.Configs), Secrets: slices.Clone(r.Secrets)}
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
	return fmt.Sprintf("%s %q %s", u.Kind, u.Name, strings.Join(why, " and "))
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
// the swarm, both passed in (Check does no I/O), and returns an
// *UnmetError listing every required object that is not allowed or not
// present, in requirements order; nil when all are met. chart names the
// chart in the message.
func Check(chart string, req Requirements, allowed, existing Objects) error {
	var unmet []Unmet
	for _, k := range []struct {
		kind              string
		want, allow, have []string
	}{
		{"network", req.Networks, allowed.Networks, existing.Networks},
		{"config", req.Configs, allowed.Configs, existing.Configs},
		{"secret", req.Secrets, allowed.Secrets, existing.Secrets},
	} {
		for _, name := range k.want {
			u := Unmet{Kind: k.kind, Name: name, NotAllowed: !slices.Contains(k.allow, name), Absent: !slices.Contains(k.have, name)}
			if u.NotAllowed || u.Absent {
				unmet = append(unmet, u)
			}
		}
	}
	if len(unmet) == 0 {
		return nil
	}
	return &UnmetError{Chart: chart, Unmet: unmet}
}

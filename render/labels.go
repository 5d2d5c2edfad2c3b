package render

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	composetypes "github.com/docker/cli/cli/compose/types"
	"go.yaml.in/yaml/v3"
)

// ReservedLabelPrefix starts the labels that only Skep sets: the records it
// keeps in the swarm (ownership, revisions, holds, hooks) are told apart by
// them, so a compose file or chart that sets one, on any object, is
// refused. It is stack.LabelPrefix, compared in any case (see
// cli.TestRenderReservesTheStackLabelNamespace).
const ReservedLabelPrefix = "io.skep."

// reserved reports whether the label key is in Skep's namespace.
func reserved(key string) bool {
	return len(key) >= len(ReservedLabelPrefix) && strings.EqualFold(key[:len(ReservedLabelPrefix)], ReservedLabelPrefix)
}

// checkLabels returns an *Error, at the label's line, for every label in
// Skep's namespace that cfg sets on a service, its deploy section, a
// network, a volume, a config or a secret.
func (r *renderer) checkLabels(cfg *composetypes.Config) []error {
	var errs []error
	check := func(base string, labels map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			if !reserved(k) {
				continue
			}
			file, line := r.findLabel(base, k)
			errs = append(errs, &Error{File: file, Line: line, Field: base + "." + k,
				Err: fmt.Errorf("label %s is reserved for skep; remove it", k)})
		}
	}
	for _, svc := range cfg.Services {
		check("services."+svc.Name+".labels", svc.Labels)
		check("services."+svc.Name+".deploy.labels", svc.Deploy.Labels)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Networks)) {
		check("networks."+name+".labels", cfg.Networks[name].Labels)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Volumes)) {
		check("volumes."+name+".labels", cfg.Volumes[name].Labels)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Configs)) {
		check("configs."+name+".labels", cfg.Configs[name].Labels)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Secrets)) {
		check("secrets."+name+".labels", cfg.Secrets[name].Labels)
	}
	return errs
}

// findLabel locates label key of the labels at base (a mapping or a list
// of key=value items) in the last file setting it; a label that no file
// spells literally (it came from interpolation) is located at the labels
// themselves.
func (r *renderer) findLabel(base, key string) (string, int) {
	for i := len(r.files) - 1; i >= 0; i-- {
		_, labels := find(r.files[i].doc, strings.Split(base, "."), 0)
		if labels == nil {
			continue
		}
		switch labels.Kind {
		case yaml.MappingNode:
			for j := 0; j+1 < len(labels.Content); j += 2 {
				if k := labels.Content[j]; k.Value == key {
					return r.files[i].name, k.Line
				}
			}
		case yaml.SequenceNode:
			for _, item := range labels.Content {
				if k, _, _ := strings.Cut(item.Value, "="); k == key {
					return r.files[i].name, item.Line
				}
			}
		}
	}
	return r.find(base)
}

package appset

import (
	"fmt"
	"slices"
	"strings"

	"github.com/skep-cd/skep/configfile"
)

// checkDependencies reports, across all files of a set, each dependsOn
// entry that names no application of the set, the application itself, an
// application already listed, or one that leads back to it: a cycle could
// never sync. Each problem is filed at the entry.
func checkDependencies(files []*parsedFile) {
	refs := map[string]appRef{}
	for _, f := range files {
		for i, a := range f.doc.Applications {
			if _, dup := refs[a.Name]; a.Name != "" && !dup {
				refs[a.Name] = appRef{f, i}
			}
		}
	}
	// edges keeps only dependencies that passed the checks of one entry,
	// so that a cycle is reported on its own and not beside an unknown name.
	edges := map[string][]dependency{}
	for _, f := range files {
		for i, a := range f.doc.Applications {
			ref := appRef{f, i}
			for j, dep := range a.DependsOn {
				field := fmt.Sprintf("%s.dependsOn[%d]", ref.field(), j)
				_, known := refs[dep]
				switch {
				case dep == a.Name:
					f.d.Add(field, "an application cannot depend on itself")
				case !known:
					f.d.Add(field, "unknown application %s; want the name of an application of the set", configfile.Quote(dep))
				case slices.Index(a.DependsOn, dep) < j:
					f.d.Add(field, "%s is listed twice", configfile.Quote(dep))
				default:
					edges[a.Name] = append(edges[a.Name], dependency{name: dep, file: f, field: field})
				}
			}
		}
	}
	// Depth first, in declaration order: an edge back to an application on
	// the current path closes a cycle, reported at that edge with the path.
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(name string)
	visit = func(name string) {
		state[name] = onPath
		path = append(path, name)
		for _, e := range edges[name] {
			switch state[e.name] {
			case onPath:
				cycle := append(slices.Clone(path[slices.Index(path, e.name):]), e.name)
				e.file.d.Add(e.field, "dependency cycle %s; an application in a cycle could never sync", strings.Join(cycle, " → "))
			case unseen:
				visit(e.name)
			}
		}
		path = path[:len(path)-1]
		state[name] = done
	}
	for _, f := range files {
		for _, a := range f.doc.Applications {
			if state[a.Name] == unseen {
				visit(a.Name)
			}
		}
	}
}

// dependency is one checked dependsOn entry, with where it was written.
type dependency struct {
	name  string
	file  *parsedFile
	field string
}

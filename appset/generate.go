package appset

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/skep-cd/skep/configfile"
)

// Generator makes one application per directory of a repository that
// matches one of its globs: the application is named after the directory's
// last element and deploys that directory, with the template's fields.
type Generator struct {
	// Name identifies the generator, as status and `skep app list` show it.
	Name string
	// Repo and Revision are the repository whose directories are listed
	// and the branch, tag or commit to list them at; the generated
	// applications deploy from there too.
	Repo     string
	Revision string
	// Directories are globs (path.Match, one element per '*') of
	// directories relative to the repository root, e.g. stacks/*.
	Directories []string
}

// generator is a Generator as the set keeps it: with its template, its
// place in the file for problems, and its file form for MarshalYAML.
type generator struct {
	Generator
	tmpl Application // name, release and source.repo/revision/path unset
	at   configfile.Problem
}

// toFile is g in file form, its template with every default spelled out,
// for MarshalYAML.
func (g generator) toFile() fileGenerator {
	t := fromApplication(g.tmpl)
	t.Name, t.Release, t.Source.Repo, t.Source.Revision, t.Source.Path = "", "", "", "", ""
	return fileGenerator{Name: g.Name, Repo: g.Repo, Revision: g.Revision, Directories: slices.Clone(g.Directories), Template: t}
}

// Generators returns a copy of the set's generators, in file order.
func (s *Set) Generators() []Generator {
	if s == nil {
		return nil
	}
	out := make([]Generator, len(s.generators))
	for i, g := range s.generators {
		out[i] = g.Generator
		out[i].Directories = slices.Clone(g.Directories)
	}
	return out
}

// validateGenerator checks one generator: its name, repository, revision,
// globs, and its template as an application's fields without those the
// generator sets.
func validateGenerator(d *configfile.Document, g *fileGenerator, field string) {
	switch {
	case g.Name == "":
		d.Add(field+".name", "missing; want a name for the generator, shown beside what it generates")
	case !dnsLabel.MatchString(g.Name):
		d.Add(field+".name", "want a DNS label (lower-case letters, digits and '-'), got %s", configfile.Quote(g.Name))
	}
	if g.Repo == "" {
		d.Add(field+".repo", "missing; want the URL or local path of the git repository whose directories make applications")
	} else if msg := checkRepo(g.Repo); msg != "" {
		d.Add(field+".repo", "%s", msg)
	}
	if g.Revision == "" {
		g.Revision = DefaultRevision
	}
	if msg := checkRevision(g.Revision); msg != "" {
		d.Add(field+".revision", "%s", msg)
	}
	if len(g.Directories) == 0 {
		d.Add(field+".directories", "missing; want globs of directories like stacks/*")
	}
	for i, glob := range g.Directories {
		item := fmt.Sprintf("%s.directories[%d]", field, i)
		if msg := checkRelative(glob, "the repository", true); msg != "" {
			d.Add(item, "%s", msg)
		} else if _, err := path.Match(glob, ""); err != nil {
			d.Add(item, "want a glob of directories like stacks/*, got %s", configfile.Quote(glob))
		}
	}
	t := &g.Template
	tf := field + ".template"
	for _, set := range []struct {
		key     string
		written bool
	}{
		{"name", t.Name != ""}, {"release", t.Release != ""}, {"source.repo", t.Source.Repo != ""},
		{"source.revision", t.Source.Revision != ""}, {"source.path", t.Source.Path != ""},
	} {
		if set.written {
			d.Add(tf+"."+set.key, "set by the generator for each directory; leave it out of the template")
		}
	}
	// The template is checked as an application would be, with the
	// fields the generator fills in standing in for what it will write.
	probe := *t
	probe.Name, probe.Release, probe.Source.Repo, probe.Source.Revision, probe.Source.Path = "generated", "", "/generated", "", ""
	setDefaults(&probe)
	validateApp(d, &probe, tf)
}

// templateOf is g's template as an Application, defaulted, without name,
// release and source location.
func templateOf(g fileGenerator) Application {
	t := g.Template
	t.Name, t.Source.Repo, t.Source.Revision, t.Source.Path = "generated", g.Repo, g.Revision, "."
	setDefaults(&t)
	a := toApplication(t)
	a.Name, a.Release, a.Source.Path = "", "", ""
	return a
}

// checkGenerators reports generator names used twice across the files of
// a set, and template dependsOn entries that name no declared application
// (a generated application may only depend on declared ones, so that
// generating one never makes a cycle).
func checkGenerators(files []*parsedFile) {
	names := map[string]string{}
	declared := map[string]bool{}
	for _, f := range files {
		for _, a := range f.doc.Applications {
			declared[a.Name] = true
		}
	}
	for _, f := range files {
		for i, g := range f.doc.Generators {
			field := fmt.Sprintf("generators[%d]", i)
			if first, dup := names[g.Name]; dup && g.Name != "" {
				f.d.Add(field+".name", "generator %s is already defined at %s", configfile.Quote(g.Name), first)
			} else {
				line, col := f.d.Position(field + ".name")
				names[g.Name] = fmt.Sprintf("%s:%d:%d", f.name, line, col)
			}
			if g.Template.Self {
				f.d.Add(field+".template.self", "a generated application cannot be the controller itself; declare that application in applications")
			}
			for j, dep := range g.Template.DependsOn {
				if !declared[dep] {
					f.d.Add(fmt.Sprintf("%s.template.dependsOn[%d]", field, j), "unknown application %s; a generated application may depend only on applications the set declares", configfile.Quote(dep))
				}
			}
		}
	}
}

// Expand returns a new set: s with one application per directory found for
// each generator (found is keyed by generator name and holds clean slash
// paths relative to the repository root, as matched by its globs). A
// directory whose name gives no application name, or one already taken by
// an application of the set or another directory, is a problem located at
// the generator's directories: the whole expansion is refused, as an
// invalid set is. s is not changed.
func (s *Set) Expand(found map[string][]string) (*Set, error) {
	out := &Set{byName: maps.Clone(s.byName), swarmAt: maps.Clone(s.swarmAt), windows: s.windows, generators: s.generators}
	out.apps = slices.Clone(s.apps)
	names := map[string]string{}    // name → who has it
	releases := map[string]string{} // swarm and release → who has it
	for _, a := range s.apps {
		p := s.swarmAt[a.Name]
		who := fmt.Sprintf("application %s (%s:%d)", a.Name, p.File, p.Line)
		names[a.Name] = who
		releases[a.Destination.Swarm+"\x00"+a.Release] = who
	}
	var problems configfile.Problems
	for _, g := range s.generators {
		dirs := slices.Clone(found[g.Name])
		slices.Sort(dirs)
		for _, dir := range slices.Compact(dirs) {
			fail := func(format string, args ...any) {
				p := g.at
				p.Message = fmt.Sprintf(format, args...)
				problems = append(problems, p)
			}
			name := nameOf(dir)
			who := fmt.Sprintf("directory %s of generator %s", dir, g.Name)
			key := g.tmpl.Destination.Swarm + "\x00" + name
			switch {
			case name == "":
				fail("directory %s gives no application name: its last element needs a letter or digit", configfile.Quote(dir))
				continue
			case names[name] != "":
				fail("directory %s gives the application name %s, already used by %s; rename the directory", configfile.Quote(dir), name, names[name])
				continue
			case releases[key] != "":
				fail("directory %s gives the release %s, already used by %s; rename the directory", configfile.Quote(dir), name, releases[key])
				continue
			}
			names[name], releases[key] = who, who
			a := g.tmpl.clone()
			a.Name, a.Release, a.Generator = name, name, g.Name
			a.Source.Repo, a.Source.Revision, a.Source.Path = g.Repo, g.Revision, dir
			a.SyncWindows = nil
			for _, w := range s.windows {
				if w.Covers(name) {
					a.SyncWindows = append(a.SyncWindows, w)
				}
			}
			out.byName[name] = len(out.apps)
			out.swarmAt[name] = g.at
			out.apps = append(out.apps, a)
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return out, nil
}

// nameOf derives an application name from a directory: its last element,
// lower-cased, every run of other characters than letters and digits made
// one '-', trimmed of '-' and cut to 63 characters; "" when nothing is
// left. The result is always a DNS label or "".
func nameOf(dir string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(path.Base(dir)) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	name := b.String()
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	return name
}

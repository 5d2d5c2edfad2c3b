package artifact

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/distribution/reference"
	"golang.org/x/mod/semver"

	"github.com/skep-cd/skep/configfile"
)

// nativeEntry is one entry of the native shape, as written.
type nativeEntry struct {
	Kind   string            `yaml:"kind"`
	Name   string            `yaml:"name"`
	Image  string            `yaml:"image"`
	Source string            `yaml:"source"`
	Deploy *fileDeploy       `yaml:"deploy"`
	Labels map[string]string `yaml:"labels"`
}

// releaseEntry is one entry of the release-repository shape, as written.
type releaseEntry struct {
	Docker   string      `yaml:"docker"`
	Github   string      `yaml:"github"`
	Provider string      `yaml:"provider"`
	Deploy   *fileDeploy `yaml:"deploy"`
}

type fileDeploy struct {
	Release string `yaml:"release"`
	Branch  string `yaml:"branch"`
	Suspend bool   `yaml:"suspend"`
	Preview bool   `yaml:"preview"`
}

var (
	// A name must become a compose variable (Variable) and a parameter
	// key (Parameter): lower-case words joined by single separators.
	nameRule = regexp.MustCompile(`^[a-z][a-z0-9]*([-_.][a-z0-9]+)*$`)
	// A GitHub repository name, optionally with its owner.
	githubRule = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9-]*/)?[A-Za-z0-9._-]+$`)
	// What Docker accepts as a tag.
	dockerTag = regexp.MustCompile(`^[\w][\w.-]{0,127}$`)
)

const (
	strategies  = "want exactly one of release, branch, suspend"
	nameExample = "want lower-case letters and digits starting with a letter, words joined by single '-', '_' or '.' (web-api becomes WEB_API and WebApiVersion)"
)

// seenName is where a name's variable prefix was first declared.
type seenName struct {
	name, file string
	line       int
}

// validator decodes and checks the files of one environment. Rules within
// an entry are checked per file; uniqueness and the infrastructure count
// span the environment.
type validator struct {
	shape    Shape
	opts     LoadOptions
	docs     []*configfile.Document
	problems configfile.Problems
	entries  []Entry
	seen     map[string]seenName
	// infra counts infrastructure entries; firstInfra locates the first.
	infra      int
	firstInfra string
	// counted is the number of entries declared, valid or not.
	counted int
}

func (v *validator) file(f file) {
	if f.problem != "" {
		v.problems = append(v.problems, configfile.Problem{File: f.rel, Message: f.problem})
		return
	}
	if v.shape == NativeShape {
		var list []nativeEntry
		d := configfile.Decode(f.rel, f.data, &list, configfile.Options{Want: "a list of entries", Example: "- name: web\n  image: registry.example.org/team/web\n  source: https://git.example.org/team/web.git\n  deploy: {release: v1.2.3}"})
		v.docs = append(v.docs, d)
		for i := range list {
			v.native(d, fmt.Sprintf("[%d]", i), &list[i])
		}
		return
	}
	var list []releaseEntry
	d := configfile.Decode(f.rel, f.data, &list, configfile.Options{Want: "a list of entries", Example: "- docker: web\n  github: web\n  deploy: {release: v1.2.3}"})
	v.docs = append(v.docs, d)
	for i := range list {
		v.release(d, fmt.Sprintf("[%d]", i), f.kind, &list[i])
	}
}

func (v *validator) native(d *configfile.Document, field string, in *nativeEntry) {
	e := Entry{Kind: Kind(in.Kind), Name: in.Name, Image: in.Image, Source: in.Source, Labels: in.Labels, File: d.File()}
	switch {
	case !d.Present(field + ".kind"):
		e.Kind = Service
	case e.Kind != Service && e.Kind != Infrastructure:
		d.Add(field+".kind", "want service or infrastructure, got %s", configfile.Quote(in.Kind))
	}
	ok := v.name(d, field+".name", in.Name, &e)
	switch {
	case e.Kind == Infrastructure && d.Present(field+".image"):
		d.Add(field+".image", "an infrastructure entry has no image; its version is a revision of its source")
		ok = false
	case e.Kind == Service && in.Image == "":
		d.Add(field+".image", "missing; want the OCI repository of the service's image, e.g. registry.example.org/team/web")
		ok = false
	case e.Kind == Service:
		ok = checkImage(d, field+".image", in.Image) && ok
	}
	if in.Source == "" {
		d.Add(field+".source", "missing; want the URL of the git repository whose tags and branches define versions")
		ok = false
	} else if msg := checkSource(in.Source); msg != "" {
		d.Add(field+".source", "%s", msg)
		ok = false
	}
	ok = v.deploy(d, field, e.Kind, in.Deploy, &e) && ok
	v.add(d, field, e, ok)
}

func (v *validator) release(d *configfile.Document, field string, kind Kind, in *releaseEntry) {
	e := Entry{Kind: kind, Provider: in.Provider, File: d.File()}
	ok := true
	if kind == Service {
		if d.Present(field + ".provider") {
			d.Add(field+".provider", "a service entry has no provider; provider belongs on the entry in %s/", infrastructureDir)
			ok = false
		}
		if in.Docker == "" {
			d.Add(field+".docker", "missing; want the image name of the service, e.g. docker: web")
			ok = false
		} else {
			// An image is checked only for a valid name: a name that
			// cannot be a variable is rarely a valid repository either,
			// and one problem says it.
			if v.name(d, field+".docker", in.Docker, &e) {
				ok = v.image(d, field+".docker", in.Docker, &e) && ok
			} else {
				ok = false
			}
		}
	} else {
		if d.Present(field + ".docker") {
			d.Add(field+".docker", "an infrastructure entry has no image; docker belongs on entries in %s/", serviceDir)
			ok = false
		}
		if in.Provider == "" {
			d.Add(field+".provider", "missing; want what deploys the infrastructure, e.g. provider: cloudformation (Skep deploys it as a Swarm stack whatever it says)")
			ok = false
		}
	}
	if in.Github == "" {
		d.Add(field+".github", "missing; want the name of the git repository whose tags and branches define versions, e.g. github: web")
		ok = false
	} else {
		if kind == Infrastructure {
			ok = v.name(d, field+".github", in.Github, &e) && ok
		}
		ok = v.source(d, field+".github", in.Github, &e) && ok
	}
	ok = v.deploy(d, field, kind, in.Deploy, &e) && ok
	v.add(d, field, e, ok)
}

// image composes a service's image of the registry prefix and its docker
// name, and checks it.
func (v *validator) image(d *configfile.Document, field, docker string, e *Entry) bool {
	if v.opts.Registry == "" {
		if v.opts.NamesOnly {
			return checkImage(d, field, docker)
		}
		d.Add(field, "no registry prefix to make an image of %s; set the registry option (skep validate --registry, e.g. registry.example.org/team)", configfile.Quote(docker))
		return false
	}
	e.Image = strings.TrimSuffix(v.opts.Registry, "/") + "/" + docker
	return checkImage(d, field, e.Image)
}

// source composes an entry's source of the git base and its github name,
// and checks it.
func (v *validator) source(d *configfile.Document, field, github string, e *Entry) bool {
	if !githubRule.MatchString(github) || strings.Contains(github, "..") {
		d.Add(field, "want a repository name (letters, digits, '.', '_' and '-', optionally after its owner and '/'), got %s", configfile.Quote(github))
		return false
	}
	if v.opts.GitBase == "" {
		if v.opts.NamesOnly {
			return true
		}
		d.Add(field, "no git base to make a repository URL of %s; set the git base option (skep validate --git-base, e.g. https://github.com/team)", configfile.Quote(github))
		return false
	}
	e.Source = strings.TrimSuffix(v.opts.GitBase, "/") + "/" + github
	return true
}

// name checks that name can become a variable name, and records it.
func (v *validator) name(d *configfile.Document, field, name string, e *Entry) bool {
	if name == "" {
		d.Add(field, "missing; every entry needs a name")
		return false
	}
	if !nameRule.MatchString(name) {
		d.Add(field, "cannot become a variable name: %s; got %s", nameExample, configfile.Quote(name))
		return false
	}
	e.Name = name
	return true
}

// deploy checks a deploy block and stores it in e.
func (v *validator) deploy(d *configfile.Document, field string, kind Kind, in *fileDeploy, e *Entry) bool {
	field += ".deploy"
	if in == nil {
		if !d.Present(field) {
			d.Add(field, "missing; %s, e.g. deploy: {release: v1.2.3}", strategies)
		} else {
			d.Add(field, "empty; %s", strategies)
		}
		return false
	}
	var set []string
	if d.Present(field + ".release") {
		set = append(set, "release")
	}
	if d.Present(field + ".branch") {
		set = append(set, "branch")
	}
	if in.Suspend {
		set = append(set, "suspend")
	}
	ok := true
	switch len(set) {
	case 0:
		d.Add(field, "no strategy; %s (preview is not a strategy)", strategies)
		ok = false
	case 1:
	default:
		d.Add(field, "%s strategies (%s); %s", count(len(set)), andList(set), strategies)
		ok = false
	}
	if d.Present(field + ".release") {
		if msg := checkRelease(in.Release); msg != "" {
			d.Add(field+".release", "%s", msg)
			ok = false
		}
	}
	if d.Present(field + ".branch") {
		if msg := checkBranch(in.Branch); msg != "" {
			d.Add(field+".branch", "%s", msg)
			ok = false
		}
	}
	if in.Preview && kind == Infrastructure {
		d.Add(field+".preview", "previews are for service images only; remove preview from the infrastructure entry")
		ok = false
	}
	e.Deploy = Deploy{Release: in.Release, Branch: in.Branch, Suspend: in.Suspend, Preview: in.Preview}
	return ok
}

// add records an entry: its position, the environment-wide counts, and the
// entry itself when it is valid.
func (v *validator) add(d *configfile.Document, field string, e Entry, ok bool) {
	e.Line, _ = d.Position(field)
	v.counted++
	if v.counted == MaxEntries+1 {
		d.Add(field, "more than %d entries in the environment; split it", MaxEntries)
	}
	if e.Kind == Infrastructure {
		v.infra++
		switch {
		case v.infra == 1:
			v.firstInfra = fmt.Sprintf("%s:%d", e.File, e.Line)
		case v.shape == ReleaseShape:
			d.Add(field, "a second infrastructure entry (the first is at %s); an environment has exactly one", v.firstInfra)
			ok = false
		default:
			d.Add(field, "a second infrastructure entry (the first is at %s); an environment has at most one", v.firstInfra)
			ok = false
		}
	}
	if e.Name != "" {
		key := Variable(e.Name)
		if first, dup := v.seen[key]; dup {
			if first.name == e.Name {
				d.Add(nameField(v.shape, e.Kind, field), "duplicate name %s; first at %s:%d", configfile.Quote(e.Name), first.file, first.line)
			} else {
				d.Add(nameField(v.shape, e.Kind, field), "%s and %s (%s:%d) both become the variable prefix %s; rename one", configfile.Quote(e.Name), configfile.Quote(first.name), first.file, first.line, key)
			}
			ok = false
		} else {
			v.seen[key] = seenName{name: e.Name, file: e.File, line: e.Line}
		}
	}
	if ok {
		v.entries = append(v.entries, e)
	}
}

// nameField returns the field an entry's name is written in.
func nameField(shape Shape, kind Kind, field string) string {
	switch {
	case shape == NativeShape:
		return field + ".name"
	case kind == Infrastructure:
		return field + ".github"
	}
	return field + ".docker"
}

// environment checks the rules that span the environment's files.
func (v *validator) environment() {
	if v.shape == ReleaseShape && v.infra == 0 {
		v.problems = append(v.problems, configfile.Problem{File: infrastructureDir + "/",
			Message: "no infrastructure entry; the release-repository shape wants exactly one, e.g. - {github: infrastructure, provider: cloudformation, deploy: {branch: main}}"})
	}
}

func checkImage(d *configfile.Document, field, image string) bool {
	ref, err := reference.ParseNormalizedNamed(image)
	switch {
	case err != nil:
		d.Add(field, "want an OCI repository name in lower case without tag or digest, e.g. registry.example.org/team/web; got %s: %v", configfile.Quote(image), err)
		return false
	case !reference.IsNameOnly(ref):
		d.Add(field, "has a tag or digest; write the repository only (the version comes from deploy), got %s", configfile.Quote(image))
		return false
	}
	return true
}

func checkSource(source string) string {
	if strings.ContainsFunc(source, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "want the URL of a git repository, without spaces or control characters"
	}
	if u, err := url.Parse(source); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			// Never quote it: the password would reach a log.
			return "holds a password; give git credentials to the controller instead"
		}
	}
	return ""
}

// checkRelease returns what is wrong with a release tag, or "".
func checkRelease(tag string) string {
	const want = "want v and a semantic version, like v1.2.3, v1.2 or v1.3.0-rc.1"
	switch {
	case tag == "":
		return "empty; " + want
	case !semver.IsValid(tag) && semver.IsValid("v"+tag):
		return fmt.Sprintf("missing the v prefix; write %s", configfile.Quote("v"+tag))
	case !semver.IsValid(tag):
		return fmt.Sprintf("%s, got %s", want, configfile.Quote(tag))
	case semver.Build(tag) != "":
		return fmt.Sprintf("build metadata (%s) cannot be part of a Docker tag; drop it", configfile.Quote(semver.Build(tag)))
	case !dockerTag.MatchString(tag):
		return fmt.Sprintf("not usable as a Docker tag (at most 128 letters, digits, '_', '.' and '-'), got %s", configfile.Quote(tag))
	}
	return ""
}

// checkBranch returns what is wrong with a branch name as git's
// check-ref-format sees it, or "".
func checkBranch(branch string) string {
	const want = "want a git branch name"
	switch {
	case branch == "":
		return "empty; " + want + ", e.g. main"
	case strings.ContainsFunc(branch, func(r rune) bool { return r <= ' ' || r == 0x7f || strings.ContainsRune("~^:?*[\\", r) }):
		return fmt.Sprintf("%s without spaces, control characters or any of ~ ^ : ? * [ \\, got %s", want, configfile.Quote(branch))
	case strings.HasPrefix(branch, "-"):
		return fmt.Sprintf("%s not starting with '-', got %s", want, configfile.Quote(branch))
	case strings.Contains(branch, "..") || strings.Contains(branch, "@{") || branch == "@":
		return fmt.Sprintf("%s without '..' or '@{', got %s", want, configfile.Quote(branch))
	case strings.HasSuffix(branch, ".") || strings.HasSuffix(branch, "/"):
		return fmt.Sprintf("%s not ending with '.' or '/', got %s", want, configfile.Quote(branch))
	}
	for _, part := range strings.Split(branch, "/") {
		if part == "" || strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".lock") {
			return fmt.Sprintf("%s whose parts between '/' are not empty, do not start with '.' and do not end with .lock, got %s", want, configfile.Quote(branch))
		}
	}
	return ""
}

func count(n int) string {
	if n == 2 {
		return "two"
	}
	return "three"
}

// andList joins words as "a and b" or "a, b and c".
func andList(words []string) string {
	if len(words) == 1 {
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// check validates the prefixes themselves, so that a bad option is one
// error rather than a problem on every entry.
func (o LoadOptions) check() error {
	if o.Registry != "" {
		if o.Registry != strings.ToLower(o.Registry) {
			return fmt.Errorf("registry prefix %s: want lower case, as image references are", configfile.Quote(o.Registry))
		}
		if _, err := reference.ParseNormalizedNamed(strings.TrimSuffix(o.Registry, "/") + "/name"); err != nil {
			return fmt.Errorf("registry prefix %s: want a registry host and optional path in lower case, e.g. registry.example.org/team: %w", configfile.Quote(o.Registry), err)
		}
	}
	if o.GitBase != "" {
		if msg := checkSource(o.GitBase); msg != "" {
			return fmt.Errorf("git base: %s", msg)
		}
	}
	return nil
}

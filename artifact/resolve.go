package artifact

import (
	"context"
	"fmt"
	"strings"
)

// Git is what resolution asks of git: the commit a revision (a tag or a
// branch) of a repository points at now. *gitsource.Cache implements it,
// with one ls-remote per repository per tick.
type Git interface {
	Resolve(ctx context.Context, repo, revision string) (string, error)
}

// Images is what resolution asks of a registry; *Registry implements it.
type Images interface {
	Check(ctx context.Context, image, tag string) Check
}

// DefaultTagTemplate is the image tag a branch head commit is built under,
// when the application does not say otherwise.
const DefaultTagTemplate = "{commit}"

// ResolveOptions are the inputs of Resolve besides the entries.
type ResolveOptions struct {
	Git Git
	// Images checks that a desired image exists; nil turns the gate off:
	// every resolved desired version counts as pushed, unpinned.
	Images Images
	// Current is the version the swarm runs, by artifact name: a service
	// artifact's image tag, with "@digest" when the running image is
	// pinned, or the infrastructure's deployed commit.
	Current map[string]string
	// TagTemplate turns a branch head into an image tag: {commit} is the
	// full commit, {short} its first 12 digits, {branch} the branch with
	// every "/" as "-". "" means DefaultTagTemplate.
	TagTemplate string
}

// Resolve works out, for each entry, the version git asks for, the one the
// swarm runs and the registry's answer, and returns them in entries' order.
// It never fails as a whole: what could not be resolved is said in the
// object's Condition and Reason, and Version falls back to what runs.
func Resolve(ctx context.Context, entries []Entry, opts ResolveOptions) []Object {
	out := make([]Object, 0, len(entries))
	for _, e := range entries {
		o := Object{Entry: e}
		o.Current, o.CurrentDigest, _ = strings.Cut(opts.Current[e.Name], "@")
		if e.Deploy.Suspend {
			out = append(out, o)
			continue
		}
		revision := e.Deploy.Release
		if e.Deploy.Branch != "" {
			revision = e.Deploy.Branch
		}
		commit, err := opts.Git.Resolve(ctx, e.Source, revision)
		if err != nil {
			o.Condition, o.Reason = Failed, fmt.Sprintf("resolve %s of %s: %v", revision, e.Name, err)
			out = append(out, o)
			continue
		}
		switch {
		case e.Kind == Infrastructure:
			// The stack definitions have no image: the commit is the version.
			o.Desired, o.Condition = commit, Pushed
		case e.Deploy.Release != "":
			o.Desired = e.Deploy.Release
		default:
			o.Desired = BranchTag(opts.TagTemplate, e.Deploy.Branch, commit)
		}
		if e.Kind == Service {
			o.check(ctx, opts.Images)
		}
		out = append(out, o)
	}
	return out
}

// check asks images whether o's desired image exists.
func (o *Object) check(ctx context.Context, images Images) {
	if images == nil {
		o.Condition, o.Reason = Pushed, "registry look-ups are off"
		return
	}
	c := images.Check(ctx, o.Entry.Image, o.Desired)
	o.Condition, o.Digest, o.Reason = c.Condition, c.Digest, c.Reason
}

// BranchTag renders a tag template for a branch head commit; see
// ResolveOptions.TagTemplate.
func BranchTag(template, branch, commit string) string {
	if template == "" {
		template = DefaultTagTemplate
	}
	short := commit
	if len(short) > 12 {
		short = short[:12]
	}
	return strings.NewReplacer("{commit}", commit, "{short}", short, "{branch}", strings.ReplaceAll(branch, "/", "-")).Replace(template)
}

// Variables returns the render variables of objs: for each artifact
// <NAME>_VERSION (the version used), <NAME>_IMAGE (the full reference,
// pinned to the digest when known), <NAME>_DIGEST, and the parameter key
// form <Name>Version. An artifact without a version adds nothing.
func Variables(objs []Object) map[string]string {
	vars := map[string]string{}
	for _, o := range objs {
		v := o.Version()
		if v == "" {
			continue
		}
		prefix := Variable(o.Entry.Name)
		vars[prefix+"_VERSION"] = v
		vars[Parameter(o.Entry.Name)] = v
		if o.Entry.Kind == Service {
			vars[prefix+"_IMAGE"] = o.Reference()
			_, digest, _ := strings.Cut(o.Digested(), "@")
			vars[prefix+"_DIGEST"] = digest
		}
	}
	return vars
}

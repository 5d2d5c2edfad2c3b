package appset

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/window"
)

var (
	// A DNS label (RFC 1123), so a name can appear in a hostname.
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	// What `docker stack deploy` accepts as a namespace once lower-cased.
	stackName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	// Docker object names (networks, configs, secrets, volumes).
	objectName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,254}$`)
	// capabilityName is a Linux capability as cap_add takes it.
	capabilityName = regexp.MustCompile(`^(?i:(CAP_)?[A-Z][A-Z0-9_]{1,30})$`)
	// Interpolation variable names, as compose reads them.
	variableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// validateDoc checks one decoded, defaulted file on its own. Rules that span
// applications (unique names and releases) are in checkUnique.
func validateDoc(d *configfile.Document, doc *fileDoc) {
	switch {
	case !d.Present("apiVersion"):
		d.Add("apiVersion", "missing; want %s", APIVersion)
	case doc.APIVersion != APIVersion:
		d.Add("apiVersion", "want %s, got %s", APIVersion, configfile.Quote(doc.APIVersion))
	}
	// Generators make applications of their own: the list then defaults
	// to []. Without them a missing list is more likely a slip than an
	// empty set.
	if !d.Present("applications") && !d.Present("generators") {
		d.Add("applications", "missing; write `applications: []` for an empty set")
	}
	for i := range doc.Applications {
		validateApp(d, &doc.Applications[i], fmt.Sprintf("applications[%d]", i))
	}
	for i := range doc.SyncWindows {
		validateWindow(d, doc.SyncWindows[i], fmt.Sprintf("syncWindows[%d]", i))
	}
	for i := range doc.Generators {
		validateGenerator(d, &doc.Generators[i], fmt.Sprintf("generators[%d]", i))
	}
}

// validateWindow checks one sync window: its kind, schedule, duration,
// application globs and time zone.
func validateWindow(d *configfile.Document, w fileWindow, field string) {
	switch window.Kind(w.Kind) {
	case window.Allow, window.Deny:
	case "":
		d.Add(field+".kind", "missing; want allow or deny")
	default:
		d.Add(field+".kind", "want allow or deny, got %s", configfile.Quote(w.Kind))
	}
	if w.Schedule == "" {
		d.Add(field+".schedule", "missing; want five cron fields like \"0 22 * * *\" (minute hour day-of-month month day-of-week)")
	} else if _, err := window.ParseCron(w.Schedule); err != nil {
		d.Add(field+".schedule", "%v", err)
	}
	switch {
	case !w.Duration.set:
		d.Add(field+".duration", "missing; want how long the window lasts from each start, like 8h")
	case w.Duration.value <= 0:
		d.Add(field+".duration", "want a positive duration like 8h, got %s", w.Duration.value)
	}
	if len(w.Applications) == 0 {
		d.Add(field+".applications", "missing; want globs of the application names the window covers, like [\"prod-*\"] or [\"*\"]")
	}
	for i, g := range w.Applications {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			d.Add(fmt.Sprintf("%s.applications[%d]", field, i), "want a glob of application names like prod-* or *, got %s", configfile.Quote(g))
		}
	}
	if _, err := window.LoadZone(w.TimeZone); err != nil {
		d.Add(field+".timeZone", "%v", err)
	}
}

// validateApp checks one defaulted application, filing each problem in d
// under field (applications[i]) plus the key's path.
func validateApp(d *configfile.Document, a *fileApp, field string) {
	switch {
	case a.Name == "":
		d.Add(field+".name", "missing; every application needs a name")
	case !dnsLabel.MatchString(a.Name):
		d.Add(field+".name", "want a DNS label (lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters), got %s", configfile.Quote(a.Name))
	}
	// A defaulted release is the name, and a bad name is reported once,
	// under name.
	if !a.releaseDefaulted && !stackName.MatchString(a.Release) {
		d.Add(field+".release", "want a stack name (lower-case letters, digits, '_' and '-', starting with a letter or digit, at most 63 characters), got %s", configfile.Quote(a.Release))
	}

	src := field + ".source"
	if a.Source.Repo == "" && a.Artifacts == nil {
		d.Add(src+".repo", "missing; want the URL or local path of a git repository")
	} else if msg := checkRepo(a.Source.Repo); a.Source.Repo != "" && msg != "" {
		d.Add(src+".repo", "%s", msg)
	}
	if a.Artifacts != nil {
		validateArtifacts(d, a.Artifacts, field+".artifacts")
	}
	if a.Chart != nil {
		validateChart(d, a.Chart, field+".chart")
	}
	if msg := checkRevision(a.Source.Revision); msg != "" {
		d.Add(src+".revision", "%s", msg)
	}
	if msg := checkRelative(a.Source.Path, "the repository", false); msg != "" {
		d.Add(src+".path", "%s", msg)
	}
	checkFiles(d, src+".files", a.Source.Files)
	checkFiles(d, src+".envFiles", a.Source.EnvFiles)
	for name := range a.Source.Variables {
		if !variableName.MatchString(name) {
			d.Add(src+".variables."+name, "want a variable name (letters, digits and '_', not starting with a digit), got %s", configfile.Quote(name))
		}
	}

	// Whether the name is a known destination is the controller's to say
	// (Set.CheckSwarms); here only its shape.
	if a.Destination.Swarm != "" && !dnsLabel.MatchString(a.Destination.Swarm) {
		d.Add(field+".destination.swarm", "want \"\" (the swarm the controller runs in) or the name of a destination, got %s", configfile.Quote(a.Destination.Swarm))
	}
	if a.Self && a.Destination.Swarm != "" {
		d.Add(field+".self", "the controller runs in the local swarm, so the application that deploys it needs destination.swarm \"\", got %s", configfile.Quote(a.Destination.Swarm))
	}
	if iv := a.SyncPolicy.Interval.value; iv < MinInterval {
		d.Add(field+".syncPolicy.interval", "%s is below the floor of %s", iv, MinInterval)
	}
	if to := a.SyncPolicy.Timeout.value; to < time.Second {
		d.Add(field+".syncPolicy.timeout", "%s is too short; give at least 1s", to)
	}
	if n := a.SyncPolicy.KeepHookJobs; n < 0 || n > MaxKeepHookJobs {
		d.Add(field+".syncPolicy.keepHookJobs", "want a number from 1 to %d (0 or absent: the default), got %d", MaxKeepHookJobs, n)
	}

	allow := field + ".allow"
	for i, p := range a.Allow.HostPaths {
		if msg := checkHostPath(p); msg != "" {
			d.Add(fmt.Sprintf("%s.hostPaths[%d]", allow, i), "%s", msg)
		}
	}
	for i, c := range a.Allow.Capabilities {
		if !capabilityName.MatchString(c) {
			d.Add(fmt.Sprintf("%s.capabilities[%d]", allow, i), "want a Linux capability such as NET_ADMIN (the CAP_ prefix optional) or ALL, got %s", configfile.Quote(c))
		}
	}
	for i, rule := range a.Allow.Unplaceable {
		if !slices.Contains(UnplaceableRules(), rule) {
			d.Add(fmt.Sprintf("%s.unplaceable[%d]", allow, i), "want one of %s, got %s", strings.Join(UnplaceableRules(), ", "), configfile.Quote(rule))
		}
	}
	for _, list := range []struct {
		key   string
		names []string
	}{
		{"networks", a.Allow.Networks}, {"configs", a.Allow.Configs},
		{"secrets", a.Allow.Secrets}, {"volumes", a.Allow.Volumes},
	} {
		key := list.key
		for i, name := range list.names {
			if !objectName.MatchString(name) {
				d.Add(fmt.Sprintf("%s.%s[%d]", allow, key, i), "want a Docker object name (letters, digits, '_', '.' and '-', starting with a letter or digit), got %s", configfile.Quote(name))
			}
		}
	}
}

// checkFiles checks a list of files relative to the application's path.
func checkFiles(d *configfile.Document, field string, files []string) {
	first := map[string]int{}
	for i, f := range files {
		item := fmt.Sprintf("%s[%d]", field, i)
		if msg := checkRelative(f, "the application's path", true); msg != "" {
			d.Add(item, "%s", msg)
			continue
		}
		clean := path.Clean(f)
		// Compared cleaned: "a.yaml" and "./a.yaml" are one file, and
		// merging a compose file with itself is surely a mistake.
		if j, dup := first[clean]; dup {
			d.Add(item, "%s is listed twice; first as %s[%d]", configfile.Quote(f), field, j)
			continue
		}
		first[clean] = i
	}
}

// checkRelative checks a slash-separated path that must stay inside within.
// It returns a message, or "" when p is fine.
func checkRelative(p, within string, file bool) string {
	switch {
	case p == "" && file:
		return "want a file name, got nothing"
	case strings.ContainsRune(p, 0):
		return "contains a NUL byte"
	case strings.HasPrefix(p, "/"):
		return fmt.Sprintf("want a path relative to %s, got the absolute path %s", within, configfile.Quote(p))
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Sprintf("want a path inside %s, got %s, which leaves it", within, configfile.Quote(p))
	}
	if file && clean == "." {
		return fmt.Sprintf("want a file, got the directory %s", configfile.Quote(p))
	}
	return ""
}

// checkHostPath checks an allowed bind-mount prefix. It must be written
// clean, so the file shows the prefix that is enforced: "/srv/../etc"
// allows /etc, which a reviewer of the app set would not see.
func checkHostPath(p string) string {
	if !strings.HasPrefix(p, "/") {
		return fmt.Sprintf("want an absolute path like /srv/data, got %s", configfile.Quote(p))
	}
	if clean := path.Clean(p); clean != p {
		return fmt.Sprintf("want a clean path, got %s; write %s", configfile.Quote(p), configfile.Quote(clean))
	}
	return ""
}

// checkRepo checks the forms gitsource understands. Messages never quote the
// URL itself: it may carry a credential.
func checkRepo(repo string) string {
	if strings.ContainsFunc(repo, unicode.IsControl) {
		return "contains a control character"
	}
	if scheme, _, ok := strings.Cut(repo, "://"); ok {
		scheme = strings.ToLower(scheme)
		switch scheme {
		case "https", "http", "ssh", "file":
		default:
			return fmt.Sprintf("want an https://, http://, ssh:// or file:// URL, an scp-like user@host:path or a local path, got the scheme %s", configfile.Quote(scheme))
		}
		u, err := url.Parse(repo)
		if err != nil {
			return fmt.Sprintf("not a valid %s URL", scheme)
		}
		if _, hasPassword := u.User.Password(); hasPassword {
			return "the URL carries a password; give credentials in a file or the environment, never in the app set"
		}
		if scheme == "file" {
			if u.Path == "" {
				return "want a path after file://"
			}
		} else if u.Hostname() == "" {
			return fmt.Sprintf("want a host after %s://", scheme)
		}
		return ""
	}
	// git's rule: a colon before any slash makes an scp-like address.
	colon := strings.IndexByte(repo, ':')
	if colon >= 0 && !strings.Contains(repo[:colon], "/") {
		host := repo[:colon]
		if at := strings.LastIndexByte(host, '@'); at >= 0 {
			host = host[at+1:]
		}
		if host == "" || repo[colon+1:] == "" {
			return "want an scp-like address of the form user@host:path"
		}
	}
	return ""
}

// checkRevision applies the parts of git check-ref-format that a branch, tag
// or commit id must pass; gitsource resolves it. A leading '-' is refused
// as git refuses it: it would read as an option.
func checkRevision(rev string) string {
	const bad = "~^:?*[\\"
	switch {
	case strings.HasPrefix(rev, "-"):
		return fmt.Sprintf("want a branch, tag or commit, got %s, which starts with '-'", configfile.Quote(rev))
	case strings.ContainsFunc(rev, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) || strings.ContainsRune(bad, r) }):
		return fmt.Sprintf("want a branch, tag or commit, got %s; spaces and any of %s are not allowed", configfile.Quote(rev), bad)
	case strings.Contains(rev, "..") || strings.Contains(rev, "@{") || strings.Contains(rev, "//") ||
		strings.HasPrefix(rev, "/") || strings.HasSuffix(rev, "/") || strings.HasSuffix(rev, ".") || strings.HasSuffix(rev, ".lock"):
		return fmt.Sprintf("want a branch, tag or commit, got %s, which git does not accept as a ref name", configfile.Quote(rev))
	}
	return ""
}

// checkUnique reports application names and releases used twice across all
// files of a set. Each problem is filed under the later application and
// names the earlier one with its file and line.
func checkUnique(files []*parsedFile) {
	names := map[string]appRef{}
	releases := map[string]appRef{}
	var self *appRef // the first application marked self
	for _, f := range files {
		for i, a := range f.doc.Applications {
			ref := appRef{f, i}
			if a.Self {
				if self != nil {
					f.d.Add(ref.field()+".self", "only one application deploys the controller itself, and %s does already", self.where(f, ".self"))
				} else {
					self = &ref
				}
			}
			if a.Name != "" {
				if first, dup := names[a.Name]; dup {
					f.d.Add(ref.field()+".name", "name %s is already used by %s", configfile.Quote(a.Name), first.where(f, ".name"))
				} else {
					names[a.Name] = ref
				}
			}
			if a.Release == "" {
				continue
			}
			// The same release on two swarms is two stacks; key by both.
			key := a.Destination.Swarm + "\x00" + a.Release
			first, dup := releases[key]
			if !dup {
				releases[key] = ref
				continue
			}
			other := first.app()
			if a.releaseDefaulted && other.releaseDefaulted {
				continue // the duplicate name says it already
			}
			suffix := ".release"
			if other.releaseDefaulted {
				suffix = ".name"
			}
			msg := fmt.Sprintf("release %s is already used by %s", configfile.Quote(a.Release), first.where(f, suffix))
			if a.releaseDefaulted {
				f.d.Add(ref.field()+".name", "%s; the release defaults to the name, so set release to another stack name", msg)
			} else {
				f.d.Add(ref.field()+".release", "%s", msg)
			}
		}
	}
}

// appRef points at one application of one parsed file.
type appRef struct {
	file  *parsedFile
	index int
}

// field is r's field path, applications[i].
func (r appRef) field() string { return fmt.Sprintf("applications[%d]", r.index) }

// app is the application r points at.
func (r appRef) app() fileApp { return r.file.doc.Applications[r.index] }

// where says where r's field with suffix is, for a message in file from.
func (r appRef) where(from *parsedFile, suffix string) string {
	line, column := r.file.d.Position(r.field() + suffix)
	if r.file == from {
		return fmt.Sprintf("%s at line %d", r.field(), line)
	}
	return fmt.Sprintf("%s at %s:%d:%d", r.field(), r.file.name, line, column)
}

// tagPlaceholder finds the placeholders of an artifacts tagTemplate.
var tagPlaceholder = regexp.MustCompile(`\{[^}]*\}`)

// validateArtifacts checks an application's artifacts block.
func validateArtifacts(d *configfile.Document, a *fileArtifacts, field string) {
	if a.Repo != "" {
		if msg := checkRepo(a.Repo); msg != "" {
			d.Add(field+".repo", "%s", msg)
		}
	}
	if msg := checkRevision(a.Revision); msg != "" {
		d.Add(field+".revision", "%s", msg)
	}
	if msg := checkRelative(a.Path, "the repository", false); msg != "" {
		d.Add(field+".path", "%s", msg)
	}
	switch {
	case a.Environment == "":
		d.Add(field+".environment", "missing; want the directory of one environment under path, e.g. testing")
	case !stackName.MatchString(a.Environment):
		d.Add(field+".environment", "want a directory name (lower-case letters, digits, '_' and '-'), got %s", configfile.Quote(a.Environment))
	}
	if p := a.Previews; p != nil {
		validatePreviews(d, p, field+".previews")
	}
	if a.TagTemplate != "" {
		used := tagPlaceholder.FindAllString(a.TagTemplate, -1)
		for _, p := range used {
			if p != "{commit}" && p != "{short}" && p != "{branch}" {
				d.Add(field+".tagTemplate", "unknown placeholder %s; want {commit}, {short} or {branch}", p)
			}
		}
		if !strings.Contains(a.TagTemplate, "{commit}") && !strings.Contains(a.TagTemplate, "{short}") {
			d.Add(field+".tagTemplate", "want {commit} or {short} in it, so each commit has its own tag, got %s", configfile.Quote(a.TagTemplate))
		}
	}
}

// validatePreviews checks an artifacts.previews block.
func validatePreviews(d *configfile.Document, p *filePreviews, field string) {
	for i, env := range p.Environments {
		if !stackName.MatchString(env) {
			d.Add(fmt.Sprintf("%s.environments[%d]", field, i), "want an environment directory name, got %s", configfile.Quote(env))
		}
	}
	for _, list := range []struct {
		key      string
		patterns []string
	}{{"branches", p.Branches}, {"ignore", p.Ignore}} {
		for i, pat := range list.patterns {
			if _, err := path.Match(pat, ""); err != nil || pat == "" {
				d.Add(fmt.Sprintf("%s.%s[%d]", field, list.key, i), "want a branch glob like feature/* or dependabot/*, got %s", configfile.Quote(pat))
			}
		}
	}
	for _, p := range tagPlaceholder.FindAllString(p.Domain, -1) {
		switch p {
		case "{hash}", "{artifact}", "{environment}", "{baseDomain}", "{branch}":
		default:
			d.Add(field+".domain", "unknown placeholder %s; want {hash}, {artifact}, {environment}, {baseDomain} or {branch}", p)
		}
	}
	if p.Domain != "" && !strings.Contains(p.Domain, "{hash}") && !strings.Contains(p.Domain, "{branch}") {
		d.Add(field+".domain", "want {hash} or {branch} in it, so each preview has its own domain, got %s", configfile.Quote(p.Domain))
	}
	if p.Replicas != nil && (*p.Replicas < 1 || *p.Replicas > 100) {
		d.Add(field+".replicas", "want 1 to 100, got %d", *p.Replicas)
	}
	if p.Max != nil && (*p.Max < 1 || *p.Max > 1000) {
		d.Add(field+".max", "want 1 to 1000, got %d", *p.Max)
	}
	if p.PortShift < 0 || p.PortShift > 60000 {
		d.Add(field+".portShift", "want 0 (drop published ports) to 60000, got %d", p.PortShift)
	}
}

// validateChart checks an application's chart block: a path in the
// repository, or a repository, name and exact version.
func validateChart(d *configfile.Document, c *fileChart, field string) {
	fromRepo := c.Repo != "" || c.Name != "" || c.Version != ""
	n := 0
	for _, set := range []bool{c.Path != "", c.Releases != "", fromRepo} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		d.Add(field, "want one of path (a chart directory in the application's repository), releases (a release file declaring several) or repo, name and version")
	case n == 0:
		d.Add(field, "want path (a chart directory in the application's repository), releases (a release file) or repo, name and version")
	case c.Path != "":
		if msg := checkRelative(c.Path, "the repository", false); msg != "" {
			d.Add(field+".path", "%s", msg)
		}
	case c.Releases != "":
		if msg := checkRelative(c.Releases, "the repository", true); msg != "" {
			d.Add(field+".releases", "%s", msg)
		}
		if len(c.Values) > 0 || len(c.Set) > 0 {
			d.Add(field, "values and set go with each release of the release file, not beside releases")
		}
	default:
		if !strings.HasPrefix(c.Repo, "https://") {
			d.Add(field+".repo", "want an https:// chart repository URL, got %s", configfile.Quote(c.Repo))
		}
		if c.Name == "" {
			d.Add(field+".name", "missing; want the chart's name in the repository's index.yaml")
		}
		if c.Version == "" || strings.ContainsAny(c.Version, "<>=~^* ") {
			d.Add(field+".version", "want an exact chart version like 1.2.3, got %s", configfile.Quote(c.Version))
		}
	}
	checkFiles(d, field+".values", c.Values)
	for k := range c.Set {
		if k == "" || strings.HasPrefix(k, ".") || strings.HasSuffix(k, ".") {
			d.Add(field+".set", "want dotted keys like image.tag, got %s", configfile.Quote(k))
		}
	}
}

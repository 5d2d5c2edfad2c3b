package plan

import (
	"fmt"
	"strings"
	"unicode"
)

// area names the part of a spec a path belongs to, for reasons and
// summaries. More specific prefixes come first.
type area struct {
	prefix string
	name   string
}

// serviceAreas name the parts of a service spec people change; a path
// they do not cover is named by areaOf's fallback.
var serviceAreas = []area{
	{"TaskTemplate.ContainerSpec.Image", "image"},
	{"TaskTemplate.ContainerSpec.Env", "env"},
	{"TaskTemplate.ContainerSpec.Labels", "container labels"},
	{"TaskTemplate.ContainerSpec.Command", "command"},
	{"TaskTemplate.ContainerSpec.Args", "command"},
	{"TaskTemplate.ContainerSpec.Mounts", "mounts"},
	{"TaskTemplate.ContainerSpec.Secrets", "secrets"},
	{"TaskTemplate.ContainerSpec.Configs", "configs"},
	{"TaskTemplate.ContainerSpec.Healthcheck", "healthcheck"},
	{"TaskTemplate.ContainerSpec.DNSConfig", "dns"},
	{"TaskTemplate.Networks", "networks"},
	{"TaskTemplate.LogDriver", "logging"},
	{"Mode.Replicated.Replicas", "replicas"},
	{"Mode", "mode"},
	{"EndpointSpec.Ports", "ports"},
	{"EndpointSpec.Mode", "endpoint mode"},
	{"Networks", "networks"},
	{"Labels", "labels"},
}

// otherAreas name the parts of network, config and secret specs.
var otherAreas = []area{
	{"IPAM", "ipam"},
	{"EnableIPv4", "ipv4"},
	{"EnableIPv6", "ipv6"},
	{"Labels", "labels"},
	{"Data", "data"},
}

// areas returns the distinct areas of fields, in order of first appearance.
func areas(kind Kind, fields []FieldDiff) []string {
	var names []string
	for _, f := range fields {
		names = appendNew(names, areaOf(kind, f.Path))
	}
	return names
}

// areaOf names the area of one path: the first matching entry of kind's
// table, else the first field below the task or container spec.
func areaOf(kind Kind, path string) string {
	table := otherAreas
	if kind == KindService {
		table = serviceAreas
	}
	for _, a := range table {
		if hasPathPrefix(path, a.prefix) {
			return a.name
		}
	}
	// Otherwise the first field below the task or container spec, in words:
	// TaskTemplate.ContainerSpec.StopGracePeriod is "stop grace period".
	rest := path
	for _, p := range []string{"TaskTemplate.ContainerSpec.", "TaskTemplate."} {
		if strings.HasPrefix(rest, p) {
			rest = strings.TrimPrefix(rest, p)
			break
		}
	}
	if i := strings.IndexAny(rest, ".["); i >= 0 {
		rest = rest[:i]
	}
	return words(rest)
}

// hasPathPrefix reports whether path is prefix or lies below it.
func hasPathPrefix(path, prefix string) bool {
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	rest := path[len(prefix):]
	return rest == "" || rest[0] == '.' || rest[0] == '['
}

// words turns a Go field name into lower-case words: "RestartPolicy" is
// "restart policy", "TTY" is "tty".
func words(name string) string {
	var b strings.Builder
	runes := []rune(name)
	for i, r := range runes {
		if i > 0 && unicode.IsUpper(r) {
			prevLower := unicode.IsLower(runes[i-1]) || unicode.IsDigit(runes[i-1])
			nextLower := i+1 < len(runes) && unicode.IsLower(runes[i+1])
			if prevLower || (unicode.IsUpper(runes[i-1]) && nextLower) {
				b.WriteByte(' ')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// changedReason is "image changed", "image and env changed", or with more
// than three areas "image, env, ports and 2 more changed".
func changedReason(names []string) string {
	if len(names) == 0 {
		return "changed"
	}
	return listAreas(names) + " changed"
}

// listAreas joins names in English, showing at most three, so a reason
// stays one short line however much changed.
func listAreas(names []string) string {
	const shown = 3
	switch {
	case len(names) == 1:
		return names[0]
	case len(names) <= shown:
		return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	default:
		return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
	}
}

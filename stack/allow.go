package stack

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	composetypes "github.com/docker/cli/cli/compose/types"
)

// ErrNotAllowed marks a reference to the host or to an object outside the
// release that Allow does not list. Convert's errors wrap it.
var ErrNotAllowed = errors.New("not allowed")

// Allow lists what a release may use from outside its own stack. An empty
// list allows nothing; the zero value allows no host path and no external
// object.
type Allow struct {
	// HostPaths are absolute paths under which bind mounts are allowed,
	// compared on path boundaries after cleaning: "/data" allows
	// "/data/x" but not "/data2". "/" allows every path. The Docker socket
	// gets no exception: it must be listed or lie under a listed path.
	HostPaths []string
	// Networks, Configs, Secrets and Volumes are the real names of the
	// external objects (`external: true`) the release may use.
	Networks []string
	Configs  []string
	Secrets  []string
	Volumes  []string
	// Capabilities are the Linux capabilities a service may add with
	// cap_add, with or without the CAP_ prefix, in any case; "ALL" allows
	// every one. A capability such as SYS_ADMIN gives a container the host,
	// so adding one is the app set's decision, not a compose file's.
	Capabilities []string
}

// capabilityAllowed reports whether cap_add's entry c is among allowed,
// comparing names as Docker does: upper case, CAP_ prefix optional.
func capabilityAllowed(c string, allowed []string) bool {
	norm := func(s string) string {
		s = strings.ToUpper(strings.TrimSpace(s))
		if s == "ALL" {
			return s
		}
		return "CAP_" + strings.TrimPrefix(s, "CAP_")
	}
	c = norm(c)
	return slices.ContainsFunc(allowed, func(a string) bool { a = norm(a); return a == "ALL" || a == c })
}

// swarmTemplate matches one of Swarm's template actions, which a node
// expands in a mount's source before it mounts it.
var swarmTemplate = regexp.MustCompile(`\{\{.*?\}\}`)

// pathPlaceholders are the templates a host path may hold: each expands
// to one name (an id, a host name, a slot number), never a "/" or "..",
// so the path stays under the directory it was checked against. Any other
// action (a label's value, a function) could take it anywhere.
var pathPlaceholders = map[string]bool{
	".Service.ID": true, ".Service.Name": true, ".Node.ID": true, ".Node.Hostname": true,
	".Task.ID": true, ".Task.Name": true, ".Task.Slot": true,
}

// hostPathAllowed reports whether the host path p lies under one of
// allowed, whatever its templates expand to.
func hostPathAllowed(p string, allowed []string) bool {
	for _, action := range swarmTemplate.FindAllString(p, -1) {
		if !pathPlaceholders[strings.TrimSpace(action[2:len(action)-2])] {
			return false
		}
	}
	if !path.IsAbs(p) {
		// Not a host path Swarm nodes agree on (a Windows path, say):
		// only "/" allows it.
		return slices.ContainsFunc(allowed, func(a string) bool { return path.Clean(a) == "/" })
	}
	p = path.Clean(p)
	for _, a := range allowed {
		if !path.IsAbs(a) {
			continue
		}
		a = path.Clean(a)
		if a == "/" || p == a || strings.HasPrefix(p, a+"/") {
			return true
		}
	}
	return false
}

// notAllowedError is a refusal by Allow; it matches ErrNotAllowed without
// repeating it in the message.
type notAllowedError struct{ msg string }

func (e *notAllowedError) Error() string        { return e.msg }
func (e *notAllowedError) Is(target error) bool { return target == ErrNotAllowed }

// notAllowed is a refusal of the compose field at path field.
func notAllowed(field, format string, args ...any) error {
	return &notAllowedError{msg: field + ": " + fmt.Sprintf(format, args...)}
}

// checkAllowed returns one error per host path or external object that allow
// does not list, in a stable order.
func checkAllowed(cfg *composetypes.Config, namespace string, allow Allow) []error {
	var errs []error
	for _, svc := range cfg.Services {
		for i, c := range svc.CapAdd {
			if !capabilityAllowed(c, allow.Capabilities) {
				field := "services." + svc.Name + ".cap_add[" + strconv.Itoa(i) + "]"
				errs = append(errs, notAllowed(field, "capability %s is not allowed; list it in allow.capabilities", c))
			}
		}
		for i, v := range svc.Volumes {
			if v.Type != "bind" && v.Type != "npipe" {
				continue
			}
			if !hostPathAllowed(v.Source, allow.HostPaths) {
				field := "services." + svc.Name + ".volumes[" + strconv.Itoa(i) + "]"
				errs = append(errs, notAllowed(field, "host path %s is not allowed; list it in allow.hostPaths", v.Source))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Volumes)) {
		v := cfg.Volumes[name]
		if v.External.External {
			if !slices.Contains(allow.Volumes, v.Name) {
				errs = append(errs, notAllowed("volumes."+name, "external volume %q is not allowed; list it in allow.volumes", v.Name))
			}
			continue
		}
		// The real name, not the compose key, is what the node mounts: one
		// outside the namespace is another stack's volume (or a hand-made
		// one), external in effect.
		if real := v.Name; real != "" && !strings.HasPrefix(real, namespace+"_") && !slices.Contains(allow.Volumes, real) {
			errs = append(errs, notAllowed("volumes."+name, "volume %q is outside release %s's namespace; list it in allow.volumes", real, namespace))
		}
		if localDriver(v.Driver) {
			for _, p := range localHostPaths(v.DriverOpts) {
				if !hostPathAllowed(p.path, allow.HostPaths) {
					errs = append(errs, notAllowed("volumes."+name+".driver_opts."+p.option, "host path %s is not allowed; list it in allow.hostPaths", p.path))
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Networks)) {
		if n := cfg.Networks[name]; n.External.External && !slices.Contains(allow.Networks, n.Name) {
			errs = append(errs, notAllowed("networks."+name, "external network %q is not allowed; list it in allow.networks", n.Name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Configs)) {
		if c := cfg.Configs[name]; c.External.External && !slices.Contains(allow.Configs, c.Name) {
			errs = append(errs, notAllowed("configs."+name, "external config %q is not allowed; list it in allow.configs", c.Name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Secrets)) {
		if s := cfg.Secrets[name]; s.External.External && !slices.Contains(allow.Secrets, s.Name) {
			errs = append(errs, notAllowed("secrets."+name, "external secret %q is not allowed; list it in allow.secrets", s.Name))
		}
	}
	return errs
}

// localDriver reports whether a volume's driver is the Engine's local one,
// which mounts what its driver_opts say on the node itself.
func localDriver(driver string) bool {
	driver = strings.TrimSpace(driver)
	return driver == "" || strings.EqualFold(driver, "local")
}

// bindOptions are the mount options that make the local driver's mount a
// bind of `device`, a path on the node: moby's mount package maps exactly
// these two to MS_BIND (recursive for rbind), as mount(8) does.
var bindOptions = []string{"bind", "rbind"}

// overlayDirOptions are the overlay file system's options naming node
// directories.
var overlayDirOptions = []string{"lowerdir", "upperdir", "workdir"}

// hostPathOption is a node path a local volume's driver_opts mount, and
// the option naming it ("device" or "o").
type hostPathOption struct{ option, path string }

// localHostPaths returns the node paths a local volume with these
// driver_opts mounts: its device when an option of o binds it, or when it
// is an absolute path (a block device such as /dev/sda1, whatever the
// type), and the directories of an overlay's layers. Options are read
// more loosely than the driver reads them (split at commas, any spacing
// and case), so that every spelling the driver takes as a bind is seen;
// see FuzzLocalVolumeBindIsRefused.
func localHostPaths(opts map[string]string) []hostPathOption {
	device, hasDevice := opts["device"]
	var out []hostPathOption
	binds := false
	for opt := range strings.SplitSeq(opts["o"], ",") {
		key, value, hasValue := strings.Cut(strings.TrimSpace(opt), "=")
		key = strings.ToLower(strings.TrimSpace(key))
		switch {
		case !hasValue && slices.Contains(bindOptions, key):
			binds = true
		case hasValue && slices.Contains(overlayDirOptions, key):
			// lowerdir stacks several directories, separated by colons.
			for dir := range strings.SplitSeq(value, ":") {
				if dir = strings.TrimSpace(dir); dir != "" {
					out = append(out, hostPathOption{"o", dir})
				}
			}
		}
	}
	// "//server/share" is a CIFS share, not a node path.
	nodePath := strings.HasPrefix(device, "/") && !strings.HasPrefix(device, "//")
	if hasDevice && (binds || nodePath) {
		out = append([]hostPathOption{{"device", device}}, out...)
	}
	return out
}

// reservedLabels returns one error per label of labels (at field) in
// Skep's own namespace, LabelPrefix in any case, in a stable order: those
// labels are the records Skep keeps in the swarm (ownership, revisions,
// holds, hooks), and git must never forge one.
func reservedLabels(field string, labels map[string]string) []error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if ReservedLabel(k) {
			errs = append(errs, notAllowed(field, "label %s is reserved for skep; remove it", k))
		}
	}
	return errs
}

// ReservedLabel reports whether key is in Skep's own label namespace
// (LabelPrefix, compared in any case), which only Skep may set.
func ReservedLabel(key string) bool {
	return len(key) >= len(LabelPrefix) && strings.EqualFold(key[:len(LabelPrefix)], LabelPrefix)
}

// checkLabels refuses every label in Skep's own namespace that cfg sets,
// on every kind of object.
func checkLabels(cfg *composetypes.Config) []error {
	var errs []error
	for _, svc := range cfg.Services {
		errs = append(errs, reservedLabels("services."+svc.Name+".labels", svc.Labels)...)
		errs = append(errs, reservedLabels("services."+svc.Name+".deploy.labels", svc.Deploy.Labels)...)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Networks)) {
		errs = append(errs, reservedLabels("networks."+name+".labels", cfg.Networks[name].Labels)...)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Volumes)) {
		errs = append(errs, reservedLabels("volumes."+name+".labels", cfg.Volumes[name].Labels)...)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Configs)) {
		errs = append(errs, reservedLabels("configs."+name+".labels", cfg.Configs[name].Labels)...)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Secrets)) {
		errs = append(errs, reservedLabels("secrets."+name+".labels", cfg.Secrets[name].Labels)...)
	}
	return errs
}

// EngineAddressOptions are the log driver options holding an address the
// Engine of a node connects to, for every container of the service: the
// built-in drivers' (syslog, gelf, fluentd, splunk, awslogs) and the loki
// plugin's.
var EngineAddressOptions = []string{"syslog-address", "gelf-address", "fluentd-address", "splunk-url", "awslogs-endpoint", "loki-url"}

// engineAddress is a host the Engine would connect to, and the compose
// field naming it.
type engineAddress struct{ field, host string }

// engineAddresses returns the hosts cfg makes the Engine connect to: the
// addresses of log drivers (EngineAddressOptions) and the servers of local
// volumes that mount over the network (NFS's addr= option, a CIFS
// device's host). Unix sockets are no host and are left out.
func engineAddresses(cfg *composetypes.Config) []engineAddress {
	var out []engineAddress
	for _, svc := range cfg.Services {
		if svc.Logging == nil {
			continue
		}
		for _, key := range slices.Sorted(maps.Keys(svc.Logging.Options)) {
			if !slices.Contains(EngineAddressOptions, key) {
				continue
			}
			if host := addressHost(svc.Logging.Options[key]); host != "" {
				out = append(out, engineAddress{"services." + svc.Name + ".logging.options." + key, host})
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Volumes)) {
		v := cfg.Volumes[name]
		if v.External.External || !localDriver(v.Driver) {
			continue
		}
		// Read as loosely as localHostPaths reads options: the driver
		// itself looks for "addr=" exactly.
		for opt := range strings.SplitSeq(v.DriverOpts["o"], ",") {
			key, value, ok := strings.Cut(strings.TrimSpace(opt), "=")
			if ok && strings.EqualFold(strings.TrimSpace(key), "addr") {
				if host := addressHost(value); host != "" {
					out = append(out, engineAddress{"volumes." + name + ".driver_opts.o", host})
				}
			}
		}
		if device := v.DriverOpts["device"]; strings.HasPrefix(device, "//") {
			if host, _, _ := strings.Cut(strings.TrimPrefix(device, "//"), "/"); host != "" {
				out = append(out, engineAddress{"volumes." + name + ".driver_opts.device", host})
			}
		}
	}
	return out
}

// addressHost is the host of an address as log drivers take one: a URL
// (tcp://h:p, https://h:p), host:port or a bare host; "" for a unix socket
// or a named pipe.
func addressHost(addr string) string {
	addr = strings.TrimSpace(addr)
	if scheme, _, ok := strings.Cut(addr, "://"); ok {
		if s := strings.ToLower(scheme); s == "unix" || s == "npipe" {
			return ""
		}
		u, err := url.Parse(addr)
		if err != nil {
			return addr
		}
		return u.Hostname()
	}
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]")
}

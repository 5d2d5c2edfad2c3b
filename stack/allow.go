package stack

import (
	"errors"
	"fmt"
	"maps"
	"path"
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

// hostPathAllowed reports whether the host path p lies under one of allowed.
func hostPathAllowed(p string, allowed []string) bool {
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
func checkAllowed(cfg *composetypes.Config, allow Allow) []error {
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
		// The local driver mounts any host directory given as a bind device.
		if device, ok := v.DriverOpts["device"]; ok && (v.Driver == "" || v.Driver == "local") &&
			strings.Contains(","+v.DriverOpts["o"]+",", ",bind,") && !hostPathAllowed(device, allow.HostPaths) {
			errs = append(errs, notAllowed("volumes."+name+".driver_opts.device", "host path %s is not allowed; list it in allow.hostPaths", device))
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

package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"

	"github.com/docker/cli/cli/compose/convert"
	composetypes "github.com/docker/cli/cli/compose/types"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"

	"github.com/skep-cd/skep/canary"
)

// Options shape Convert. The zero value converts nothing: Owner.Release is
// required.
type Options struct {
	// Owner names the release (its stack namespace) and is stamped, as
	// labels, on every service, network, config and secret.
	Owner Owner
	// Allow lists the host paths and external objects the release may use.
	Allow Allow
	// Files holds the content of every config and secret file the document
	// names, keyed by the File field as it appears in the compose document
	// (render.Document.Files). Convert does not modify it.
	Files map[string][]byte
	// Waves holds the wave of services (by compose name) not in wave 0
	// (render.Document.Waves); each gets it as LabelWave.
	Waves map[string]int
	// Hooks holds the services (by compose name) that are hooks, with
	// their phase and timeout (render.Document.Hooks). Each is converted
	// like a service, made a one-completion job and put in Release.Hooks,
	// not Release.Services.
	Hooks map[string]Hook
	// Canaries holds the canary strategy of services (by compose name)
	// that have one (render.Document.Canaries); Release.Canaries keys
	// them by the service's full name.
	Canaries map[string]canary.Strategy
	// Masked is the document with every value that came from an encrypted
	// input as its mask (render.Document.Masked). Convert converts it too,
	// and every string where the two releases differ is a field Masked()
	// masks; nil, or a document whose release has another shape, leaves
	// Masked() masking every occurrence of Release.Sensitive.
	Masked *composetypes.Config
	// CheckAddress, when set, judges each host the Engine would connect to
	// on the release's behalf (see EngineAddressOptions): a log driver's
	// address and a network volume's server. A non-nil error refuses the
	// document, naming the field.
	CheckAddress func(host string) error
}

// apiVersion is the Engine API version handed to docker/cli's converter. It
// only decides whether networks go on the task template (1.29 and later, as
// on every daemon Skep supports) or on the deprecated service field.
const apiVersion = "1.41"

// defaultNetworkDriver is what `docker stack deploy` creates a network with
// when the compose file names no driver.
const defaultNetworkDriver = "overlay"

// maxNameLength is Swarm's limit on the names of configs and secrets.
const maxNameLength = 64

// maxServiceNameLength is Swarm's limit on service names (a DNS label).
const maxServiceNameLength = 63

// hashLength is how many hex digits of the content's SHA-256 name a config or
// secret.
const hashLength = 10

// releaseName matches the names `docker stack deploy` accepts as namespaces
// and that keep every derived object name valid.
var releaseName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// Convert turns one compose document into the Swarm specs of one release,
// with the semantics of `docker stack deploy`: services are converted with
// docker/cli's converter, networks default to `<release>_default` on the
// overlay driver, and every name is scoped by the release.
//
// Skep departs from stack deploy in three ways. Configs and secrets whose
// content comes from a file are named `<name>-<10 hex digits of the SHA-256
// of the content>`, so a change of content makes a new object instead of an
// impossible update; services refer to that name while the file name inside
// the container stays the same. Host paths and external objects not listed
// in opts.Allow are refused (errors wrap ErrNotAllowed). Owner labels are
// added to every object and to the service spec (not to containers).
//
// Secret and config references carry names only; their ids are empty and
// resolved by apply at write time, as is the config of a credential spec,
// which carries the config's name in place of its id.
//
// Convert does no I/O, neither modifies cfg nor keeps a reference into it,
// and returns every problem it finds, joined. It is safe to call
// concurrently.
func Convert(cfg *composetypes.Config, opts Options) (Release, error) {
	rel, err := convertDocument(cfg, opts)
	if err != nil || opts.Masked == nil {
		return rel, err
	}
	// The masked document may fail where the plain one passed (a mask is
	// no host path the allow list names): its fields are then unknown.
	if masked, err := convertDocument(opts.Masked, opts); err == nil {
		rel.Masks = diffMasks(rel, masked)
	}
	return rel, nil
}

// convertDocument is Convert of one document.
func convertDocument(cfg *composetypes.Config, opts Options) (Release, error) {
	if cfg == nil {
		return Release{}, errors.New("no compose document")
	}
	name := opts.Owner.Release
	if !releaseName.MatchString(name) {
		return Release{}, fmt.Errorf("invalid release name %q: use letters, digits, '_', '.' and '-', starting with a letter or digit", name)
	}
	cfg = ptr(deepCopy(*cfg))
	sort.Slice(cfg.Services, func(i, j int) bool { return cfg.Services[i].Name < cfg.Services[j].Name })

	c := converter{
		waves:   opts.Waves,
		hooks:   opts.Hooks,
		ns:      convert.NewNamespace(name),
		owner:   ownerLabels(opts.Owner),
		files:   opts.Files,
		configs: map[string]string{},
		secrets: map[string]string{},
		release: Release{
			Name:     name,
			Services: map[string]swarm.ServiceSpec{},
			Networks: map[string]network.CreateOptions{},
			Configs:  map[string]swarm.ConfigSpec{},
			Secrets:  map[string]swarm.SecretSpec{},
		},
	}
	errs := checkAllowed(cfg, name, opts.Allow)
	errs = append(errs, checkLabels(cfg)...)
	if opts.CheckAddress != nil {
		for _, a := range engineAddresses(cfg) {
			if err := opts.CheckAddress(a.host); err != nil {
				errs = append(errs, notAllowed(a.field, "%v", err))
			}
		}
	}
	c.networks(cfg)
	errs = append(errs, c.configObjects(cfg)...)
	errs = append(errs, c.secretObjects(cfg)...)
	for _, svc := range cfg.Services {
		errs = append(errs, c.service(cfg, svc)...)
	}
	if len(errs) > 0 {
		return Release{}, errors.Join(errs...)
	}
	for svc, strategy := range opts.Canaries {
		if c.release.Canaries == nil {
			c.release.Canaries = map[string]canary.Strategy{}
		}
		c.release.Canaries[c.ns.Scope(svc)] = strategy
	}
	return c.release, nil
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

// converter holds the state of one Convert call.
type converter struct {
	waves   map[string]int
	hooks   map[string]Hook
	ns      convert.Namespace
	owner   map[string]string
	files   map[string][]byte
	configs map[string]string // compose name → name in the swarm
	secrets map[string]string
	release Release
}

// ownerLabels is o.Labels() without the empty values of an owner that is
// only partly known (say, `skep render` without a controller).
func ownerLabels(o Owner) map[string]string {
	labels := o.Labels()
	maps.DeleteFunc(labels, func(_, v string) bool { return v == "" })
	return labels
}

// withOwner adds the owner labels to labels (the owner wins a clash, so a
// compose file cannot claim another owner) and returns the result.
func (c *converter) withOwner(labels map[string]string) map[string]string {
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, c.owner)
	return labels
}

// networks adds the networks the services use, named and defaulted as
// stack deploy does: a service without networks joins "default".
func (c *converter) networks(cfg *composetypes.Config) {
	used := map[string]struct{}{}
	for _, svc := range cfg.Services {
		if len(svc.Networks) == 0 {
			used["default"] = struct{}{}
		}
		for n := range svc.Networks {
			used[n] = struct{}{}
		}
	}
	// External networks are checked against Allow and never created.
	created, _ := convert.Networks(c.ns, cfg.Networks, used)
	for name, opts := range created {
		if opts.Driver == "" {
			opts.Driver = defaultNetworkDriver
		}
		opts.Labels = c.withOwner(opts.Labels)
		c.release.Networks[name] = opts
	}
}

// contentName is the name of a config or secret with this content: base,
// cut to fit Swarm's limit, and the start of the content's SHA-256.
func contentName(base string, data []byte) string {
	sum := sha256.Sum256(data)
	if limit := maxNameLength - hashLength - 1; len(base) > limit {
		base = base[:limit]
	}
	return base + "-" + hex.EncodeToString(sum[:])[:hashLength]
}

// baseName is the swarm name of a config or secret before its content
// hash: its `name:` when given, else "<release>_<name>", as stack deploy.
func (c *converter) baseName(name string, obj composetypes.FileObjectConfig) string {
	if obj.Name != "" {
		return obj.Name
	}
	return c.ns.Scope(name)
}

// content returns a copy of the data of a file-based config or secret.
func (c *converter) content(kind, name string, obj composetypes.FileObjectConfig) ([]byte, error) {
	data, ok := c.files[obj.File]
	if !ok || obj.File == "" {
		return nil, fmt.Errorf("%s.%s: no content for file %q (render reads it)", kind, name, obj.File)
	}
	return slices.Clone(data), nil
}

// configObjects adds the release's configs under content-hashed names and
// records, for service references, the swarm name of every config,
// external ones included.
func (c *converter) configObjects(cfg *composetypes.Config) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(cfg.Configs)) {
		obj := composetypes.FileObjectConfig(cfg.Configs[name])
		if obj.External.External {
			c.configs[name] = obj.Name
			continue
		}
		if obj.Driver != "" {
			errs = append(errs, fmt.Errorf("configs.%s.driver: configs take no driver; use file", name))
			continue
		}
		data, err := c.content("configs", name, obj)
		if err != nil {
			c.configs[name] = c.baseName(name, obj) // keeps services from reporting it undefined
			errs = append(errs, err)
			continue
		}
		full := contentName(c.baseName(name, obj), data)
		spec := swarm.ConfigSpec{
			Annotations: swarm.Annotations{Name: full, Labels: c.withOwner(convert.AddStackLabel(c.ns, obj.Labels))},
			Data:        data,
		}
		if obj.TemplateDriver != "" {
			spec.Templating = &swarm.Driver{Name: obj.TemplateDriver}
		}
		c.configs[name] = full
		c.release.Configs[full] = spec
	}
	return errs
}

// secretObjects is configObjects for secrets, which may also come from a
// secret driver.
func (c *converter) secretObjects(cfg *composetypes.Config) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(cfg.Secrets)) {
		obj := composetypes.FileObjectConfig(cfg.Secrets[name])
		if obj.External.External {
			c.secrets[name] = obj.Name
			continue
		}
		spec := swarm.SecretSpec{Annotations: swarm.Annotations{Labels: c.withOwner(convert.AddStackLabel(c.ns, obj.Labels))}}
		if obj.Driver != "" {
			// The driver supplies the value; the name stays as stack
			// deploy makes it, since there is no content to hash.
			spec.Name = c.baseName(name, obj)
			spec.Data = []byte{}
			spec.Driver = &swarm.Driver{Name: obj.Driver, Options: obj.DriverOpts}
		} else {
			data, err := c.content("secrets", name, obj)
			if err != nil {
				c.secrets[name] = c.baseName(name, obj) // keeps services from reporting it undefined
				errs = append(errs, err)
				continue
			}
			spec.Name = contentName(c.baseName(name, obj), data)
			spec.Data = data
		}
		if obj.TemplateDriver != "" {
			spec.Templating = &swarm.Driver{Name: obj.TemplateDriver}
		}
		c.secrets[name] = spec.Name
		c.release.Secrets[spec.Name] = spec
	}
	return errs
}

// fileTarget is a service's reference to a config or secret, resolved the
// way docker/cli's converter resolves it.
type fileTarget struct {
	name, target, uid, gid string
	mode                   os.FileMode
}

// resolveTarget resolves ref against names (compose name → swarm name),
// with docker/cli's defaults: target the source name, uid and gid 0, mode
// 0444. ok is false for an undefined source.
func resolveTarget(ref composetypes.FileReferenceConfig, names map[string]string) (fileTarget, bool) {
	name, ok := names[ref.Source]
	if !ok {
		return fileTarget{}, false
	}
	t := fileTarget{name: name, target: ref.Target, uid: ref.UID, gid: ref.GID, mode: 0o444}
	if t.target == "" {
		t.target = ref.Source
	}
	if t.uid == "" {
		t.uid = "0"
	}
	if t.gid == "" {
		t.gid = "0"
	}
	if ref.Mode != nil {
		t.mode = os.FileMode(*ref.Mode)
	}
	return t, true
}

// secretRefs builds svc's secret references by swarm name. Two references
// to one target file are an error: the Engine would refuse the spec.
func (c *converter) secretRefs(svc composetypes.ServiceConfig) ([]*swarm.SecretReference, []error) {
	var errs []error
	refs := []*swarm.SecretReference{}
	seen := map[string]bool{}
	for i, s := range svc.Secrets {
		field := "services." + svc.Name + ".secrets[" + strconv.Itoa(i) + "]"
		t, ok := resolveTarget(composetypes.FileReferenceConfig(s), c.secrets)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: undefined secret %q", field, s.Source))
			continue
		}
		if seen[t.target] {
			errs = append(errs, fmt.Errorf("%s: duplicate secret target %s", field, t.target))
			continue
		}
		seen[t.target] = true
		refs = append(refs, &swarm.SecretReference{
			SecretName: t.name,
			File:       &swarm.SecretReferenceFileTarget{Name: t.target, UID: t.uid, GID: t.gid, Mode: t.mode},
		})
	}
	// Sorted as stack deploy sorts them, so that order in the file does
	// not restart services; ties broken by target to stay deterministic.
	sort.SliceStable(refs, func(i, j int) bool {
		if refs[i].SecretName != refs[j].SecretName {
			return refs[i].SecretName < refs[j].SecretName
		}
		return refs[i].File.Name < refs[j].File.Name
	})
	return refs, errs
}

// configRefs is secretRefs for configs, plus the runtime reference that a
// credential spec's config needs, added once as docker/cli adds it.
func (c *converter) configRefs(svc composetypes.ServiceConfig) ([]*swarm.ConfigReference, []error) {
	var errs []error
	refs := []*swarm.ConfigReference{}
	seen := map[string]bool{}
	for i, s := range svc.Configs {
		field := "services." + svc.Name + ".configs[" + strconv.Itoa(i) + "]"
		t, ok := resolveTarget(composetypes.FileReferenceConfig(s), c.configs)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: undefined config %q", field, s.Source))
			continue
		}
		if seen[t.target] {
			errs = append(errs, fmt.Errorf("%s: duplicate config target %s", field, t.target))
			continue
		}
		seen[t.target] = true
		refs = append(refs, &swarm.ConfigReference{
			ConfigName: t.name,
			File:       &swarm.ConfigReferenceFileTarget{Name: t.target, UID: t.uid, GID: t.gid, Mode: t.mode},
		})
	}
	if cred := svc.CredentialSpec.Config; cred != "" {
		name, ok := c.configs[cred]
		if !ok {
			errs = append(errs, fmt.Errorf("services.%s.credential_spec.config: undefined config %q", svc.Name, cred))
		} else if !slices.ContainsFunc(refs, func(r *swarm.ConfigReference) bool { return r.Runtime != nil && r.ConfigName == name }) {
			refs = append(refs, &swarm.ConfigReference{ConfigName: name, Runtime: &swarm.ConfigReferenceRuntimeTarget{}})
		}
	}
	sort.SliceStable(refs, func(i, j int) bool {
		if refs[i].ConfigName != refs[j].ConfigName {
			return refs[i].ConfigName < refs[j].ConfigName
		}
		return refs[i].File != nil && (refs[j].File == nil || refs[i].File.Name < refs[j].File.Name)
	})
	return refs, errs
}

// service converts one service with docker/cli's converter and adds it to
// the release under its scoped name, with owner labels on it and on the
// named volumes it mounts.
func (c *converter) service(cfg *composetypes.Config, svc composetypes.ServiceConfig) []error {
	secrets, errs := c.secretRefs(svc)
	configs, configErrs := c.configRefs(svc)
	errs = append(errs, configErrs...)
	if len(errs) > 0 {
		return errs
	}
	credConfig := ""
	if svc.CredentialSpec.Config != "" {
		// The converter looks the credential spec's config up among the
		// references by name; hand it the name the reference carries.
		credConfig = c.configs[svc.CredentialSpec.Config]
		svc.CredentialSpec.Config = credConfig
	}
	// Each service gets its own copy of the volume definitions: the
	// converter puts their label maps into the mounts it returns.
	spec, err := convert.Service(apiVersion, c.ns, svc, cfg.Networks, deepCopy(cfg.Volumes), secrets, configs)
	if err != nil {
		return []error{fmt.Errorf("services.%s: %w", svc.Name, err)}
	}
	if len(spec.Name) > maxServiceNameLength {
		return []error{fmt.Errorf("services.%s: service name %q is longer than %d characters", svc.Name, spec.Name, maxServiceNameLength)}
	}
	if cs := spec.TaskTemplate.ContainerSpec.Privileges.CredentialSpec; cs != nil && credConfig != "" {
		cs.Config = credConfig
	}
	spec.Labels = c.withOwner(spec.Labels)
	if w := c.waves[svc.Name]; w != 0 {
		spec.Labels[LabelWave] = strconv.Itoa(w)
	}
	// A named volume is created by the node on first use, with the labels
	// its mount carries; owner labels there are what lets prune prove it.
	for i, m := range spec.TaskTemplate.ContainerSpec.Mounts {
		if m.Type == mount.TypeVolume && m.Source != "" && m.VolumeOptions != nil {
			spec.TaskTemplate.ContainerSpec.Mounts[i].VolumeOptions.Labels = c.withOwner(m.VolumeOptions.Labels)
		}
	}
	if h, ok := c.hooks[svc.Name]; ok {
		h.Service, h.Spec = svc.Name, jobSpec(deepCopy(spec), svc.Name)
		c.release.Hooks = append(c.release.Hooks, h)
		return nil
	}
	c.release.Services[spec.Name] = deepCopy(spec)
	return nil
}

package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/swarm"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/skep-cd/skep/chart"
	"github.com/skep-cd/skep/egress"
	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/stack"
)

// renderFlags are the flags of `skep render`.
// The zero value renders nothing useful; the command's flags set it.
type renderFlags struct {
	files, envFiles []string
	// values and set are a chart's --values files and --set pairs.
	values, set []string
	release     string
	controller  string
	output      string
	// allow is what the app set's allow list would grant: without it, host
	// paths and external objects are refused, as they would be in git.
	allow stack.Allow
	// ageIdentity names the age identity file for SOPS-encrypted files.
	ageIdentity string
	// allowPrivateHosts is the controller's --allow-private-hosts: the
	// addresses the Engine would connect to (log drivers, network
	// volumes) are judged by the same egress policy.
	allowPrivateHosts string
}

// newRenderCommand builds `skep render`, which runs the same render and
// stack steps the controller runs, without a daemon, so a compose change
// can be checked (or diffed in review) before it is committed.
func newRenderCommand() *cobra.Command {
	var f renderFlags
	cmd := &cobra.Command{
		Use:   "render PATH",
		Short: "Print the Swarm specs a compose release converts to, offline",
		Long: `Render reads a compose file, or the compose file of a directory (the first of
compose.yaml, compose.yml, docker-compose.yml, docker-stack.yml, stack.yml),
merges the -f files after it, interpolates variables from the env files
(default: .env beside the compose file), and prints the specs Skep would
apply: {"services", "networks", "configs", "secrets"}, each keyed by name in
the Engine API's shape. Secret values are never printed; values decrypted
from SOPS-encrypted env files (--age-identity) print masked. No daemon is
needed.

A directory holding Chart.yaml is a chart (see docs/charts.md): its values
(values.yaml, then each --values file, then --set) are checked against
values.schema.json, its templates rendered and merged into one compose
document, and that document converted the same way, exactly as the
controller renders the chart. The output then also lists the chart's
"requirements": the external networks, configs and secrets its
requirements.yaml names, with their descriptions.

Reads stay inside the deepest directory holding PATH and every -f and
--env-file; host paths and external objects must be allowed by flag, as an
app set's allow list does, and the addresses a log driver or a network
volume names are judged by --allow-private-hosts, as the controller's are.

Exit status: 0 on success, 1 on bad input (printed as file:line: message),
2 on a usage error.`,
		// cobra.ExactArgs would say "accepts 1 arg(s)"; this names what the
		// argument is.
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("render: want one compose file or directory, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.output != "yaml" && f.output != "json" {
				return usageError("--output: want yaml or json, got %q", f.output)
			}
			var rel stack.Release
			var req []chart.Entry
			var warnings []string
			var err error
			if isChartDir(args[0]) {
				if len(f.files) > 0 || len(f.envFiles) > 0 {
					return usageError("render: -f and --env-file are for compose files; a chart takes --values and --set")
				}
				rel, req, warnings, err = renderChart(cmd, args[0], f)
			} else {
				if len(f.values) > 0 || len(f.set) > 0 {
					return usageError("render: --values and --set are for charts (a directory holding Chart.yaml)")
				}
				rel, warnings, err = renderRelease(cmd, args[0], f)
			}
			// Warnings go to stderr before the error or the output, so stdout stays
			// a clean document for a pipe.
			for _, w := range warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "skep: warning:", w)
			}
			var exit *ExitError
			if errors.As(err, &exit) {
				return err // a usage error in --set
			}
			if err != nil {
				return &ExitError{Code: ExitFailure, Err: err}
			}
			return writeRelease(cmd.OutOrStdout(), rel, req, f.output)
		},
	}
	flags := cmd.Flags()
	flags.StringArrayVarP(&f.files, "file", "f", nil, "compose file merged after PATH's, in order (repeatable)")
	flags.StringArrayVar(&f.values, "values", nil, "chart values file merged over the chart's values.yaml, in order (repeatable; charts only)")
	flags.StringArrayVar(&f.set, "set", nil, "chart value key=value, merged last; a.b=c nests, numbers and true/false are typed (repeatable; charts only)")
	flags.StringArrayVar(&f.envFiles, "env-file", nil, "file of KEY=VALUE lines for interpolation, later ones winning (repeatable; default .env beside the compose file)")
	flags.StringVar(&f.release, "release", "", "release (stack) name; default: the compose directory's name")
	flags.StringVar(&f.controller, "controller-id", "default", "controller id stamped in the ownership labels")
	flags.StringVarP(&f.output, "output", "o", "yaml", "output format: yaml or json")
	flags.StringArrayVar(&f.allow.HostPaths, "allow-host-path", nil, "host path under which bind mounts are allowed (repeatable)")
	flags.StringArrayVar(&f.allow.Networks, "allow-network", nil, "external network the release may use (repeatable)")
	flags.StringArrayVar(&f.allow.Configs, "allow-config", nil, "external config the release may use (repeatable)")
	flags.StringArrayVar(&f.allow.Secrets, "allow-secret", nil, "external secret the release may use (repeatable)")
	flags.StringArrayVar(&f.allow.Volumes, "allow-volume", nil, "external volume the release may use (repeatable)")
	flags.StringArrayVar(&f.allow.Capabilities, "allow-capability", nil, "Linux capability services may add with cap_add, or ALL (repeatable)")
	flags.StringVar(&f.allowPrivateHosts, "allow-private-hosts", egress.DefaultAllow,
		"internal addresses (CIDR prefixes) a log driver or network volume may name, as the controller's flag; \"\" refuses every internal address")
	flags.StringVar(&f.ageIdentity, "age-identity", "", "age identity file that decrypts SOPS-encrypted secrets and env files (default: the file $"+EnvAgeIdentityFile+" names); decrypted values print masked")
	return cmd
}

// renderRelease renders and converts target. Errors name files relative to
// the current directory.
func renderRelease(cmd *cobra.Command, target string, f renderFlags) (stack.Release, []string, error) {
	in, dir, err := renderInput(target, f)
	if err != nil {
		return stack.Release{}, nil, err
	}
	if in.Keys, err = ageKeys(f.ageIdentity); err != nil {
		return stack.Release{}, nil, err
	}
	doc, err := render.Compose(cmd.Context(), in)
	if err != nil {
		return stack.Release{}, nil, relativeToCwd(in.Root, err)
	}
	release := f.release
	if release == "" {
		// An app set names the release; offline, the directory's name is the
		// nearest stand-in.
		release = filepath.Base(dir)
	}
	check, err := f.addressCheck(cmd.Context())
	if err != nil {
		return stack.Release{}, doc.Warnings, err
	}
	rel, err := stack.Convert(doc.Config, stack.Options{
		Owner:        stack.Owner{Controller: f.controller, Application: release, Release: release},
		Allow:        f.allow,
		Files:        doc.Files,
		Masked:       doc.Masked,
		CheckAddress: check,
	})
	rel.Sensitive = doc.Sensitive
	if err != nil {
		err = errors.New(rel.Mask(err.Error()))
	}
	return rel, doc.Warnings, err
}

// addressCheck is the egress policy of --allow-private-hosts, as
// stack.Options.CheckAddress takes it. Names are resolved here, as the
// controller resolves them; one that does not resolve passes.
func (f renderFlags) addressCheck(ctx context.Context) (func(string) error, error) {
	policy, err := egress.Parse(f.allowPrivateHosts)
	if err != nil {
		return nil, usageError("--allow-private-hosts: %v", err)
	}
	return func(host string) error { return policy.CheckHost(ctx, host) }, nil
}

// renderInput maps the command line onto render.Input: the root is the
// deepest directory holding the compose directory and every named file.
func renderInput(target string, f renderFlags) (render.Input, string, error) {
	abs, err := filepath.Abs(target)
	if err != nil {
		return render.Input{}, "", err
	}
	info, err := os.Stat(abs)
	if err != nil {
		return render.Input{}, "", fmt.Errorf("%s: %w", target, unwrapPathError(err))
	}
	dir, first := abs, ""
	if !info.IsDir() {
		dir, first = filepath.Dir(abs), abs
	} else if len(f.files) > 0 {
		// Extra files merge after the directory's own compose file.
		for _, name := range render.DefaultFiles {
			if st, err := os.Stat(filepath.Join(dir, name)); err == nil && !st.IsDir() {
				first = filepath.Join(dir, name)
				break
			}
		}
		if first == "" {
			return render.Input{}, "", fmt.Errorf("%s: no compose file found (looked for %s)", target, strings.Join(render.DefaultFiles, ", "))
		}
	}
	var files, envFiles []string
	if first != "" {
		files = append(files, first)
	}
	for _, name := range f.files {
		p, err := filepath.Abs(name)
		if err != nil {
			return render.Input{}, "", err
		}
		files = append(files, p)
	}
	for _, name := range f.envFiles {
		p, err := filepath.Abs(name)
		if err != nil {
			return render.Input{}, "", err
		}
		envFiles = append(envFiles, p)
	}
	root := dir
	// render refuses reads outside Root (a compose file must not reach
	// /etc), so Root must hold every file the user named on the command line.
	for _, p := range slices.Concat(files, envFiles) {
		root = commonDir(root, filepath.Dir(p))
	}
	in := render.Input{Root: root}
	if in.Path, err = filepath.Rel(root, dir); err != nil {
		return render.Input{}, "", err
	}
	// render.Input takes slash paths, as in a git tree, on every OS.
	in.Path = filepath.ToSlash(in.Path)
	for _, p := range files {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			return render.Input{}, "", err
		}
		in.Files = append(in.Files, filepath.ToSlash(r))
	}
	for _, p := range envFiles {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			return render.Input{}, "", err
		}
		in.EnvFiles = append(in.EnvFiles, filepath.ToSlash(r))
	}
	return in, dir, nil
}

// commonDir is the deepest directory holding both absolute directories.
func commonDir(a, b string) string {
	for {
		if rel, err := filepath.Rel(a, b); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return a
		}
		parent := filepath.Dir(a)
		if parent == a {
			return a
		}
		a = parent
	}
}

// unwrapPathError drops os's "stat /abs/path:" prefix, since the caller
// names the path as the user typed it.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// relativeToCwd rewrites the file names of render errors, which are relative
// to root, to be relative to the current directory, so a terminal user can
// open them.
func relativeToCwd(root string, err error) error {
	cwd, cwdErr := os.Getwd()
	if cwdErr != nil {
		return err
	}
	prefix, relErr := filepath.Rel(cwd, root)
	if relErr != nil || prefix == "." {
		return err
	}
	if len(root) < len(prefix) {
		prefix = root // say /etc rather than ../../../etc
	}
	fix := func(e error) error {
		var re *render.Error
		if !errors.As(e, &re) {
			return e
		}
		c := *re
		c.File = filepath.ToSlash(filepath.Join(prefix, filepath.FromSlash(c.File)))
		return &c
	}
	// render returns all problems joined; each is fixed on its own, and a
	// joined error must stay joined so that every line is printed.
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range joined.Unwrap() {
			errs = append(errs, fix(e))
		}
		return errors.Join(errs...)
	}
	return fix(err)
}

// renderedRelease is the printed shape of a release: Engine API types keyed
// by name, secrets with their data replaced by a marker.
// Field order is the printed order; the JSON keys are the documented
// output (see the command's Long help).
type renderedRelease struct {
	Services map[string]swarm.ServiceSpec     `json:"services"`
	Networks map[string]network.CreateOptions `json:"networks"`
	Configs  map[string]swarm.ConfigSpec      `json:"configs"`
	Secrets  map[string]redactedSecret        `json:"secrets"`
	// Requirements are a chart's requirements.yaml, rendered; absent for
	// compose and for a chart without one.
	Requirements []chart.Entry `json:"requirements,omitempty"`
}

// redactedSecret marshals a secret spec with Data replaced by
// "<redacted sha256:…>", the same digest prefix that names the secret.
type redactedSecret struct{ spec swarm.SecretSpec }

// MarshalJSON encodes the spec as the Engine API would, but with Data
// replaced by a digest marker: a secret's value must never reach stdout,
// and the digest still shows when the value changed.
func (s redactedSecret) MarshalJSON() ([]byte, error) {
	data := s.spec.Data
	// s is a copy: clearing Data here leaves the caller's spec whole.
	s.spec.Data = nil
	out, err := json.Marshal(s.spec)
	if err != nil || len(data) == 0 {
		return out, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(out, &fields); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	// Written without HTML escaping, so the marker reads as it is (json.Marshal
	// would turn < and > into \u003c and \u003e).
	fields["Data"] = json.RawMessage(`"<redacted sha256:` + hex.EncodeToString(sum[:])[:10] + `>"`)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fields); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// writeRelease prints rel in format ("json" or "yaml"). The JSON is
// indented and does not escape HTML, so "<" in a command line reads as
// itself. YAML is converted from that JSON, so both show the same keys.
func writeRelease(w io.Writer, rel stack.Release, req []chart.Entry, format string) error {
	rel = rel.Masked()
	out := renderedRelease{
		Services:     rel.Services,
		Networks:     rel.Networks,
		Configs:      rel.Configs,
		Requirements: req,
		// Built here, never nil: a release without secrets prints {}, not null.
		Secrets: map[string]redactedSecret{},
	}
	for name, spec := range rel.Secrets {
		out.Secrets[name] = redactedSecret{spec: spec}
	}
	var buf bytes.Buffer
	jsonEnc := json.NewEncoder(&buf)
	jsonEnc.SetEscapeHTML(false)
	jsonEnc.SetIndent("", "  ")
	if err := jsonEnc.Encode(out); err != nil {
		return err
	}
	if format == "json" {
		_, err := w.Write(buf.Bytes())
		return err
	}
	data := buf.Bytes()
	// YAML shows the same structure: decode the JSON, keeping numbers
	// exact, and encode it again.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return err
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(yamlNumbers(tree)); err != nil {
		return err
	}
	return enc.Close()
}

// yamlNumbers replaces the json.Numbers of a decoded JSON tree with Go
// numbers, which YAML prints unquoted.
func yamlNumbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		// The tree was decoded for this call alone, so it is rewritten in place.
		for k, e := range v {
			v[k] = yamlNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = yamlNumbers(e)
		}
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		if f, err := v.Float64(); err == nil {
			return f
		}
		return v.String()
	}
	return v
}

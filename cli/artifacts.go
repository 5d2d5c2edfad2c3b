package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/skep-cd/skep/api"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/wire"
)

// artifactsFlags are the settings of `skep artifacts`.
type artifactsFlags struct {
	output      string
	load        artifact.LoadOptions
	noRegistry  bool
	tagTemplate string
	current     []string
}

// newArtifactsCommand builds `skep artifacts`: one resolution of an
// environment's artifact directory, as a reconcile would do it before the
// first deploy, without a swarm or a controller.
func newArtifactsCommand() *cobra.Command {
	var f artifactsFlags
	cmd := &cobra.Command{
		Use:   "artifacts DIR",
		Short: "Resolve an artifact directory: desired versions from git, image conditions from the registry",
		Long: `Artifacts loads an environment's artifact directory (see "Artifact files" in
docs/configuration.md), resolves each entry once and prints what a render
would use: the version git asks for (a pinned tag, or the branch head
through --tag-template), the registry's answer about its image, and the
version used. Nothing runs here, so the current version of each artifact is
empty unless --current gives it: the table shows a first deploy.

Git credentials come from SKEP_GIT_CREDENTIALS_FILE, as for the controller;
registry credentials from the Docker config file and its credential helpers.
--no-registry turns the image gate off: every resolved version counts as
pushed, as with checkImages: false.

An invalid directory prints every problem, one per line, as
file:line:column: field: message (on stderr with -o json). With -o json,
stdout holds a list of artifacts, each shaped as an entry of "artifacts"
in skep app get -o json.

Exit status: 0 when every entry resolved (waiting for an image is not a
failure), 1 when the directory is invalid or an entry could not be resolved
(a git or registry error), 2 on a usage error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runArtifacts(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], f)
		},
	}
	cmd.Flags().StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&f.load.Registry, "registry", "", "registry prefix of docker names in a release-repository artifact directory, e.g. registry.example.org/team")
	cmd.Flags().StringVar(&f.load.GitBase, "git-base", "", "git base URL of github names in a release-repository artifact directory, e.g. https://github.com/team")
	cmd.Flags().BoolVar(&f.noRegistry, "no-registry", false, "ask no registry: every resolved desired version counts as pushed")
	cmd.Flags().StringVar(&f.tagTemplate, "tag-template", "", "image tag of a branch head: {commit}, {short} (12 digits), {branch}; default {commit}")
	cmd.Flags().StringArrayVar(&f.current, "current", nil, "NAME=VERSION the swarm runs for an artifact (VERSION may end in @digest); repeatable")
	return cmd
}

// tagPlaceholder finds the placeholders of a tag template.
var tagPlaceholder = regexp.MustCompile(`\{[^{}]*\}`)

// check returns a usage error for flags that are wrong whatever DIR holds.
func (f artifactsFlags) check() error {
	if f.output != "text" && f.output != "json" {
		return usageError("--output: want text or json, got %q", f.output)
	}
	if err := f.load.Check(); err != nil {
		return usageError("artifacts: %v", err)
	}
	if f.tagTemplate != "" {
		for _, p := range tagPlaceholder.FindAllString(f.tagTemplate, -1) {
			if p != "{commit}" && p != "{short}" && p != "{branch}" {
				return usageError("--tag-template: unknown placeholder %s; want {commit}, {short} or {branch}", p)
			}
		}
		// Without the commit every push of a branch would reuse one tag, and
		// the gate could not tell a new image from the last one.
		if !strings.Contains(f.tagTemplate, "{commit}") && !strings.Contains(f.tagTemplate, "{short}") {
			return usageError("--tag-template: want {commit} or {short} in it, got %q", f.tagTemplate)
		}
	}
	return nil
}

// currentVersions parses the --current flags against the loaded set: each
// names an artifact of it, at most once.
func (f artifactsFlags) currentVersions(set *artifact.Set) (map[string]string, error) {
	current := map[string]string{}
	for _, kv := range f.current {
		name, version, ok := strings.Cut(kv, "=")
		switch {
		case !ok || name == "" || version == "":
			return nil, usageError("--current: want NAME=VERSION, got %q", kv)
		case current[name] != "":
			return nil, usageError("--current: %s given twice", name)
		}
		if _, ok := set.Lookup(name); !ok {
			return nil, usageError("--current: no artifact named %s in the directory", name)
		}
		current[name] = version
	}
	return current, nil
}

// runArtifacts loads dir, resolves it and prints the result.
func runArtifacts(ctx context.Context, stdout, stderr io.Writer, dir string, f artifactsFlags) error {
	if err := f.check(); err != nil {
		return err
	}
	set, problems, err := loadArtifacts(dir, f.load)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: err}
	}
	if len(problems) > 0 {
		// JSON on stdout is a list of artifacts, so the problems of a
		// directory that has none go to stderr there.
		w := stdout
		if f.output == "json" {
			w = stderr
		}
		for _, p := range problems {
			if _, err := fmt.Fprintln(w, p.String()); err != nil {
				return err
			}
		}
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("artifacts: %s in %s", plural(len(problems), "problem"), dir)}
	}
	// Nothing here asks a swarm: without --current, the table shows what a
	// first deploy would use.
	current, err := f.currentVersions(set)
	if err != nil {
		return err
	}
	objs, err := resolveArtifacts(ctx, set, current, f)
	if err != nil {
		return err
	}
	// Waiting is what an unpushed image looks like and no failure; only an
	// entry nobody could resolve (git or the registry did not answer, a tag
	// that does not exist) fails the command, so CI can gate on it.
	views := make([]wire.Artifact, 0, len(objs))
	failed := 0
	for _, o := range objs {
		views = append(views, api.ArtifactView(o))
		if o.Condition == artifact.Failed {
			failed++
		}
	}
	if err := writeArtifacts(stdout, f.output, views); err != nil {
		return err
	}
	if failed == 0 {
		return nil
	}
	if f.output == "json" {
		// Each failed entry's condition and reason are in the JSON already.
		return &ExitError{Code: ExitFailure}
	}
	return &ExitError{Code: ExitFailure, Err: fmt.Errorf("artifacts: %d of %s could not be resolved", failed, plural(len(objs), "artifact"))}
}

// loadArtifacts loads dir as an artifact directory. Problems name their
// files under dir, as the user typed it; err is for a directory that is
// not one at all.
func loadArtifacts(dir string, opts artifact.LoadOptions) (*artifact.Set, configfile.Problems, error) {
	// A root keeps symbolic links in the directory from reaching outside it.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("artifacts: %w", err)
	}
	defer root.Close()
	fsys := root.FS()
	if _, ok := artifact.Detect(fsys, "."); !ok {
		return nil, nil, fmt.Errorf("artifacts: %s is not an artifact directory: want service/ or infrastructure/ folders, or YAML files each holding a list", dir)
	}
	set, err := artifact.Load(fsys, ".", opts)
	var problems configfile.Problems
	switch {
	case err == nil:
		return set, nil, nil
	case errors.As(err, &problems):
		out := make(configfile.Problems, 0, len(problems))
		for _, p := range problems {
			p.File = filepath.Join(dir, p.File)
			out = append(out, p)
		}
		return nil, out, nil
	default:
		return nil, nil, fmt.Errorf("artifacts: load %s: %w", dir, err)
	}
}

// resolveArtifacts resolves set once, with a git cache in a temporary
// directory removed before it returns.
func resolveArtifacts(ctx context.Context, set *artifact.Set, current map[string]string, f artifactsFlags) ([]artifact.Object, error) {
	var creds *gitsource.Credentials
	if path := os.Getenv(EnvGitCredentialsFile); path != "" {
		var err error
		if creds, err = gitsource.LoadCredentials(path); err != nil {
			return nil, fmt.Errorf("artifacts: %w", err)
		}
	}
	tmp, err := os.MkdirTemp("", "skep-artifacts-")
	if err != nil {
		return nil, fmt.Errorf("artifacts: git cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	git, err := gitsource.New(gitsource.Options{Dir: tmp, Credentials: creds})
	if err != nil {
		return nil, fmt.Errorf("artifacts: %w", err)
	}
	opts := artifact.ResolveOptions{Git: git, Current: current, TagTemplate: f.tagTemplate}
	// Images stays a nil interface with --no-registry: a nil *Registry in
	// it would not turn the gate off.
	if !f.noRegistry {
		opts.Images = artifact.NewRegistry(artifact.RegistryOptions{})
	}
	return artifact.Resolve(ctx, set.Entries(), opts), nil
}

// writeArtifacts prints views as a JSON list or as a table.
func writeArtifacts(w io.Writer, output string, views []wire.Artifact) error {
	// The JSON is the wire model's Artifact, the shape `skep app get -o
	// json` prints, so one script reads both.
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(views)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tSTRATEGY\tDESIRED\tCONDITION\tDIGEST\tVERSION\tDRIFT")
	for _, a := range views {
		condition := orDash(a.Condition)
		if a.Reason != "" {
			condition += ": " + oneLine(a.Reason, 100)
		}
		// The algorithm prefix is always sha256 here; the hex is what a
		// reader compares with the registry.
		_, digest, _ := strings.Cut(a.Digest, ":")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Name, a.Kind, a.Strategy,
			orDash(shortHex(a.Desired)), condition, short(digest), orDash(shortHex(a.Version)), a.Drift)
	}
	return tw.Flush()
}

// fullCommit matches a full git commit hash.
var fullCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)

// shortHex shortens a full commit hash to 12 digits and leaves any other
// version (a tag, a templated branch tag) whole: cutting a tag could make
// two different ones look alike.
func shortHex(v string) string {
	if fullCommit.MatchString(v) {
		return v[:12]
	}
	return v
}

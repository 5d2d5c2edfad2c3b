package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/artifact"
	"github.com/skep-cd/skep/chart"
	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/swarm"
)

// newValidateCommand builds `skep validate`, the offline check CI runs on
// an app-set repository, or on a release repository's artifact
// directories, before a controller reads them.
func newValidateCommand() *cobra.Command {
	var output, destinations string
	var artifactOptions artifact.LoadOptions
	cmd := &cobra.Command{
		Use:   "validate PATH...",
		Short: "Check app-set files, app-set directories, artifact directories or charts offline",
		Long: `Validate checks each app set offline: a file, or a directory whose *.yaml and
*.yml files form one set. Each PATH is checked on its own.

A directory holding Chart.yaml is a chart (see docs/charts.md): Chart.yaml,
values.schema.json and the templates are checked, and the chart is rendered
with every ci/*-values.yaml (with its defaults when there is none), twice, so
that a template that renders differently each time is reported.

A directory with service/ or infrastructure/ folders, or whose YAML files
each hold a list, is an environment's artifact directory instead (see
"Artifact files" in docs/configuration.md), and is checked as one. In the
release-repository shape, --registry and --git-base make the images and
sources of the docker and github names; without them the names themselves
are checked, so a release repository's CI needs no flags.

With --destinations FILE, every destination.swarm must be "" or a name that
file defines (only the destinations file is read, not the files it names);
without it, named swarms are checked for their shape only.

Every problem is printed to stdout, one per line, as
file:line:column: field: message. With -o json, stdout holds one object:
{"valid": bool, "problems": [...], "sets": [...]}.

Exit status: 0 when every set is valid, 1 when any is invalid or unreadable,
2 on a usage error.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("validate: want at least one app-set file or directory")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return usageError("--output: want text or json, got %q", output)
			}
			if err := artifactOptions.Check(); err != nil {
				return usageError("validate: %v", err)
			}
			artifactOptions.NamesOnly = true
			var check func(*appset.Set) error
			if destinations != "" {
				data, err := os.ReadFile(destinations)
				if err != nil {
					return fmt.Errorf("destinations file: %w", err)
				}
				dests, err := swarm.ParseDestinations(destinations, data)
				if err != nil {
					return err
				}
				check = func(set *appset.Set) error {
					return set.CheckSwarms(func(n string) bool { _, ok := dests[n]; return ok }, swarm.Known(dests))
				}
			}
			report := validatePaths(cmd.Context(), args, artifactOptions, check)
			if err := report.write(cmd.OutOrStdout(), output); err != nil {
				return err
			}
			if report.Valid {
				return nil
			}
			if output == "json" {
				// The JSON already says what is wrong; a message on stderr would only
				// repeat it, so the error carries just the exit code.
				return &ExitError{Code: ExitFailure}
			}
			sets := "app sets"
			if report.artifacts() {
				sets = "sets"
			}
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("validate: %s in %d of %d %s",
				plural(len(report.Problems), "problem"), report.invalidSets(), len(report.Sets), sets)}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&destinations, "destinations", "", "destinations file: check that every named destination.swarm is defined there")
	cmd.Flags().StringVar(&artifactOptions.Registry, "registry", "", "registry prefix of docker names in release-repository artifact directories, e.g. registry.example.org/team")
	cmd.Flags().StringVar(&artifactOptions.GitBase, "git-base", "", "git base URL of github names in release-repository artifact directories, e.g. https://github.com/team")
	return cmd
}

// validateReport is the outcome of `skep validate`, and its -o json shape.
type validateReport struct {
	Valid    bool                 `json:"valid"`
	Problems []configfile.Problem `json:"problems"`
	Sets     []validatedAppSet    `json:"sets"`
}

// validatedAppSet is one PATH's line in the report.
type validatedAppSet struct {
	Path  string `json:"path"`
	Valid bool   `json:"valid"`
	// Applications counts what the set declares; 0 when it is unreadable
	// or an artifact directory.
	Applications int `json:"applications"`
	// Generators counts the set's generators, which make applications
	// from a repository's directories once the controller lists them.
	Generators int `json:"generators,omitempty"`
	// Shape is set for an artifact directory, with its count of
	// Artifacts.
	Shape     artifact.Shape `json:"shape,omitempty"`
	Artifacts int            `json:"artifacts,omitempty"`
	// Renders counts the values sets a chart (Shape "chart") rendered.
	Renders int `json:"renders,omitempty"`
	// Requirements are the external objects a chart's requirements.yaml
	// named, over every values set rendered, with their descriptions.
	Requirements []chart.Entry `json:"requirements,omitempty"`
	// problems are this set's share of validateReport.Problems.
	// Unexported, so the JSON lists each problem once, in
	// validateReport.Problems.
	problems []configfile.Problem
}

// validatePaths loads each path as its own app set. A path that cannot be
// read is reported as a problem of that path.
// check, when set, judges each loaded set further (the destinations).
func validatePaths(ctx context.Context, paths []string, opts artifact.LoadOptions, check func(*appset.Set) error) validateReport {
	// Problems starts empty, not nil, so -o json prints [] and a script can
	// take its length without a null check.
	report := validateReport{Valid: true, Problems: []configfile.Problem{}}
	for _, path := range paths {
		if isChartDir(path) {
			result := validateChart(ctx, path)
			report.Problems = append(report.Problems, result.problems...)
			report.Valid = report.Valid && result.Valid
			report.Sets = append(report.Sets, result)
			continue
		}
		if result, ok := validateArtifacts(path, opts); ok {
			report.Problems = append(report.Problems, result.problems...)
			report.Valid = report.Valid && result.Valid
			report.Sets = append(report.Sets, result)
			continue
		}
		var source appset.Source = appset.FileSource{Path: path}
		if info, err := os.Stat(path); err == nil && info.IsDir() {
			source = appset.DirSource{Dir: path}
		}
		// set is nil on any error, and a nil set's Len is 0.
		set, _, err := source.Load(ctx)
		if err == nil && check != nil {
			if err = check(set); err != nil {
				set = nil
			}
		}
		result := validatedAppSet{Path: path, Valid: err == nil, Applications: set.Len()}
		if set != nil {
			result.Generators = len(set.Generators())
		}
		var problems configfile.Problems
		switch {
		case err == nil:
		// appset collects every problem, each with file and line; all are
		// printed, so the user can fix a file in one go.
		case errors.As(err, &problems):
			result.problems = problems
		default:
			result.problems = []configfile.Problem{{File: path, Message: err.Error()}}
		}
		report.Problems = append(report.Problems, result.problems...)
		report.Valid = report.Valid && result.Valid
		report.Sets = append(report.Sets, result)
	}
	return report
}

// write prints the report as JSON, or as one line per valid set and per
// problem, in PATH order.
func (r validateReport) write(w io.Writer, output string) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	for _, set := range r.Sets {
		if set.Valid {
			what := plural(set.Applications, "application")
			if set.Generators > 0 {
				what += " and " + plural(set.Generators, "generator")
			}
			switch set.Shape {
			case "chart":
				what = "chart, " + plural(set.Renders, "values set") + " rendered"
			case "":
			default:
				what = fmt.Sprintf("%s artifact directory, %s", set.Shape, plural(set.Artifacts, "artifact"))
			}
			if _, err := fmt.Fprintf(w, "%s: %s, valid\n", set.Path, what); err != nil {
				return err
			}
			for _, e := range set.Requirements {
				if _, err := fmt.Fprintf(w, "  requires %s\n", e); err != nil {
					return err
				}
			}
		}
		for _, p := range set.problems {
			if _, err := fmt.Fprintln(w, p.String()); err != nil {
				return err
			}
		}
	}
	return nil
}

// invalidSets counts the sets with at least one problem.
func (r validateReport) invalidSets() int {
	n := 0
	for _, s := range r.Sets {
		if !s.Valid {
			n++
		}
	}
	return n
}

// artifacts reports whether any PATH was an artifact directory.
func (r validateReport) artifacts() bool {
	for _, s := range r.Sets {
		if s.Shape != "" {
			return true
		}
	}
	return false
}

// validateArtifacts loads path as an environment's artifact directory, if
// it is one. Problems name their files under path, as the user typed it.
func validateArtifacts(path string, opts artifact.LoadOptions) (validatedAppSet, bool) {
	info, err := os.Stat(path)
	if err != nil || !info.IsDir() {
		return validatedAppSet{}, false
	}
	// A root keeps symbolic links in the checked tree from reaching outside it.
	root, err := os.OpenRoot(path)
	if err != nil {
		return validatedAppSet{}, false
	}
	defer root.Close()
	fsys := root.FS()
	shape, ok := artifact.Detect(fsys, ".")
	if !ok {
		return validatedAppSet{}, false
	}
	result := validatedAppSet{Path: path, Shape: shape}
	set, err := artifact.Load(fsys, ".", opts)
	var problems configfile.Problems
	switch {
	case err == nil:
		result.Valid, result.Artifacts = true, set.Len()
	case errors.As(err, &problems):
		for _, p := range problems {
			p.File = filepath.Join(path, p.File)
			result.problems = append(result.problems, p)
		}
	default:
		result.problems = []configfile.Problem{{File: path, Message: err.Error()}}
	}
	return result, true
}

// plural says "1 noun" or "n nouns"; only regular plurals are needed.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

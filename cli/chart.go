package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/skep-cd/skep/chart"
	"github.com/skep-cd/skep/configfile"
	"github.com/skep-cd/skep/render"
	"github.com/skep-cd/skep/stack"
)

// isChartDir reports whether path is a directory holding Chart.yaml.
func isChartDir(path string) bool {
	info, err := os.Stat(filepath.Join(path, "Chart.yaml"))
	return err == nil && !info.IsDir()
}

// loadChart loads the chart directory dir through an os.Root, so that a
// symbolic link in it cannot lead outside it. Problems name files under
// dir, as the user typed it.
func loadChart(dir string) (*chart.Chart, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, unwrapPathError(err))
	}
	defer root.Close()
	c, err := chart.Load(root.FS(), ".")
	if err != nil {
		return nil, chartProblems(dir, err, nil)
	}
	return c, nil
}

// chartProblems names the chart's files under dir; the values files the
// user named on the command line, and --set, keep their names.
func chartProblems(dir string, err error, keep map[string]bool) error {
	var ps configfile.Problems
	if errors.As(err, &ps) {
		out := make(configfile.Problems, len(ps))
		for i, p := range ps {
			if !keep[p.File] && p.File != "--set" {
				p.File = filepath.Join(dir, p.File)
			}
			out[i] = p
		}
		return out
	}
	// The merged document's problems name "templates (merged)", relative to
	// the chart; shown from the working directory they read like the rest.
	var re *render.Error
	if errors.As(err, &re) {
		abs, absErr := filepath.Abs(dir)
		if absErr == nil {
			return relativeToCwd(abs, err)
		}
	}
	return err
}

// readValuesFiles reads the --values files in order.
func readValuesFiles(names []string) ([]chart.ValuesFile, error) {
	var out []chart.ValuesFile
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, unwrapPathError(err))
		}
		out = append(out, chart.ValuesFile{Name: name, Data: data})
	}
	return out, nil
}

// parseSetFlags turns --set key=value flags into RenderOptions.Set; a later
// flag for the same key wins.
func parseSetFlags(flags []string) (map[string]string, error) {
	set := map[string]string{}
	for _, s := range flags {
		// Only the first "=" splits: a value may hold more ("a=b=c" sets a
		// to "b=c"), as Helm's --set reads it.
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, usageError("--set: want key=value, got %q", s)
		}
		set[k] = v
	}
	return set, nil
}

// renderChart renders and converts the chart in dir, as the controller
// would, with the --values and --set flags.
// The requirements are requirements.yaml as rendered with the same values.
func renderChart(cmd *cobra.Command, dir string, f renderFlags) (stack.Release, []chart.Entry, []string, error) {
	c, err := loadChart(dir)
	if err != nil {
		return stack.Release{}, nil, nil, err
	}
	values, err := readValuesFiles(f.values)
	if err != nil {
		return stack.Release{}, nil, nil, err
	}
	set, err := parseSetFlags(f.set)
	if err != nil {
		return stack.Release{}, nil, nil, err
	}
	// Without --release the chart renders as the release its directory
	// names, the name a first deploy of it would most likely use.
	release := f.release
	if release == "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return stack.Release{}, nil, nil, err
		}
		release = filepath.Base(abs)
	}
	opts := chart.RenderOptions{ReleaseName: release, ValuesFiles: values, Set: set}
	doc, _, err := chart.Render(cmd.Context(), c, opts)
	var req chart.Requirements
	if err == nil {
		req, err = c.Requirements(cmd.Context(), opts)
	}
	if err != nil {
		// Problems in the command line's own values files keep the names
		// the user typed; the chart's files are named under its directory.
		keep := map[string]bool{}
		for _, v := range values {
			keep[v.Name] = true
		}
		return stack.Release{}, nil, nil, chartProblems(dir, err, keep)
	}
	check, err := f.addressCheck(cmd.Context())
	if err != nil {
		return stack.Release{}, nil, doc.Warnings, err
	}
	rel, err := stack.Convert(doc.Config, stack.Options{
		Owner:        stack.Owner{Controller: f.controller, Application: release, Release: release},
		Allow:        f.allow,
		Files:        doc.Files,
		CheckAddress: check,
	})
	return rel, req.Entries(), doc.Warnings, err
}

// validateChart checks the chart in path offline: Chart.yaml, the schema
// and the templates, then a render with every ci/*values.yaml (or with the
// defaults when there is none), each rendered twice to find templates that
// are not stable.
func validateChart(ctx context.Context, path string) validatedAppSet {
	result := validatedAppSet{Path: path, Shape: "chart"}
	fail := func(err error) {
		var ps configfile.Problems
		if errors.As(err, &ps) {
			result.problems = append(result.problems, ps...)
			return
		}
		result.problems = append(result.problems, configfile.Problem{File: path, Message: err.Error()})
	}
	c, err := loadChart(path)
	if err != nil {
		fail(err)
		return result
	}
	// "" is this binary's version: validation answers for the skep that
	// runs it, which is the one a release repository's CI pins.
	if err := c.CheckSkepVersion(""); err != nil {
		fail(err)
	}
	// Each ci/*values.yaml is one environment the chart's authors meant to
	// work; without any, the defaults alone must render.
	runs := [][]chart.ValuesFile{nil}
	if ci := c.CIValues(); len(ci) > 0 {
		runs = nil
		for _, f := range ci {
			runs = append(runs, []chart.ValuesFile{f})
		}
	}
	for _, values := range runs {
		opts := chart.RenderOptions{ReleaseName: c.Metadata().Name, ValuesFiles: values}
		if _, _, err := chart.Render(ctx, c, opts); err != nil {
			fail(chartProblems(path, err, nil))
			continue
		}
		req, err := c.Requirements(ctx, opts)
		if err != nil {
			fail(chartProblems(path, err, nil))
			continue
		}
		result.Requirements = addRequirements(result.Requirements, req.Entries())
		result.Renders++
		diffs, err := chart.CheckStable(ctx, c, opts)
		switch {
		case err != nil:
			fail(chartProblems(path, err, nil))
		case len(diffs) > 0:
			// The paths name fields, not values: the report never carries a
			// value that could be a secret.
			file := filepath.Join(path, "templates")
			if len(values) > 0 {
				file = filepath.Join(path, values[0].Name)
			}
			result.problems = append(result.problems, configfile.Problem{File: file,
				Message: fmt.Sprintf("renders differently each time (a random value or the clock) at %s; the controller holds such a chart", strings.Join(diffs, ", "))})
		}
	}
	result.Valid = len(result.problems) == 0
	return result
}

// addRequirements adds to have the entries it lacks, by kind and name,
// keeping networks, configs and secrets together in that order: the values
// sets of a chart may name different objects.
func addRequirements(have, entries []chart.Entry) []chart.Entry {
	for _, e := range entries {
		if !slices.ContainsFunc(have, func(h chart.Entry) bool { return h.Kind == e.Kind && h.Name == e.Name }) {
			have = append(have, e)
		}
	}
	order := map[string]int{"network": 0, "config": 1, "secret": 2}
	slices.SortStableFunc(have, func(a, b chart.Entry) int { return order[a.Kind] - order[b.Kind] })
	return have
}

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/skep-cd/skep/appset"
	"github.com/skep-cd/skep/configfile"
)

// newValidateCommand builds `skep validate`, the offline check CI runs on
// an app-set repository before a controller reads it.
func newValidateCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "validate PATH...",
		Short: "Check app-set files or directories offline",
		Long: `Validate checks each app set offline: a file, or a directory whose *.yaml and
*.yml files form one set. Each PATH is checked on its own.

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
			report := validatePaths(cmd.Context(), args)
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
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("validate: %s in %d of %d app sets",
				plural(len(report.Problems), "problem"), report.invalidSets(), len(report.Sets))}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
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
	// Applications counts what the set declares; 0 when it is unreadable.
	Applications int `json:"applications"`
	// problems are this set's share of validateReport.Problems.
	// Unexported, so the JSON lists each problem once, in
	// validateReport.Problems.
	problems []configfile.Problem
}

// validatePaths loads each path as its own app set. A path that cannot be
// read is reported as a problem of that path.
func validatePaths(ctx context.Context, paths []string) validateReport {
	// Problems starts empty, not nil, so -o json prints [] and a script can
	// take its length without a null check.
	report := validateReport{Valid: true, Problems: []configfile.Problem{}}
	for _, path := range paths {
		var source appset.Source = appset.FileSource{Path: path}
		if info, err := os.Stat(path); err == nil && info.IsDir() {
			source = appset.DirSource{Dir: path}
		}
		// set is nil on any error, and a nil set's Len is 0.
		set, _, err := source.Load(ctx)
		result := validatedAppSet{Path: path, Valid: err == nil, Applications: set.Len()}
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
			if _, err := fmt.Fprintf(w, "%s: %s, valid\n", set.Path, plural(set.Applications, "application")); err != nil {
				return err
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

// plural says "1 noun" or "n nouns"; only regular plurals are needed.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

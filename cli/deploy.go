package cli

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/skep-cd/skep/gitsource"
	"github.com/skep-cd/skep/notify"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/reconcile"
)

// deployResult is one application's line in `skep deploy -o json`.
// Field names and tags are a contract with scripts: rename none.
type deployResult struct {
	Application string `json:"application"`
	// Commit is the commit the application's revision resolved to; empty
	// when resolving failed.
	Commit string `json:"commit,omitempty"`
	// Plan is nil when no plan was made (the application failed earlier).
	Plan *plan.Release `json:"plan,omitempty"`
	// Applied reports whether the apply step ran (reconcile.Result.Applied).
	Applied bool `json:"applied"`
	// Revision is the release revision the apply recorded; 0 when none.
	Revision int `json:"revision,omitempty"`
	// Error is the reconcile error's message; empty on success.
	Error string `json:"error,omitempty"`
}

// newDeployCommand builds `skep deploy`: one pass over the app set, in this
// process, without an API, and then exit. CI runs it where a long-running
// controller is not wanted.
func newDeployCommand() *cobra.Command {
	var flags controllerFlags
	var app, output string
	var dryRun, force bool
	cmd := &cobra.Command{
		Use:   "deploy",
		Short: "Run one reconcile of the app set (or one application) and exit",
		Long: "deploy loads the app set, renders each application at its revision, plans it\n" +
			"against the release's recorded revision and applies it, then exits; non-zero\n" +
			"when any application failed. --dry-run prints the plan and diff and writes nothing.\n" +
			"--force re-applies every service even when nothing changed, restarting its tasks;\n" +
			"only this one-shot command can force: the controller and the API never do.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if force && dryRun {
				return usageError("--force and --dry-run exclude each other")
			}
			if output != "" && output != "text" && output != "json" {
				return usageError("--output: want text or json, got %q", output)
			}
			logger, err := flags.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			var notifier notify.Registry
			// Events go to the log only: there is no store or API for them here.
			notifier.Register(notify.NewLog(logger))
			ctrl, closeEngine, err := flags.build(cmd.Context(), logger, &notifier)
			if err != nil {
				return err
			}
			defer closeEngine()
			if _, err := ctrl.LoadAppSet(cmd.Context()); err != nil {
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("app set: %w", err)}
			}
			var names []string
			for _, a := range ctrl.Applications() {
				if app == "" || a.Name == app {
					names = append(names, a.Name)
				}
			}
			if app != "" && len(names) == 0 {
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%w: %s", reconcile.ErrUnknownApplication, app)}
			}
			var results []deployResult
			failed := false
			// One application after another, all of them, so that one failure does
			// not hide the state of the others; the exit code sums them up.
			for _, name := range names {
				var out reconcile.Result
				if dryRun {
					out, err = ctrl.Plan(cmd.Context(), name, "")
				} else {
					// Sync: deploy is an explicit request to apply, whatever the
					// application's automated policy says.
					out, err = ctrl.ReconcileOnce(cmd.Context(), name, reconcile.Request{Sync: true, Force: force})
				}
				r := deployResult{Application: name, Commit: out.Commit, Applied: out.Applied, Revision: out.Applying.Revision}
				// The zero Action is invalid: it means no plan was made.
				if out.Plan.Action.Valid() {
					p := out.Plan
					r.Plan = &p
				}
				if err != nil {
					r.Error, failed = err.Error(), true
				}
				results = append(results, r)
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(results); err != nil {
					return err
				}
			} else if err := printDeploy(cmd.OutOrStdout(), results, dryRun); err != nil {
				return err
			}
			if failed {
				return &ExitError{Code: ExitFailure, Err: errors.New("deploy failed for at least one application")}
			}
			return nil
		},
	}
	flags.register(cmd.Flags())
	cmd.Flags().StringVar(&app, "app", "", "deploy only this application")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and diff; write nothing")
	cmd.Flags().BoolVar(&force, "force", false, "re-apply every service even with no drift, restarting its tasks")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: text or json")
	return cmd
}

// printDeploy writes one line per application and, when the plan changed
// something (or on --dry-run), the plan as package plan prints it.
func printDeploy(w io.Writer, results []deployResult, dryRun bool) error {
	for _, r := range results {
		switch {
		case r.Error != "":
			fmt.Fprintf(w, "%s: FAILED at %s: %s\n", r.Application, shortCommit(r.Commit), r.Error)
		case dryRun:
			fmt.Fprintf(w, "%s: plan at %s\n", r.Application, shortCommit(r.Commit))
		case r.Applied && r.Revision > 0:
			fmt.Fprintf(w, "%s: deployed %s as revision %d\n", r.Application, shortCommit(r.Commit), r.Revision)
		default:
			fmt.Fprintf(w, "%s: in sync at %s\n", r.Application, shortCommit(r.Commit))
		}
		if r.Plan != nil && (dryRun || r.Plan.Changed()) {
			if err := plan.Render(w, []plan.Release{*r.Plan}); err != nil {
				return err
			}
		}
	}
	return nil
}

// shortCommit is a commit as deploy prints it; "(unresolved)" for none,
// since here an empty commit means resolving failed.
func shortCommit(c string) string {
	return cmp.Or(gitsource.ShortCommit(c), "(unresolved)")
}

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/skep-cd/skep/client"
	"github.com/skep-cd/skep/plan"
	"github.com/skep-cd/skep/wire"
)

// newPlanCommand builds `skep plan`: a revision planned as a pull
// request's head is, for CI jobs that prefer to ask. Its exit code is the
// answer: 0 no change, 3 changes, 1 a revision that does not render,
// validate or place (or any failure to ask).
func newPlanCommand() *cobra.Command {
	var out output
	var revision string
	cmd := &cobra.Command{
		Use:   "plan NAME --revision REF",
		Short: "Plan a revision as merging it would deploy it; exit 0 no change, 3 changes, 1 error",
		Long: "plan renders the application at REF (a branch, tag or commit of its repository, or a pull\n" +
			"request's ref such as refs/pull/7/head) with what merging it would give, and compares it\n" +
			"with what the swarm runs, release by release, writing nothing. It needs the deployer role.\n" +
			"Exit codes: 0 no change, 3 changes, 1 the revision does not render, validate or place.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if revision == "" {
				return usageError("--revision: want a branch, tag, commit or pull request ref")
			}
			if err := out.check(); err != nil {
				return err
			}
			c, err := newClient(cmd.Context())
			if err != nil {
				return err
			}
			path := client.AppPath(args[0], "/plan")
			raw, err := c.Call(cmd.Context(), http.MethodPost, path, nil, wire.PlanRequest{Revision: revision})
			if err != nil {
				return apiFailure(err)
			}
			var p wire.Proposal
			if err := json.Unmarshal(raw, &p); err != nil {
				return apiFailure(fmt.Errorf("decode answer of %s: %w", path, err))
			}
			if out.raw() {
				err = out.print(cmd.OutOrStdout(), raw)
			} else {
				err = printProposal(cmd.OutOrStdout(), p)
			}
			if err != nil {
				return err
			}
			return planOutcome(p)
		},
	}
	out.register(cmd)
	cmd.Flags().StringVar(&revision, "revision", "", "the branch, tag, commit or pull request ref to plan (required)")
	return cmd
}

// printProposal writes a proposal as `skep app diff` writes a plan, each
// release that did not plan with its error.
func printProposal(w io.Writer, p wire.Proposal) error {
	what := fmt.Sprintf("%d changes", p.Changes)
	switch {
	case p.Error != "":
		what = "failed"
	case p.Changes == 0:
		what = "no change"
	case p.Changes == 1:
		what = "1 change"
	}
	fmt.Fprintf(w, "%s at %s: %s\n", p.Application, short(p.Revision), what)
	if p.Sealed {
		fmt.Fprintln(w, "(sealed: encrypted values were not decrypted; each shows as changed where its ciphertext changed)")
	}
	var planned []wire.ReleasePlan
	for _, r := range p.Releases {
		if r.Error != "" {
			fmt.Fprintf(w, "release %s: %s\n", r.Name, r.Error)
			continue
		}
		planned = append(planned, r.ReleasePlan)
	}
	return plan.Render(w, plansOf(planned))
}

// planOutcome is the exit a proposal gives: ExitFailure with its error,
// ExitChanges (printing nothing more) for changes, nil for none.
func planOutcome(p wire.Proposal) error {
	switch {
	case p.Error != "":
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("plan of %s at %s: %s", p.Application, short(p.Revision), p.Error)}
	case p.Changes > 0:
		return &ExitError{Code: ExitChanges}
	}
	return nil
}

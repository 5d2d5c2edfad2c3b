package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/skep-cd/skep/wire"
)

// newAppCanaryCommand builds `skep app promote` or `skep app abort`
// (action), which ask an application's running canary to be promoted or
// aborted, by the caller.
func newAppCanaryCommand(action string) *cobra.Command {
	var out output
	summary, long, done := "Promote the running canary now: the stable service takes its spec",
		"promote gives the stable service the spec of the application's running canary now,\n"+
			"through the service's own update_config, whatever steps are left; then the canary\n"+
			"is removed (event canary-promoted, attributed to you). A canary paused until\n"+
			"promoted, or by an inconclusive analysis, goes on this way.", "promotion"
	if action == "abort" {
		summary, long, done = "Abort the running canary: it goes and its commit is held",
			"abort removes the application's running canary, gives the stable service its\n"+
				"replicas back and holds the canary's commit off until a new commit, a sync or a\n"+
				"rollback (events sync-failed and canary-aborted, attributed to you).", "abort"
	}
	cmd := &cobra.Command{
		Use:   action + " NAME",
		Short: summary,
		Long:  long + "\n\nIt fails (exit 1) when no canary progresses or is paused.",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := newClient(cmd.Context())
			if err != nil {
				return err
			}
			ask := c.Promote
			if action == "abort" {
				ask = c.Abort
			}
			resp, err := ask(cmd.Context(), args[0])
			if err != nil {
				return apiFailure(err)
			}
			if out.raw() {
				body, err := json.Marshal(resp)
				if err != nil {
					return err
				}
				return out.print(cmd.OutOrStdout(), body)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s of the canary at %s queued\n", args[0], done, short(resp.Revision))
			return nil
		},
	}
	out.register(cmd)
	return cmd
}

// printCanary prints an application's canary: its step, weight and tasks,
// then each metric of its analysis with its newest values.
func printCanary(w io.Writer, c *wire.Canary) error {
	if c == nil {
		return nil
	}
	fmt.Fprintln(w, "\nCanary:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	step := fmt.Sprintf("%d of %d", c.Step, c.Steps)
	if c.StepName != "" {
		step += " (" + c.StepName + ") since " + c.Since.Format(time.RFC3339)
	}
	fmt.Fprintf(tw, "  Service:\t%s, canary %s at %s\n", c.Service, c.CanaryService, short(c.Revision))
	fmt.Fprintf(tw, "  Phase:\t%s\n", c.Phase)
	fmt.Fprintf(tw, "  Step:\t%s\n", step)
	fmt.Fprintf(tw, "  Weight:\t%d%%: %d canary and %d stable tasks of %d\n", c.Weight, c.Replicas, c.StableReplicas, c.TotalReplicas)
	if c.Next != nil {
		fmt.Fprintf(tw, "  Next look:\t%s\n", c.Next.Format(time.RFC3339))
	}
	if c.Message != "" {
		fmt.Fprintf(tw, "  Why:\t%s\n", oneLine(c.Message, 300))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(c.Analysis) == 0 {
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  METRIC\tPHASE\tMEASURED\tOK/FAILED/INCONCLUSIVE/ERRORS\tVALUES")
	for _, m := range c.Analysis {
		var values []string
		for _, x := range m.Measurements {
			v := x.Value
			if x.Error != "" {
				v = "error"
			}
			values = append(values, v)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d/%d/%d/%d\t%s\n", m.Metric, m.Phase, m.Count, m.Successful, m.Failed, m.Inconclusive, m.Errors,
			orDash(oneLine(strings.Join(values, " "), 80)))
	}
	return tw.Flush()
}

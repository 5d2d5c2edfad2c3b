package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/skep-cd/skep/wire"
)

// newStatusCommand builds `skep status`: the controller's own state, as
// opposed to its applications' (see `skep app list`).
func newStatusCommand() *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the controller's status: app set, readiness, applications",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st wire.ControllerStatus
			if printed, err := fetch(cmd, out, "/api/v1/status", nil, &st); printed || err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "Controller:\t%s\n", st.ControllerID)
			fmt.Fprintf(tw, "Ready:\t%t\n", st.Ready)
			printReplication(tw, st.Replication)
			fmt.Fprintf(tw, "App set:\t%s\n", st.AppSet.Source)
			fmt.Fprintf(tw, "  revision:\t%s\n", short(st.AppSet.Revision))
			fmt.Fprintf(tw, "  loaded:\t%t (stale: %t)\n", st.AppSet.Loaded, st.AppSet.Stale)
			if st.AppSet.LoadedAt != nil {
				fmt.Fprintf(tw, "  loaded at:\t%s\n", st.AppSet.LoadedAt.Format(time.RFC3339))
			}
			if st.AppSet.Error != "" {
				fmt.Fprintf(tw, "  error:\t%s\n", st.AppSet.Error)
			}
			fmt.Fprintf(tw, "Applications:\t%d\n", st.Applications)
			// Which notifiers run tells an operator where events go, without
			// reading the controller's flags.
			if len(st.Notifiers) > 0 {
				fmt.Fprintf(tw, "Notifiers:\t%s\n", strings.Join(st.Notifiers, ", "))
			}
			if sts := st.Store; sts != nil {
				if sts.Kept {
					fmt.Fprintf(tw, "Store:\tkept (%s)\n", sts.Path)
				} else {
					fmt.Fprintf(tw, "Store:\tNOT KEPT: %s\n", sts.Error)
				}
				if sts.MovedAside != "" {
					fmt.Fprintf(tw, "  moved aside:\t%s (%s)\n", sts.MovedAside, sts.Error)
				}
				if sts.FailedWrites > 0 {
					fmt.Fprintf(tw, "  failed writes:\t%d events not kept (streamed live only)\n", sts.FailedWrites)
				}
			}
			// Releases left running that nothing declares, each with why it
			// was not pruned: with an empty or broken app set this is the only
			// place they show.
			if len(st.OrphanedReleases) > 0 {
				fmt.Fprintf(tw, "Orphaned:\t%d release(s) deployed that no application declares\n", len(st.OrphanedReleases))
				for _, r := range st.OrphanedReleases {
					where := r.Application
					if r.Swarm != "" {
						where += " on " + r.Swarm
					}
					fmt.Fprintf(tw, "  %s (%s):\t%s\n", r.Release, where, r.Reason)
				}
			}
			// Details is nil for a token that may not see the controller's inside
			// (the swarm node and the git counts are for admins).
			if d := st.Details; d != nil {
				fmt.Fprintf(tw, "Swarm:\tnode %s, engine %s\n", orDash(d.Swarm.NodeID), orDash(d.Swarm.EngineVersion))
				fmt.Fprintf(tw, "Git:\t%d ls-remote, %d fetches, %d exports\n", d.Git.ListRefs, d.Git.Fetches, d.Git.Exports)
				fmt.Fprintf(tw, "Workers:\t%d\n", d.Workers)
			}
			return tw.Flush()
		},
	}
	out.register(cmd)
	return cmd
}

// printReplication shows who leads a replicated controller, in which
// term, and each replica it knows with its role; nothing for a single
// controller.
func printReplication(w io.Writer, r *wire.Replication) {
	if r == nil {
		return
	}
	leader := "none (a take-over is under way)"
	if r.Leader != nil {
		leader = r.Leader.Name
	}
	fmt.Fprintf(w, "Leader:\t%s (term %d)\n", leader, r.Term)
	fmt.Fprintf(w, "Answered by:\t%s (%s)\n", r.Replica, r.Role)
	if r.Error != "" {
		fmt.Fprintf(w, "  lease error:\t%s\n", r.Error)
	}
	fmt.Fprintf(w, "Replicas:\t%d\n", len(r.Replicas))
	for _, p := range r.Replicas {
		fmt.Fprintf(w, "  %s:\t%s, version %s\n", p.Name, p.Role, orDash(p.Version))
	}
}

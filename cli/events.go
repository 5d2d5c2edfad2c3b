package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/skep-cd/skep/client"
	"github.com/skep-cd/skep/wire"
)

// newEventsCommand builds `skep events`. With --follow it blocks until the
// context is cancelled, reconnecting on its own (see client.Follow).
func newEventsCommand() *cobra.Command {
	var out output
	var q client.EventQuery
	var follow bool
	cmd := &cobra.Command{
		Use:   "events",
		Short: "List kept events, or follow them live (--follow)",
		Long: "events lists the newest kept events, oldest first. --follow streams new ones\n" +
			"as they happen (reconnecting and resuming where it stopped) until interrupted.\n" +
			"With -o json each followed event is printed as one line of its wire JSON.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := newClient(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if follow {
				// "" resumes from nothing: only events from now on are streamed, which
				// is what following means; the kept ones are what the listing is for.
				return apiFailure(c.Follow(cmd.Context(), q, "", func(e client.StreamEvent) error {
					return printStreamEvent(w, out, e)
				}))
			}
			// Not fetch: the query has repeated keys (--app a --app b), which
			// fetch's map of single values cannot carry.
			raw, err := c.Call(cmd.Context(), http.MethodGet, "/api/v1/events", q.Values(), nil)
			if err != nil {
				return apiFailure(err)
			}
			if out.raw() {
				return out.print(w, raw)
			}
			var list wire.EventList
			if err := json.Unmarshal(raw, &list); err != nil {
				return apiFailure(fmt.Errorf("decode events: %w", err))
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tAT\tAPPLICATION\tSWARM\tTYPE\tREVISION\tACTOR\tMESSAGE")
			for _, e := range list.Events {
				// Kept events carry a numeric id; streamed ones a string (see
				// printStreamEvent), hence the id as text.
				printEventRow(tw, fmt.Sprint(e.ID), e.Event)
			}
			return tw.Flush()
		},
	}
	out.register(cmd)
	cmd.Flags().StringSliceVar(&q.Applications, "app", nil, "only these applications (repeatable)")
	cmd.Flags().StringSliceVar(&q.Types, "type", nil, "only these event types (repeatable), e.g. sync-succeeded")
	// An array, not a slice: --swarm "" must stay one value, the local swarm.
	cmd.Flags().StringArrayVar(&q.Swarms, "swarm", nil, `only the events of these swarms (repeatable; "" is the local one)`)
	cmd.Flags().IntVar(&q.Limit, "limit", 0, "how many kept events to list (default 100)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "stream new events until interrupted")
	return cmd
}

// printEventRow prints one event as a table row.
func printEventRow(w io.Writer, id string, e wire.Event) {
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, e.At.Format(time.RFC3339), orDash(e.Application), orDash(e.Swarm), e.Type,
		short(e.Revision), orDash(e.Actor), orDash(oneLine(e.Message, 80)))
}

// printStreamEvent prints one followed event: its data line as JSON, or a
// table row for people.
// It flushes every event, since a follower watches them arrive; columns
// therefore align per row only.
func printStreamEvent(w io.Writer, out output, e client.StreamEvent) error {
	if out.raw() {
		// A stream of YAML documents needs a separator, or a reader would see
		// one document with repeated keys.
		if out == "yaml" {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		return out.print(w, e.Data)
	}
	var event wire.Event
	if err := json.Unmarshal(e.Data, &event); err != nil {
		return fmt.Errorf("decode event %s: %w", e.ID, err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	printEventRow(tw, e.ID, event)
	return tw.Flush()
}

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/skep-cd/skep/swarm"
	"github.com/skep-cd/skep/wire"
)

// probeTimeout bounds the first contact with each destination at start.
const probeTimeout = 15 * time.Second

// remotes builds a client for every destination of the destinations file
// and probes them all at once. A destination whose files are wrong, whose
// peer cannot be trusted (certificate, host key) or whose engine is not a
// swarm manager stops the start, naming it: those do not fix themselves. A
// destination that merely does not answer is logged and followed; its
// applications stay unknown until it does.
func (f *controllerFlags) remotes(ctx context.Context, logger *slog.Logger) ([]*swarm.Client, error) {
	if f.destinations == "" {
		return nil, nil
	}
	dests, err := swarm.LoadDestinations(f.destinations)
	if err != nil {
		return nil, err
	}
	clients, results, err := probeAll(ctx, dests)
	if err != nil {
		return nil, err
	}
	var fatal []error
	for i, r := range results {
		var nm *swarm.NotManagerError
		switch {
		case r.err == nil:
			logger.Info("swarm reached", "swarm", clients[i].Destination, "engine", r.id.EngineVersion, "api", r.id.APIVersion, "nodes", r.id.Nodes)
		case swarm.IsTrustError(r.err), errors.As(r.err, &nm):
			fatal = append(fatal, r.err)
		default:
			logger.Warn("swarm unreachable at start; its applications wait for it", "swarm", clients[i].Destination, "err", r.err)
		}
	}
	if len(fatal) > 0 {
		for _, c := range clients {
			_ = c.Close()
		}
		return nil, fmt.Errorf("destinations file %s: %w", f.destinations, errors.Join(fatal...))
	}
	return clients, nil
}

// probed is what probing one destination found.
type probed struct {
	id  swarm.Identity
	err error
}

// probeAll builds a client for every destination, in name order, and
// probes them concurrently, so one slow swarm costs one timeout in all. A
// client that cannot be built (its files are wrong) fails it all.
func probeAll(ctx context.Context, dests map[string]swarm.Destination) ([]*swarm.Client, []probed, error) {
	names := swarm.SortedNames(dests)
	clients := make([]*swarm.Client, 0, len(names))
	for _, name := range names {
		c, err := swarm.New(swarm.Options{Destination: dests[name]})
		if err != nil {
			for _, c := range clients {
				_ = c.Close()
			}
			return nil, nil, err
		}
		clients = append(clients, c)
	}
	results := make([]probed, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, probeTimeout)
			defer cancel()
			id, err := c.Probe(pctx)
			results[i] = probed{id: id, err: err}
		}()
	}
	wg.Wait()
	return clients, results, nil
}

// newSwarmCommand builds `skep swarm`: the destinations a controller
// deploys to.
func newSwarmCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "swarm",
		Short: "See the swarms a controller deploys to",
	}
	cmd.AddCommand(newSwarmListCommand(), newSwarmCheckCommand())
	return cmd
}

// newSwarmListCommand builds `skep swarm list`, read from the controller.
func newSwarmListCommand() *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the destinations: reachable, engine, nodes, applications",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list wire.SwarmList
			if printed, err := fetch(cmd, out, "/api/v1/swarms", nil, &list); printed || err != nil {
				return err
			}
			return printSwarms(cmd.OutOrStdout(), list.Swarms)
		},
	}
	out.register(cmd)
	return cmd
}

// printSwarms writes one row per destination.
func printSwarms(w io.Writer, swarms []wire.Swarm) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SWARM\tSTATE\tENGINE\tAPI\tNODES\tAPPS\tMESSAGE")
	for _, s := range swarms {
		state := "reachable"
		if !s.Reachable {
			state = "unreachable"
			if s.UnreachableSince != nil {
				state += " since " + s.UnreachableSince.Format(time.RFC3339)
			}
		}
		name := s.Name
		if name == "" {
			name = `"" (local)`
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", name, state, orDash(s.EngineVersion), orDash(s.APIVersion),
			orDash(countOrEmpty(s.Nodes)), s.Applications, s.Error)
	}
	return tw.Flush()
}

// countOrEmpty is n as text, "" for 0 (not known).
func countOrEmpty(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// newSwarmCheckCommand builds `skep swarm check FILE`: every destination of
// a destinations file probed from here, without a controller, so an
// operator sees a wrong certificate or host key before starting one.
func newSwarmCheckCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "check FILE",
		Short: "Check a destinations file: its files, and that each swarm answers as a manager",
		Long: "check reads a destinations file, checks the files it names (TLS material, ssh key and\n" +
			"known_hosts) and probes every destination's managers. It exits non-zero when any\n" +
			"destination fails, naming it.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return usageError("--output: want text or json, got %q", format)
			}
			dests, err := swarm.LoadDestinations(args[0])
			if err != nil {
				return err
			}
			clients, results, err := probeAll(cmd.Context(), dests)
			if err != nil {
				return err
			}
			defer func() {
				for _, c := range clients {
					_ = c.Close()
				}
			}()
			rows := make([]wire.Swarm, 0, len(clients))
			failed := 0
			for i, c := range clients {
				row := wire.Swarm{Name: c.Destination, Reachable: results[i].err == nil, EngineVersion: results[i].id.EngineVersion,
					APIVersion: results[i].id.APIVersion, Nodes: results[i].id.Nodes, Managers: results[i].id.Managers}
				if results[i].err != nil {
					row.Error = results[i].err.Error()
					failed++
				}
				rows = append(rows, row)
			}
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(wire.SwarmList{Swarms: rows}); err != nil {
					return err
				}
			} else if err := printSwarms(cmd.OutOrStdout(), rows); err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d destinations failed", failed, len(rows))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "text", "output format: text or json")
	return cmd
}

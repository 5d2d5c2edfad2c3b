package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/skep-cd/skep/demo"
	"github.com/skep-cd/skep/swarm"
)

func newDemoCommand() *cobra.Command {
	var opts demo.Options
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Show Skep deploying, syncing a commit and correcting drift on this machine's swarm",
		Long: "demo builds a demo image FROM scratch, serves an example app set from a local git\n" +
			"server, runs `skep controller` against the local swarm and walks through a commit\n" +
			"that is synced and an out-of-band change that is corrected. Ctrl-C (or the end of\n" +
			"the showcase with --exit-after-showcase) removes everything it created.\n" +
			"It needs a swarm manager (scripts/swarm-up) and git, and a static skep binary\n" +
			"(make build).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			eng, err := swarm.Connect(cmd.Context(), swarm.Options{})
			if err != nil {
				return err
			}
			defer eng.Close()
			opts.Out = cmd.OutOrStdout()
			return demo.Run(cmd.Context(), eng, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.ExitAfterShowcase, "exit-after-showcase", false, "clean up and exit once the showcase is done")
	cmd.Flags().StringVar(&opts.Listen, "listen", "127.0.0.1:8080", "address of the demo controller")
	cmd.Flags().IntVar(&opts.AppPort, "app-port", 18080, "host port the demo application is published on")
	return cmd
}

// newDemoAppCommand is the program inside the demo image.
func newDemoAppCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "demo-app [health]",
		Short:  "The demo application (runs inside the demo image)",
		Hidden: true,
		Args:   cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr := os.Getenv("DEMO_ADDR")
			if addr == "" {
				addr = ":8080"
			}
			if len(args) == 1 {
				if args[0] != "health" {
					return usageError("demo-app: unknown argument %q (want health)", args[0])
				}
				return demo.CheckApp(cmd.Context(), addr)
			}
			return demo.ServeApp(cmd.Context(), addr)
		},
	}
}

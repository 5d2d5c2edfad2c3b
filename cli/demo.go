package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/skep-cd/skep/demo"
	"github.com/skep-cd/skep/swarm"
)

// newDemoCommand builds `skep demo`. It blocks until the showcase ends
// (with --exit-after-showcase) or the context is cancelled, and leaves
// the swarm as it found it (see package demo).
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
			// Connected here, not in demo.Run, since only package swarm builds
			// Docker clients and demo takes the narrow engine it needs.
			eng, err := swarm.Connect(cmd.Context(), swarm.Options{})
			if err != nil {
				return err
			}
			// The client is closed after demo.Run cleaned up, which needs it.
			defer eng.Close()
			// The showcase narrates to the command's stdout, so tests can read it.
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
// It is hidden because only the image's entrypoint calls it: the same
// static binary serves as controller and demo app, so the image needs
// no other program.
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
			// The image's HEALTHCHECK runs `demo-app health`: FROM scratch has no
			// curl or wget to probe the app with.
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

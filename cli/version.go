package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/skep-cd/skep/version"
)

// newVersionCommand builds `skep version`, which needs neither a daemon nor
// a controller: it prints what was stamped into this binary at build time.
func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this skep binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			switch output {
			// "" is accepted beside "text" so the flag's zero value is the default;
			// `skep app` commands use "" for their table too.
			case "", "text":
				_, err := fmt.Fprintln(cmd.OutOrStdout(), info.String())
				return err
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			default:
				return usageError("--output: want text or json, got %q", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: text or json")
	return cmd
}

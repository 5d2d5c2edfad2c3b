// Package cli holds Skep's commands and their terminal output.
//
// It is the only place that turns arguments into actions and results into
// exit codes. Commands that talk to a running controller go through the
// client package; cli never reaches into the controller's internals, never
// reads secrets from flags and never calls os.Exit.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit codes shared by every command.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// ExitError carries the exit code a command wants, with the message already
// printed or empty.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// usageError marks an error in how the command was called (exit 2).
func usageError(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Main runs the skep command line with args (without the program name) and
// returns the process exit code. It blocks until the command ends or ctx is
// cancelled.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := NewRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var exit *ExitError
	if errors.As(err, &exit) {
		if exit.Err != nil {
			fmt.Fprintln(stderr, "skep:", exit.Err)
		}
		return exit.Code
	}
	fmt.Fprintln(stderr, "skep:", err)
	if isFlagError(err) {
		return ExitUsage
	}
	return ExitFailure
}

// NewRoot builds the whole command tree, writing to stdout and stderr.
func NewRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "skep",
		Short:         "GitOps continuous delivery for Docker Swarm",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: err}
	})
	root.AddCommand(newVersionCommand())
	root.AddCommand(newValidateCommand())
	root.AddCommand(newRenderCommand())
	root.AddCommand(newControllerCommand())
	root.AddCommand(newDeployCommand())
	root.AddCommand(newAppCommand())
	root.AddCommand(newStatusCommand())
	root.AddCommand(newEventsCommand())
	root.AddCommand(newDemoCommand(), newDemoAppCommand())
	return root
}

func isFlagError(err error) bool {
	// cobra reports unknown commands and argument-count errors as plain
	// errors; they are usage errors all the same.
	msg := err.Error()
	for _, prefix := range []string{"unknown command", "unknown flag", "accepts ", "requires at least", "requires at most"} {
		if len(msg) >= len(prefix) && msg[:len(prefix)] == prefix {
			return true
		}
	}
	return false
}

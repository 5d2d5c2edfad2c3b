// Package cli holds Skep's commands and their terminal output: it turns
// the arguments of the one skep binary into actions, and results and errors
// into text, JSON or YAML and an exit code (ExitOK, ExitFailure, ExitUsage).
//
// Commands fall in three groups. Offline commands (validate, render,
// version, and artifacts, which also asks git and a registry) read files and
// print; they need no daemon and no controller.
// Process commands (controller, deploy) wire the reconcile steps together
// here, so that main stays one call and tests build the same controller
// that main does; demo runs such a controller as a child process. API
// commands (app, status, events) talk to a running controller; login
// signs in at its OpenID provider and keeps the ID token for them.
//
// cli must never:
//   - reach a running controller except through package client;
//   - read a token or secret from a flag (they come from files or the
//     environment, so they stay out of shell histories and ps);
//   - call os.Exit or read os.Args (cmd/skep does, once);
//   - print an error and also return it: Main prints each error once.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit codes shared by every command; Main returns one of them. Scripts
// branch on them, so their meaning never changes.
const (
	// ExitOK means the command did what it was asked.
	ExitOK = 0
	// ExitFailure means bad input, an unreachable controller, or an operation that
	// failed (a failed deploy, an invalid app set).
	ExitFailure = 1
	// ExitUsage means the command was called wrongly (unknown flag, wrong argument
	// count, a flag value out of range).
	ExitUsage = 2
	// ExitChanges means `skep plan` found changes: the revision would change
	// the swarm.
	ExitChanges = 3
)

// ExitError is what a command returns to choose its exit code. Main prints
// Err, when set, and returns Code; any other error exits with ExitFailure
// (ExitUsage for cobra's argument errors).
type ExitError struct {
	// Code is the process exit code, one of the Exit constants.
	Code int
	// Err is printed by Main as "skep: <Err>"; nil when the command already
	// printed everything it had to say (as validate -o json does).
	Err error
}

// Error returns Err's message, or "exit N" when Err is nil.
func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

// Unwrap returns Err, so errors.Is and errors.As see the cause.
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
		Use:   "skep",
		Short: "GitOps continuous delivery for Docker Swarm",
		// Main prints each error once, and a usage text after a runtime failure
		// (an unreachable controller, say) would bury it: cobra must print
		// neither.
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// A flag that fails to parse is a usage error (exit 2), not a failure.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: err}
	})
	root.AddCommand(newVersionCommand())
	root.AddCommand(newValidateCommand())
	root.AddCommand(newArtifactsCommand())
	root.AddCommand(newRenderCommand())
	root.AddCommand(newControllerCommand())
	root.AddCommand(newDeployCommand())
	root.AddCommand(newAppCommand())
	root.AddCommand(newPlanCommand())
	root.AddCommand(newStatusCommand())
	root.AddCommand(newSwarmCommand())
	root.AddCommand(newEventsCommand())
	root.AddCommand(newLoginCommand(), newLogoutCommand())
	root.AddCommand(newDemoCommand(), newDemoAppCommand())
	return root
}

// isFlagError reports whether err is one of cobra's own argument errors,
// which SetFlagErrorFunc does not see.
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

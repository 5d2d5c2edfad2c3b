// Command skep is the Skep controller, CLI and web UI in one binary.
//
// main only does what a process must do once: build the root context from
// SIGINT and SIGTERM, hand the arguments to cli.Main, and exit with the
// code it returns. It must hold no other logic; everything else lives in
// importable packages, so tests run the same commands main does.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/skep-cd/skep/cli"
)

func main() {
	// SIGTERM is what `docker stop` and Swarm send a task: it must start
	// the same drain as Ctrl-C, by cancelling ctx.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	// Not deferred: os.Exit skips deferred calls.
	stop()
	os.Exit(code)
}

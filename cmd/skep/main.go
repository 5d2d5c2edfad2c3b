// Command skep is the Skep controller, CLI and web UI in one binary.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/skep-cd/skep/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

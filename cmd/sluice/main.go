// Command sluice is a durable, crash-safe pipeline engine for ingesting files and data.
// Run `sluice help` for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-project/sluice/internal/cli"
	"github.com/sluice-project/sluice/internal/gctune"
)

func main() {
	gctune.Apply()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

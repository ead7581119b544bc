// Command sluice is a durable, crash-safe pipeline engine for ingesting files and data.
// Run `sluice help` for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/sluice-project/sluice/internal/cli"
)

func main() {
	tuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// tuneGC makes the collector run a fifth as often as Go's default unless GOGC says otherwise,
// within a soft memory limit of 384 MiB unless GOMEMLIMIT sets one. Sluice's garbage is
// short-lived (rows scanned per task, a converter's buffers) and its live heap small: at Go's
// default the collector was most of what the engine added to the conversions of `sluice bench
// ingest` (33 % more CPU than the same conversions alone; 14 % at 400, peak RSS 183 -> 276 MB)
// and a quarter of the process's CPU in a Postgres burndown. Near the limit it collects harder.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(384 << 20)
	}
}

// Command sluice-bench measures Sluice end to end: the engine's throughput, latency and CPU per
// task, and ingestion against the same conversions without the engine, each printed as one JSON
// object. Run `sluice-bench help` for the measurements; docs/performance.md explains them.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-project/sluice/internal/bench"
	"github.com/sluice-project/sluice/internal/gctune"
)

func main() {
	gctune.Apply() // the engine measured as sluice runs it
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bench.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

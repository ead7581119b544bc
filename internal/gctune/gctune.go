// Package gctune sets the garbage collector's policy of the sluice processes: sluice itself and
// sluice-bench, which must measure the engine as sluice runs it.
package gctune

import (
	"os"
	"runtime/debug"
)

// Apply makes the collector run a fifth as often as Go's default unless GOGC says otherwise,
// within a soft memory limit of 96 MiB unless GOMEMLIMIT sets one. Call it first in main.
//
// Sluice's garbage is short-lived (rows scanned per task, a converter's buffers) and its live
// heap small (30–60 MB through an ingest of any size): at Go's default the collector was most of
// what the engine added to the conversions of `sluice-bench ingest` (33 % more CPU than the same
// conversions alone; 14 % at 400) and a quarter of the process's CPU in a Postgres burndown. The
// limit keeps the heap from growing to five times that: at 384 MiB an ingest peaked at 280–400 MB
// of RSS, at 128 MiB at 250 MB; at 96 MiB (with smaller SQLite caches) at 196–202 MB, the
// collector taking 5 % of the CPU instead of 4 (docs/performance.md). Near the limit it collects
// harder, and a larger live heap (a big conversion) simply goes past it.
func Apply() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(96 << 20)
	}
}

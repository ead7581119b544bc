// Package gctune sets the garbage collector's policy of the sluice processes: sluice itself and
// sluice-bench, which must measure the engine as sluice runs it.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// Apply makes the collector run a fifth as often as Go's default unless GOGC says otherwise,
// within a soft memory limit of at least 96 MiB and twice the live heap unless GOMEMLIMIT sets
// one. Call it first in main.
//
// Sluice's garbage is short-lived (rows scanned per task, a converter's buffers) and its live
// heap small (30–60 MB through an ingest of any size): at Go's default the collector was most of
// what the engine added to the conversions of `sluice-bench ingest` (33 % more CPU than the same
// conversions alone; 14 % at 400) and a quarter of the process's CPU in a Postgres burndown. The
// limit keeps the heap from growing to five times that: at 384 MiB an ingest peaked at 280–400 MB
// of RSS, at 128 MiB at 250 MB; at 96 MiB (with smaller SQLite caches) at 196–202 MB, the
// collector taking 5 % of the CPU instead of 4 (docs/performance.md).
//
// A fixed limit is a trap when the live heap comes near it (large files rendered at once: a few
// 4 MB text files hold 100 MB): each cycle frees little, so the collector runs back to back and
// the runtime hands pages back to the kernel only to fault them in again — 8 files of 4 MB took
// 6.7 s, 5.1 of it in the kernel, against 2.5 s with the limit at 256 MiB. So after every cycle
// the limit follows the live heap (see [limitFor]): small ingests keep 96 MiB, a large
// conversion gets room for its garbage.
func Apply() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(floor)
		follow()
	}
}

// floor is the least memory limit [Apply] sets.
const floor = 96 << 20

// limitFor returns the memory limit for a live heap of live bytes: twice the live heap, so that
// a cycle frees at least as much as survives it, and never below floor.
func limitFor(live uint64) int64 {
	return max(floor, 2*int64(live))
}

// follow sets the memory limit from the live heap after each garbage collection: a finalizer on an
// unreachable object runs once the cycle that found it ends, and arms the next.
func follow() {
	type sentinel struct{ _ [16]byte } // 16 bytes: the tiny allocator, whose objects may never be finalized, takes smaller ones
	s := &sentinel{}
	runtime.SetFinalizer(s, func(*sentinel) {
		debug.SetMemoryLimit(limitFor(liveHeap()))
		follow()
	})
}

// liveHeap returns the heap marked live by the last garbage collection.
func liveHeap() uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return sample[0].Value.Uint64()
}

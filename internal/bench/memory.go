package bench

import (
	"math"
	"runtime/metrics"
	"sync"
	"time"

	"modernc.org/libc"
)

// memoryPeaks samples, once a second until stopped, the two heaps an ingest's RSS is made of:
// Go's (the bytes of live and not yet swept objects, runtime/metrics) and SQLite's (the bytes
// the C allocator of the pure-Go SQLite holds from the system, over every connection of the
// process: page caches, statements, the search index's merges), and keeps each one's highest.
// The second is counted only in a build with the tag memory.counters (modernc.org/memory's);
// it is 0 otherwise.
type memoryPeaks struct {
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	goHeap  uint64
	sqlHeap int64
}

func startMemoryPeaks() *memoryPeaks {
	m := &memoryPeaks{stop: make(chan struct{}), done: make(chan struct{})}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(m.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			metrics.Read(sample)
			used := int64(libc.MemStat().Bytes)
			m.mu.Lock()
			m.goHeap = max(m.goHeap, sample[0].Value.Uint64())
			m.sqlHeap = max(m.sqlHeap, used)
			m.mu.Unlock()
			select {
			case <-t.C:
			case <-m.stop:
				return
			}
		}
	}()
	return m
}

// end stops the sampling and returns the peaks in MB.
func (m *memoryPeaks) end() (goHeapMB, sqliteHeapMB float64) {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return math.Round(float64(m.goHeap)/(1<<20)*10) / 10, math.Round(float64(m.sqlHeap)/(1<<20)*10) / 10
}

package blob

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// CopyOptions configures [Copy].
type CopyOptions struct {
	// Parallel is how many blobs are copied at once. Defaults to 4.
	Parallel int
	// Progress, when set, is called after each blob with the counts so far, from one goroutine
	// at a time.
	Progress func(CopyStats)
}

// CopyStats counts what [Copy] did.
type CopyStats struct {
	Copied       int   // blobs written to the destination
	Bytes        int64 // their bytes
	Skipped      int   // blobs the destination already had
	SkippedBytes int64
}

// Copy copies every blob of src that dst lacks to dst, listing src with Walk (as [GC] does),
// and returns what it did. A blob dst already has is skipped, after checking its size, so a
// Copy interrupted by a crash or an error is finished by running it again.
//
// Every copied blob is verified: dst.Put hashes the bytes it stores, and the hash must be the
// blob's name. When it is not, src is corrupt and Copy fails naming both hashes; the bytes stay
// in dst under their true name, unreferenced, for [GC] to remove. Copy stops at the first error
// and returns it with the counts so far.
func Copy(ctx context.Context, dst, src Store, opts CopyOptions) (CopyStats, error) {
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		stats    CopyStats
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	type job struct {
		key  string
		size int64
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range opts.Parallel {
		wg.Go(func() {
			for j := range jobs {
				copied, err := copyOne(ctx, dst, src, j.key, j.size)
				if err != nil {
					fail(err)
					continue // drain, so Walk never blocks on a send
				}
				mu.Lock()
				if copied {
					stats.Copied++
					stats.Bytes += j.size
				} else {
					stats.Skipped++
					stats.SkippedBytes += j.size
				}
				if opts.Progress != nil {
					opts.Progress(stats)
				}
				mu.Unlock()
			}
		})
	}
	walkErr := src.Walk(ctx, func(key string, size int64, _ time.Time) error {
		select {
		case jobs <- job{key, size}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(jobs)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return stats, fmt.Errorf("copy blobs: %w", firstErr)
	}
	if walkErr != nil {
		return stats, fmt.Errorf("copy blobs: list the source: %w", walkErr)
	}
	return stats, nil
}

// copyOne copies one blob unless dst has it, and reports whether it copied.
func copyOne(ctx context.Context, dst, src Store, key string, size int64) (bool, error) {
	have, err := dst.Stat(ctx, key)
	switch {
	case err == nil && have == size:
		return false, nil
	case err == nil:
		return false, fmt.Errorf("blob %s is %d bytes in the source but %d in the destination", key, size, have)
	case !errors.Is(err, ErrNotFound):
		return false, fmt.Errorf("stat blob %s in the destination: %w", key, err)
	}
	r, err := src.Open(ctx, key)
	if err != nil {
		return false, fmt.Errorf("open blob %s: %w", key, err)
	}
	defer r.Close()
	got, n, err := dst.Put(ctx, r)
	if err != nil {
		return false, fmt.Errorf("write blob %s: %w", key, err)
	}
	if got != key {
		return false, fmt.Errorf("blob %s in the source is corrupt: its %d bytes hash to %s", key, n, got)
	}
	return true, nil
}

package blob

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// GC deletes the blobs in s that referenced reports as unreferenced and whose
// modification time is more than grace before now, and returns how many it
// deleted and how many bytes that freed.
//
// The grace period protects blobs that were just Put but whose referencing
// row is not committed yet (DESIGN §4.7), so it must be longer than the
// longest time between a Put and the commit that follows it; an hour is a
// safe choice. Because Put refreshes the modification time of content that
// already exists, re-Putting an old blob protects it too ([S3] counts an
// object written within the last minute as fresh, so grace must exceed that). Just before
// deleting, GC re-reads the blob's modification time to catch such a Put that
// raced with it; a Put landing in the instant between that check and the
// delete is not caught, which is why grace must be generous.
//
// For the stores in this package GC also removes the leftovers of Puts
// interrupted by a crash (temporary files of [Dir], incomplete multipart
// uploads of [S3]) started before now-grace; the bytes of removed temporary
// files count in freed, not in deleted.
//
// GC stops at the first error from referenced, the store or ctx and returns it
// with the counts so far.
func GC(ctx context.Context, s Store, referenced func(sha256 string) (bool, error), grace time.Duration, now time.Time) (deleted int, freed int64, err error) {
	if grace < 0 {
		return 0, 0, fmt.Errorf("gc blobs: negative grace period %s", grace)
	}
	cutoff := now.Add(-grace)
	err = s.Walk(ctx, func(key string, size int64, modTime time.Time) error {
		if !modTime.Before(cutoff) {
			return nil
		}
		ref, err := referenced(key)
		if err != nil {
			return fmt.Errorf("check references to blob %s: %w", key, err)
		}
		if ref {
			return nil
		}
		if mt, ok := s.(modTimer); ok {
			t, err := mt.blobModTime(ctx, key)
			if errors.Is(err, ErrNotFound) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("recheck blob %s: %w", key, err)
			}
			if !t.Before(cutoff) {
				return nil
			}
		}
		if err := s.Delete(ctx, key); err != nil {
			return err
		}
		deleted++
		freed += size
		return nil
	})
	if err != nil {
		return deleted, freed, fmt.Errorf("gc blobs: %w", err)
	}
	if c, ok := s.(staleCleaner); ok {
		n, err := c.cleanStale(ctx, cutoff)
		freed += n
		if err != nil {
			return deleted, freed, fmt.Errorf("gc blobs: %w", err)
		}
	}
	return deleted, freed, nil
}

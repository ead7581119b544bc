package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
)

func runGC(ctx context.Context, e *env, args []string) error {
	fs, c := newFlags(e, "gc", "gc [--grace DURATION] [--data DIR]")
	grace := fs.Duration("grace", time.Hour, "keep unreferenced blobs younger than this (a blob is written before the row that references it)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	n, err := c.open(ctx, e, true) // the lock: no engine writes blobs meanwhile
	if err != nil {
		return err
	}
	defer n.Close()
	deleted, freed, err := blob.GC(ctx, n.Blobs, func(sha string) (bool, error) { return n.Engine.BlobReferenced(ctx, sha) }, *grace, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "deleted %d unreferenced blobs, freed %d bytes\n", deleted, freed)
	return nil
}

package cli

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/watch"
)

// runWatch watches a folder or an S3 prefix and makes a job of each file that settles there,
// until interrupted. It runs no workflow itself: `sluice serve`, `sluice resume` or `sluice
// worker --database` do.
func runWatch(ctx context.Context, e *env, args []string) error {
	fs, c := newFlags(e, "watch", "watch DIR|s3://bucket/prefix --workflow W [--settle 2s] [--done-dir DIR | --move-done] [--tag-done]")
	workflow := fs.String("workflow", "", "the workflow of the jobs: a stored workflow, a built-in one, or a workflow file (required)")
	settle := fs.Duration("settle", 2*time.Second, "how long a file's size and modification time (an object's ETag) must stay the same before it becomes a job; 0 takes it at once")
	pollEvery := fs.Duration("poll", time.Second, "how often the location is listed")
	doneDir := fs.String("done-dir", "", "move each file whose job is recorded to this folder, under its path in the watched one")
	moveDone := fs.Bool("move-done", false, "move each file whose job is recorded to done/ in the watched folder (in S3: under done/ in the prefix, a copy and a delete)")
	tagDone := fs.Bool("tag-done", false, "S3: tag each object whose job is recorded sluice-job=ID")
	rescan := fs.Duration("rescan", 10*time.Minute, "S3: how often the whole prefix is listed, not only the keys after the stored cursor")
	once := fs.Bool("once", false, "look once, take what has settled, and exit (with --settle 0: everything there)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one folder or s3://bucket/prefix to watch")
	}
	if *workflow == "" {
		return usagef("missing --workflow (the workflow of the jobs)")
	}
	if *doneDir != "" && *moveDone {
		return usagef("--done-dir and --move-done are two places to move files to: choose one")
	}
	if *settle < 0 || *pollEvery <= 0 || *rescan <= 0 {
		return usagef("--settle must not be negative, --poll and --rescan must be positive")
	}
	n, err := c.open(ctx, e, false)
	if err != nil {
		return err
	}
	defer n.Close()
	name, err := resolveWorkflow(ctx, e, n, *workflow)
	if err != nil {
		return err
	}
	cfg := watch.Config{Location: pos[0], Workflow: name, Settle: *settle, Poll: *pollEvery, DoneDir: *doneDir, MoveDone: *moveDone,
		TagDone: *tagDone, Rescan: *rescan, Engine: n.Engine, Blobs: n.Blobs, Records: n.Store, DB: n.Store, Logger: c.logger(e)}
	if !c.verbose && c.logFormat == "" {
		// A file that cannot be read, or a listing that fails, is news even without -v.
		cfg.Logger = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if *settle == 0 {
		cfg.Settle = -1
	}
	if watch.IsS3(pos[0]) {
		var b *blob.S3
		if b, err = openS3(ctx, "watch", pos[0]); err != nil {
			return err
		}
		cfg.Bucket = b
	}
	w, err := watch.New(cfg)
	if err != nil {
		return err
	}
	if *once {
		res, err := w.Scan(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "%s: %s taken, %s waiting\n", w.Location(), plural(res.Taken, "file"), plural(res.Waiting, "file"))
		return nil
	}
	fmt.Fprintf(e.stderr, "watching %s for workflow %s (settle %s); stop with Ctrl-C\n", w.Location(), name, *settle)
	w.Run(ctx)
	return nil
}

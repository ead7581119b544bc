// Package watch turns the files dropped into a folder, or the objects put under an S3 prefix,
// into jobs of a chosen workflow: Paperless-ngx's consume folder, Banzai's drop buckets. A
// [Watcher] polls its location; a file whose size and modification time (an object's ETag) have
// not changed for the settle time becomes one job with the file as its one root, and may then be
// moved to a done folder (or, in S3, tagged, or moved under done/ by a copy and a delete).
//
// Exactly once, across restarts and processes: a file's job is keyed by what identifies the
// file — its path, size and modification time, or its key and ETag — and job keys are unique in
// the database. A watcher killed anywhere, or two watchers of one folder at once, find the job
// by its key instead of making a second one: the root is keyed by its ordinal and sealing is
// idempotent, so whoever comes next finishes what was left. The same file dropped again (same
// name, size and time) is the same file; touched or rewritten, it is a new one.
//
// An S3 prefix is listed with ListObjectsV2 after a cursor stored in the database (StartAfter):
// the greatest key up to which every object became a job. Keys that sort before the cursor and
// arrive later are found by a full listing every [Config.Rescan].
package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Config configures a [Watcher].
type Config struct {
	// Name names the watcher in its jobs' metadata (source). Defaults to Location.
	Name string
	// Location is the watched directory, or s3://bucket/prefix. Required.
	Location string
	// Workflow is the workflow of the jobs. Required.
	Workflow string
	// Settle is how long a file's size and modification time (an object's ETag) must stay the
	// same before it becomes a job, so that a file still being written is left alone. Zero
	// takes a file the first time it is seen. Defaults to 2s; a negative value means zero.
	Settle time.Duration
	// Poll is how often [Watcher.Run] looks. Defaults to 1s.
	Poll time.Duration
	// DoneDir, for a folder, is where each file is moved once its job is recorded, under its
	// path relative to the folder. Defaults to none: files stay.
	DoneDir string
	// MoveDone moves each file once its job is recorded: a folder's to DoneDir, or to done/ in
	// the folder when DoneDir is empty; an object to done/ under the prefix (a copy, then a
	// delete). Files under done/ are never taken.
	MoveDone bool
	// TagDone, for S3, tags each object sluice-job=ID once its job is recorded.
	TagDone bool
	// Rescan, for S3, is how often a poll lists the whole prefix rather than the keys after the
	// cursor. Defaults to 10m.
	Rescan time.Duration
	// Engine makes the jobs; Blobs stores the files; Records finds a file's job by its key; DB
	// keeps an S3 prefix's cursor (register the table with [Register] first). A [store.Store]
	// is both Records and DB. All required.
	Engine  *engine.Engine
	Blobs   blob.Store
	Records Records
	DB      DomainDB
	// Bucket is the S3 store of an s3:// Location, opened on its bucket and prefix. Required
	// for S3, unused for a folder.
	Bucket *blob.S3
	Logger *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Records is what a [Watcher] reads: a [store.Store] satisfies it.
type Records interface {
	JobGetByKey(ctx context.Context, key string) (*record.Job, error)
}

// file is one file or object a listing found.
type file struct {
	// path is relative to the folder or the prefix, with forward slashes.
	path string
	size int64
	// version changes when the file does: a folder's file's modification time (Unix
	// nanoseconds), an object's ETag.
	version string
}

// lister is a watched location: a folder or an S3 prefix.
type lister interface {
	// list returns the candidate files in path order; full asks an S3 prefix for every key,
	// not only those after its cursor.
	list(ctx context.Context, full bool) ([]file, error)
	open(ctx context.Context, f file) (io.ReadCloser, error)
	// finish moves or tags a file whose job was recorded.
	finish(ctx context.Context, f file, jobID int64) error
	// passed records that every file up to path became a job (an S3 prefix's cursor).
	passed(ctx context.Context, path string) error
	// metadata names the file's identity in its job's metadata.
	metadata(f file) map[string]any
}

// Watcher turns new files of one location into jobs. Create it with [New]; drive it with
// [Watcher.Scan], [Watcher.Run], or [Watcher.Start] and [Watcher.Stop]. Scan and Run must not
// run concurrently with each other.
type Watcher struct {
	cfg Config
	src lister
	log *slog.Logger

	// pending holds the files seen and not yet taken, by path: what they were and since when.
	pending map[string]sighting
	// taken holds the job key of each file this watcher saw through, by path.
	taken    map[string]string
	lastFull time.Time
	// again makes the next scan a full listing: the last full one left files waiting, which
	// may sort before the cursor.
	again bool

	startOnce, stopOnce sync.Once
	cancel              context.CancelFunc
	done                chan struct{}
}

type sighting struct {
	size    int64
	version string
	since   time.Time
}

// New returns a watcher of cfg.Location. A folder must exist; the errors name the location and
// the setting at fault.
func New(cfg Config) (*Watcher, error) {
	if cfg.Location == "" || cfg.Workflow == "" {
		return nil, errors.New("watch: a location and a workflow are required")
	}
	if cfg.Engine == nil || cfg.Blobs == nil || cfg.Records == nil || cfg.DB == nil {
		panic("watch: Config needs Engine, Blobs, Records and DB")
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Location
	}
	switch {
	case cfg.Settle == 0:
		cfg.Settle = 2 * time.Second
	case cfg.Settle < 0:
		cfg.Settle = 0
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Rescan <= 0 {
		cfg.Rescan = 10 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{cfg: cfg, log: cfg.Logger, pending: map[string]sighting{}, taken: map[string]string{}}
	var err error
	if IsS3(cfg.Location) {
		if cfg.DoneDir != "" {
			return nil, fmt.Errorf("watch %s: a done folder is for a watched folder; for S3 use move-done (done/ under the prefix) or tag-done", cfg.Location)
		}
		if cfg.Bucket == nil {
			panic("watch: Config needs Bucket for an s3:// location")
		}
		w.src = &bucket{s3: cfg.Bucket, location: cfg.Location, db: cfg.DB, moveDone: cfg.MoveDone, tagDone: cfg.TagDone, now: cfg.Now}
	} else {
		if cfg.TagDone {
			return nil, fmt.Errorf("watch %s: tag-done is for S3; for a folder use a done folder or move-done", cfg.Location)
		}
		w.src, err = newFolder(cfg.Location, cfg.DoneDir, cfg.MoveDone)
	}
	return w, err
}

// IsS3 reports whether a location is an s3:// URL rather than a folder.
func IsS3(location string) bool { return len(location) > 5 && location[:5] == "s3://" }

// Location returns the watched location (a folder as an absolute path).
func (w *Watcher) Location() string {
	if f, ok := w.src.(*folder); ok {
		return f.dir
	}
	return w.cfg.Location
}

// JobKey returns the key of the job of the file at path (relative to the location) of the
// given size and version (a modification time in Unix nanoseconds, or an ETag).
func JobKey(location, path string, size int64, version string) string {
	return "watch:" + location + "/" + path + "@" + strconv.FormatInt(size, 10) + ":" + version
}

// Result is what one [Watcher.Scan] did.
type Result struct {
	// Taken counts the files that became jobs in this scan (or whose job another watcher made).
	Taken int
	// Waiting counts the files seen but not yet settled, or whose ingest failed.
	Waiting int
}

// Scan looks at the location once and turns every file that has settled into its job. A file
// that cannot be read or recorded is logged and tried again by the next scan; Scan's error is a
// location that cannot be listed.
func (w *Watcher) Scan(ctx context.Context) (Result, error) {
	now := w.cfg.Now()
	full := w.again || now.Sub(w.lastFull) >= w.cfg.Rescan
	files, err := w.src.list(ctx, full)
	if err != nil {
		return Result{}, err
	}
	if full {
		w.lastFull = now
	}
	var res Result
	present := make(map[string]bool, len(files))
	// cursor is the last path up to which every listed file is taken.
	cursor, unbroken := "", true
	for _, f := range files {
		present[f.path] = true
		key := JobKey(w.Location(), f.path, f.size, f.version)
		if w.taken[f.path] == key {
			if unbroken {
				cursor = f.path
			}
			continue
		}
		s, ok := w.pending[f.path]
		if !ok || s.size != f.size || s.version != f.version {
			s = sighting{size: f.size, version: f.version, since: now}
			w.pending[f.path] = s
		}
		if now.Sub(s.since) < w.cfg.Settle {
			res.Waiting++
			unbroken = false
			continue
		}
		if err := w.take(ctx, f, key); err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			if errors.Is(err, errChanged) {
				delete(w.pending, f.path) // settle again
			} else {
				w.log.Warn("watch: take a file", "location", w.cfg.Location, "path", f.path, "error", err)
			}
			res.Waiting++
			unbroken = false
			continue
		}
		delete(w.pending, f.path)
		w.taken[f.path] = key
		res.Taken++
		if unbroken {
			cursor = f.path
		}
	}
	for p := range w.pending {
		if !present[p] {
			delete(w.pending, p)
		}
	}
	// A listing after the cursor leaves the keys before it out: they are still there.
	if _, partial := w.src.(*bucket); full || !partial {
		for p := range w.taken {
			if !present[p] {
				delete(w.taken, p)
			}
		}
	}
	w.again = full && res.Waiting > 0
	if cursor != "" {
		if err := w.src.passed(ctx, cursor); err != nil {
			w.log.Warn("watch: store the cursor", "location", w.cfg.Location, "error", err)
		}
	}
	return res, nil
}

// errChanged is a file whose size changed between its listing and its read: it is still being
// written, and settles again.
var errChanged = errors.New("the file changed while it was read")

// take makes the job of f (or finds it), adds f as its root unless recorded, seals it, and
// then moves or tags f as asked. Each step is idempotent, so a take cut short anywhere is
// finished by the next one, in this process or another.
func (w *Watcher) take(ctx context.Context, f file, key string) error {
	job, err := w.cfg.Records.JobGetByKey(ctx, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	var sub *engine.Submission
	if job != nil {
		sub = w.cfg.Engine.SubmissionOf(job)
	}
	if sub == nil || sub.Open() {
		has := false
		if sub != nil {
			if has, err = sub.Has(ctx, 0); err != nil {
				return err
			}
		}
		if !has {
			// The file is stored before its job exists: a file that vanished or changed in
			// between makes no job, only a blob the collector deletes.
			root, err := w.read(ctx, f)
			if err != nil {
				return err
			}
			if sub == nil {
				sub, err = w.cfg.Engine.Submit(ctx, engine.SubmitParams{Workflow: w.cfg.Workflow, Key: key, Metadata: w.metadata(f)})
				if err != nil {
					return err
				}
			}
			if err := sub.Add(ctx, root); err != nil {
				return err
			}
		}
		if err := sub.Seal(ctx); err != nil {
			return err
		}
		if sub.Created() {
			w.log.Info("watch: file taken", "location", w.cfg.Location, "path", f.path, "job_id", sub.Job().ID)
		}
	}
	return w.src.finish(ctx, f, sub.Job().ID)
}

// read stores f's content and returns its root.
func (w *Watcher) read(ctx context.Context, f file) (engine.Root, error) {
	rc, err := w.src.open(ctx, f)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, blob.ErrNotFound) {
		return engine.Root{}, errChanged
	}
	if err != nil {
		return engine.Root{}, err
	}
	defer rc.Close()
	sha, size, err := w.cfg.Blobs.Put(ctx, rc)
	if err != nil {
		return engine.Root{}, fmt.Errorf("store %s: %w", f.path, err)
	}
	if size != f.size {
		return engine.Root{}, errChanged
	}
	return engine.Root{Ordinal: 0, Name: f.path, BlobSHA256: sha, Size: size}, nil
}

func (w *Watcher) metadata(f file) map[string]any {
	md := w.src.metadata(f)
	md["source"] = w.cfg.Name
	md["source_location"] = w.Location()
	md["source_path"] = f.path
	md["source_size"] = f.size
	return md
}

// Run scans every Poll until ctx ends. A scan that fails (the location cannot be listed) is
// logged and tried again at the next poll.
func (w *Watcher) Run(ctx context.Context) {
	t := time.NewTicker(w.cfg.Poll)
	defer t.Stop()
	for {
		if _, err := w.Scan(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("watch: list", "location", w.cfg.Location, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Start runs [Watcher.Run] in a goroutine until Stop. Calling it again does nothing.
func (w *Watcher) Start(ctx context.Context) {
	w.startOnce.Do(func() {
		ctx, w.cancel = context.WithCancel(ctx)
		w.done = make(chan struct{})
		go func() {
			defer close(w.done)
			w.Run(ctx)
		}()
	})
}

// Stop stops the watcher and waits for its scan to end. It is idempotent.
func (w *Watcher) Stop() {
	w.stopOnce.Do(func() {
		if w.cancel == nil {
			return
		}
		w.cancel()
		<-w.done
	})
}

package blob

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Layout of a Dir below its root.
const (
	dirBlobs  = "sha256" // blobs: sha256/ab/cd/<hex>
	dirTmp    = "tmp"    // Puts in progress: tmp/put-<random>
	tmpPrefix = "put-"

	// Blob files are read-only: their name is their content, and a tool that
	// opened one for writing through LocalPath would silently corrupt it.
	// Documents are private, so nothing is readable by other users.
	blobPerm = 0o400
	dirPerm  = 0o700
)

// Dir is a [Store] that keeps blobs as files in a local directory, laid out
// as root/sha256/ab/cd/<hex>, with Puts in progress in root/tmp. It is safe for
// concurrent use, including by several processes sharing the directory.
//
// Every file access goes through an [os.Root], so no key and no symbolic link
// planted in the directory can reach a file outside it.
//
// Put writes a temporary file in root/tmp, fsyncs it, renames it into place
// and fsyncs the directory, so a blob is either absent or complete even if the
// process is killed. Temporary files left by a crash are ignored by Walk and
// removed by [GC].
//
// With [DirOptions.SmallMax] set, blobs of at most that many bytes are rows of root/small.db
// instead of files (see smallDB): concurrent Puts of small blobs share one fsync.
type Dir struct {
	root  *os.Root
	path  string   // absolute path of root, for LocalPath
	small *smallDB // nil: every blob is a file
}

// DirOptions configures [OpenDir].
type DirOptions struct {
	// SmallMax is the size up to which blobs are kept in root/small.db; 0 keeps every blob as a
	// file.
	SmallMax int
}

// DefaultSmallMax is the small-blob limit the engine uses: a few kilobytes of text, a page's PDF,
// a thumbnail.
const DefaultSmallMax = 64 << 10

var (
	_ Store       = (*Dir)(nil)
	_ LocalPather = (*Dir)(nil)
)

// NewDir returns a Dir rooted at root, creating the directory and its layout
// if needed. The caller should Close it when done.
func NewDir(root string) (*Dir, error) { return OpenDir(root, DirOptions{}) }

// OpenDir is [NewDir] with options.
func OpenDir(root string, opts DirOptions) (*Dir, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open blob dir %q: %w", root, err)
	}
	if err := os.MkdirAll(abs, dirPerm); err != nil {
		return nil, fmt.Errorf("open blob dir: %w", err)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("open blob dir: %w", err)
	}
	for _, sub := range []string{dirBlobs, dirTmp} {
		if err := r.MkdirAll(sub, dirPerm); err != nil {
			r.Close()
			return nil, fmt.Errorf("open blob dir %q: create %s: %w", abs, sub, err)
		}
	}
	d := &Dir{root: r, path: abs}
	if opts.SmallMax > 0 {
		if d.small, err = openSmall(filepath.Join(abs, "small.db"), opts.SmallMax); err != nil {
			r.Close()
			return nil, fmt.Errorf("open blob dir %q: %w", abs, err)
		}
	}
	return d, nil
}

// Close releases the directory handle. Using d after Close returns errors.
func (d *Dir) Close() error {
	var err error
	if d.small != nil {
		err = d.small.close()
	}
	return errors.Join(err, d.root.Close())
}

// Path returns the absolute path of the directory d was opened on.
func (d *Dir) Path() string { return d.path }

// Put implements [Store.Put].
func (d *Dir) Put(ctx context.Context, r io.Reader) (string, int64, error) {
	if d.small != nil {
		head, small, err := readSmall(ctx, r, d.small.max)
		if err != nil {
			return "", 0, fmt.Errorf("put blob: read: %w", err)
		}
		if small {
			sum := sumHex(head)
			if err := d.small.put(ctx, sum, head); err != nil {
				return "", 0, fmt.Errorf("put blob %s: %w", sum, err)
			}
			return sum, int64(len(head)), nil
		}
		r = io.MultiReader(bytes.NewReader(head), r)
	}
	return d.putFile(ctx, r)
}

// Stage implements [Stager]: a small blob is queued for the next group commit of small.db.
func (d *Dir) Stage(ctx context.Context, r io.Reader, soon bool) (string, int64, func() error, error) {
	if d.small == nil {
		sum, n, err := d.putFile(ctx, r)
		return sum, n, durable, err
	}
	head, small, err := readSmall(ctx, r, d.small.max)
	if err != nil {
		return "", 0, nil, fmt.Errorf("put blob: read: %w", err)
	}
	if !small {
		sum, n, err := d.putFile(ctx, io.MultiReader(bytes.NewReader(head), r))
		return sum, n, durable, err
	}
	sum := sumHex(head)
	wait, err := d.small.stage(ctx, sum, head, soon)
	if err != nil {
		return "", 0, nil, fmt.Errorf("put blob %s: %w", sum, err)
	}
	return sum, int64(len(head)), func() error {
		if err := wait(); err != nil {
			return fmt.Errorf("put blob %s: %w", sum, err)
		}
		return nil
	}, nil
}

func durable() error { return nil }

// putFile writes r as a file blob.
func (d *Dir) putFile(ctx context.Context, r io.Reader) (string, int64, error) {
	tmp, f, err := d.createTemp()
	if err != nil {
		return "", 0, fmt.Errorf("put blob: %w", err)
	}
	renamed := false
	defer func() {
		if f != nil {
			f.Close()
		}
		if !renamed {
			d.root.Remove(tmp)
		}
	}()

	sum, n, err := hashCopy(ctx, f, r)
	if err != nil {
		return "", 0, fmt.Errorf("put blob: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return "", 0, fmt.Errorf("put blob %s: sync %s: %w", sum, tmp, err)
	}
	err = f.Close()
	f = nil
	if err != nil {
		return "", 0, fmt.Errorf("put blob %s: close %s: %w", sum, tmp, err)
	}
	// A blob that becomes visible is complete, but do not publish one the
	// caller has already given up on.
	if err := ctx.Err(); err != nil {
		return "", 0, fmt.Errorf("put blob %s: %w", sum, err)
	}

	final := blobPath(sum)
	leaf := path.Dir(final)
	now := time.Now()
	// Existing content: refresh its mtime so GC's grace period covers this Put.
	switch err := d.root.Chtimes(final, now, now); {
	case err == nil:
		// Another Put may have renamed it but not yet synced the directory.
		if err := d.syncDir(leaf); err != nil {
			return "", 0, fmt.Errorf("put blob %s: %w", sum, err)
		}
		return sum, n, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", 0, fmt.Errorf("put blob %s: touch existing: %w", sum, err)
	}

	_, err = d.root.Stat(leaf)
	created := errors.Is(err, fs.ErrNotExist)
	if err := d.root.MkdirAll(leaf, dirPerm); err != nil {
		return "", 0, fmt.Errorf("put blob %s: %w", sum, err)
	}
	// rename(2) atomically replaces a file a concurrent Put of the same content
	// may have put there first; both have the same bytes.
	if err := d.root.Rename(tmp, final); err != nil {
		return "", 0, fmt.Errorf("put blob %s: rename into place: %w", sum, err)
	}
	renamed = true
	syncs := []string{leaf}
	if created { // the new directory entries must be durable too
		syncs = append(syncs, path.Dir(leaf), dirBlobs)
	}
	for _, dir := range syncs {
		if err := d.syncDir(dir); err != nil {
			return "", 0, fmt.Errorf("put blob %s: %w", sum, err)
		}
	}
	return sum, n, nil
}

// createTemp creates a new, empty temporary file in root/tmp.
func (d *Dir) createTemp() (string, *os.File, error) {
	for range 10 {
		var b [12]byte
		rand.Read(b[:])
		name := dirTmp + "/" + tmpPrefix + hex.EncodeToString(b[:])
		f, err := d.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, blobPerm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("create temp file: %w", err)
		}
		return name, f, nil
	}
	return "", nil, errors.New("create temp file: too many name collisions")
}

func (d *Dir) syncDir(name string) error {
	f, err := d.root.Open(name)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", name, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", name, err)
	}
	return nil
}

// Open implements [Store.Open]. The returned reader is an [*os.File].
func (d *Dir) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, fmt.Errorf("open blob: %w", err)
	}
	if d.small != nil {
		data, err := d.small.get(ctx, key)
		if err == nil {
			return io.NopCloser(bytes.NewReader(data)), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open blob %s: %w", key, err)
		}
	}
	f, err := d.root.Open(blobPath(key))
	if err != nil {
		return nil, fmt.Errorf("open blob %s: %w", key, notFound(err))
	}
	return f, nil
}

// Stat implements [Store.Stat].
func (d *Dir) Stat(ctx context.Context, key string) (int64, error) {
	if d.small != nil && checkKey(key) == nil {
		size, _, err := d.small.stat(ctx, key)
		if err == nil {
			return size, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("stat blob %s: %w", key, err)
		}
	}
	fi, err := d.stat(key)
	if err != nil {
		return 0, fmt.Errorf("stat blob: %w", err)
	}
	return fi.Size(), nil
}

func (d *Dir) stat(key string) (fs.FileInfo, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	fi, err := d.root.Stat(blobPath(key))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, notFound(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", key, fi.Mode().Type())
	}
	return fi, nil
}

// Delete implements [Store.Delete]. It leaves the emptied sha256/ab/cd
// directories in place; there are at most 65,536 of them.
func (d *Dir) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("delete blob: %w", err)
	}
	if d.small != nil {
		if err := d.small.delete(ctx, key); err != nil {
			return fmt.Errorf("delete blob %s: %w", key, err)
		}
	}
	if err := d.root.Remove(blobPath(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete blob %s: %w", key, err)
	}
	return nil
}

// Walk implements [Store.Walk]. Only regular files whose path matches the
// layout for their name are reported.
func (d *Dir) Walk(ctx context.Context, fn func(key string, size int64, modTime time.Time) error) error {
	err := fs.WalkDir(d.root.FS(), dirBlobs, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // removed while walking
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.IsDir() {
			if strings.Count(p, "/") >= 3 { // deeper than sha256/ab/cd
				return fs.SkipDir
			}
			return nil
		}
		key := path.Base(p)
		if !e.Type().IsRegular() || checkKey(key) != nil || blobPath(key) != p {
			return nil
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return fn(key, fi.Size(), fi.ModTime())
	})
	if err == nil && d.small != nil {
		err = d.small.walk(ctx, func(key string, size int64, modTime time.Time) error {
			if _, err := d.stat(key); err == nil {
				return nil // also a file (promoted by LocalPath): listed above
			}
			return fn(key, size, modTime)
		})
	}
	if err != nil {
		return fmt.Errorf("walk blobs in %s: %w", d.path, err)
	}
	return nil
}

// LocalPath implements [LocalPather]. A small blob is written out as a file first (once: the
// file then serves every later call), for the tools that need a path.
func (d *Dir) LocalPath(key string) (string, error) {
	_, err := d.stat(key)
	if err != nil && d.small != nil && errors.Is(err, ErrNotFound) {
		ctx := context.Background()
		data, gerr := d.small.get(ctx, key)
		if gerr == nil {
			_, _, err = d.putFile(ctx, bytes.NewReader(data))
		} else if !errors.Is(gerr, fs.ErrNotExist) {
			err = gerr
		}
	}
	if err != nil {
		return "", fmt.Errorf("local path of blob: %w", err)
	}
	return filepath.Join(d.path, filepath.FromSlash(blobPath(key))), nil
}

// blobModTime is the latest modification time of the blob's row and file.
func (d *Dir) blobModTime(ctx context.Context, key string) (time.Time, error) {
	var latest time.Time
	found := false
	if d.small != nil {
		_, mt, err := d.small.stat(ctx, key)
		if err == nil {
			latest, found = mt, true
		} else if !errors.Is(err, fs.ErrNotExist) {
			return time.Time{}, err
		}
	}
	fi, err := d.stat(key)
	if err == nil {
		found = true
		if fi.ModTime().After(latest) {
			latest = fi.ModTime()
		}
	} else if !errors.Is(err, ErrNotFound) || !found {
		return time.Time{}, err
	}
	return latest, nil
}

// cleanStale removes temporary files of Puts started before before; younger
// ones may belong to a Put still running, possibly in another process.
func (d *Dir) cleanStale(ctx context.Context, before time.Time) (int64, error) {
	entries, err := fs.ReadDir(d.root.FS(), dirTmp)
	if err != nil {
		return 0, fmt.Errorf("clean temp files: %w", err)
	}
	var freed int64
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return freed, fmt.Errorf("clean temp files: %w", err)
		}
		if !strings.HasPrefix(e.Name(), tmpPrefix) || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(before) {
			continue
		}
		name := dirTmp + "/" + e.Name()
		if err := d.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return freed, fmt.Errorf("clean temp files: %w", err)
		}
		freed += fi.Size()
	}
	return freed, nil
}

// notFound adds ErrNotFound to err's chain when err means the file is absent.
func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

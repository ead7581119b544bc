package objects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/pathroot"
)

// S3Opener opens an s3://bucket/prefix location — a sheet's files — as an S3 store whose
// objects it reads ([blob.S3.ListObjects], [blob.S3.OpenObject]). Sluice's CLI opens it as it
// opens --blobs s3://…: endpoint, region and keys from the AWS_* variables.
type S3Opener func(ctx context.Context, url string) (*blob.S3, error)

// IsS3 reports whether a files location is an s3:// URL rather than a directory.
func IsS3(location string) bool { return strings.HasPrefix(location, "s3://") }

// ErrNoS3 is the error of an s3:// files location where nothing can open one.
var ErrNoS3 = errors.New("s3:// files locations are not configured here")

// fileIndex is where a sheet's file names point, as validation sees it: a local directory, or
// an S3 location listed once.
type fileIndex interface {
	// mime returns the MIME type of the file at the clean relative name, "" when it does not exist.
	mime(ctx context.Context, name string) string
	// exists reports whether the file exists.
	exists(ctx context.Context, name string) bool
	// webVTT reports whether the file is a WebVTT file; an error when it cannot be read.
	webVTT(ctx context.Context, name string) (bool, error)
	// where names the file in a "File not Found" message.
	where(name, asGiven string) string
	// kind names the location in a message: "the ingest bucket" (Meadow's words), "the files directory".
	kind() string
	// close releases what the index holds open.
	close()
}

// openIndex returns the index of a validation's files location; the caller closes it. A local
// directory is opened through env.Roots ([pathroot.Roots.OpenDir]): one refused is a
// [*pathroot.Error].
func openIndex(ctx context.Context, env Env) (fileIndex, error) {
	if !IsS3(env.FilesDir) {
		dir, err := env.Roots.OpenDir(env.FilesDir)
		if err != nil {
			return nil, err
		}
		return dirIndex{dir}, nil
	}
	if env.OpenS3 == nil {
		return nil, fmt.Errorf("%s: %w", env.FilesDir, ErrNoS3)
	}
	s, err := env.OpenS3(ctx, env.FilesDir)
	if err != nil {
		return nil, fmt.Errorf("open the files location %s: %w", env.FilesDir, err)
	}
	ix := &s3Index{s: s, keys: map[string]bool{}}
	if err := s.ListObjects(ctx, "", func(key string, _ int64) error { ix.keys[key] = true; return nil }); err != nil {
		return nil, err
	}
	return ix, nil
}

// dirIndex is a local directory, opened once: each check opens the file inside it, by
// [os.Root]'s rules. A symbolic link leading out of the directory is a file that does not
// exist: validation neither reads it nor tells it apart from a missing file, so a sheet cannot
// probe for files elsewhere.
type dirIndex struct{ dir *os.Root }

// open opens the regular file at name inside the directory; nil when there is none.
func (d dirIndex) open(name string) *os.File {
	f, err := pathroot.OpenFile(d.dir, name)
	if err != nil {
		return nil
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil
	}
	return f
}

func (d dirIndex) close() { d.dir.Close() }

func (d dirIndex) mime(_ context.Context, name string) string {
	f := d.open(name)
	if f == nil {
		return ""
	}
	defer f.Close()
	m, err := detectMIME(f, name)
	if err != nil {
		return ""
	}
	return m
}

func (d dirIndex) exists(_ context.Context, name string) bool {
	f := d.open(name)
	if f != nil {
		f.Close()
	}
	return f != nil
}

func (d dirIndex) webVTT(_ context.Context, name string) (bool, error) {
	f := d.open(name)
	if f == nil {
		return false, fs.ErrNotExist
	}
	defer f.Close()
	return readsWebVTT(f)
}

func (d dirIndex) where(_, asGiven string) string { return asGiven }

func (dirIndex) kind() string { return "the files directory" }

// s3Index is an S3 location, listed once: a file exists when the listing had its key, and its
// MIME type is its extension's (validation reads no file's content; ExtractMimeType does).
type s3Index struct {
	s    *blob.S3
	keys map[string]bool
}

func (x *s3Index) mime(_ context.Context, name string) string {
	if !x.keys[name] {
		return ""
	}
	return mimeByName(name)
}

func (x *s3Index) close() {}

func (x *s3Index) exists(_ context.Context, name string) bool { return x.keys[name] }

func (x *s3Index) webVTT(ctx context.Context, name string) (bool, error) {
	if !x.keys[name] {
		return false, blob.ErrNotFound
	}
	rc, err := x.s.OpenObject(ctx, name, 16)
	if err != nil {
		return false, err
	}
	defer rc.Close()
	head, err := io.ReadAll(io.LimitReader(rc, 16))
	if err != nil {
		return false, err
	}
	return sniff(head, "") == "text/vtt", nil
}

func (x *s3Index) where(name, _ string) string { return x.s.URL(name) }

func (*s3Index) kind() string { return "the ingest bucket" }

// joinLocation is where a file set's file is: the clean relative name under the sheet's
// files location (a directory or an s3:// URL).
func joinLocation(location, name string) string {
	if IsS3(location) {
		return strings.TrimSuffix(location, "/") + "/" + path.Clean(name)
	}
	return filepath.Join(location, filepath.Clean(name))
}

// s3Stores are the S3 stores a service opened, by URL: each is opened (its bucket checked)
// once per process.
type s3Stores struct {
	mu     sync.Mutex
	stores map[string]*blob.S3
}

func (c *s3Stores) open(ctx context.Context, opener S3Opener, url string) (*blob.S3, error) {
	if opener == nil {
		return nil, fmt.Errorf("%s: %w", url, ErrNoS3)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.stores[url]; ok {
		return s, nil
	}
	s, err := opener(ctx, url)
	if err != nil {
		return nil, err
	}
	if c.stores == nil {
		c.stores = map[string]*blob.S3{}
	}
	c.stores[url] = s
	return s, nil
}

// openS3 opens S3 locations for the service's actions (its S3 field), once per URL.
func (s *Service) openS3(ctx context.Context, url string) (*blob.S3, error) {
	return s.s3.open(ctx, s.S3, url)
}

// open opens a file set's file — a local path or an s3://bucket/key URL — for a streamed read
// (its first n bytes when n > 0). A file that is gone fails the action permanently.
func (c *call) open(ctx context.Context, location string, n int64) (io.ReadCloser, error) {
	if !IsS3(location) {
		f, err := c.openLocal(location)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			return struct {
				io.Reader
				io.Closer
			}{io.LimitReader(f, n), f}, nil
		}
		return f, nil
	}
	bucket, key, err := blob.ParseURL(location)
	if err != nil {
		return nil, action.Permanentf("file set location: %v", err)
	}
	s, err := c.s.openS3(ctx, "s3://"+bucket)
	if errors.Is(err, ErrNoS3) {
		return nil, action.Permanent(err)
	}
	if err != nil {
		return nil, err
	}
	rc, err := s.OpenObject(ctx, key, n)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, action.Permanentf("File not Found: %s", location)
	}
	return rc, err
}

// local returns a file set's file as a local path for a tool: the path itself, or the S3
// object streamed into dir (the task's temp dir) under its own extension.
func (c *call) local(ctx context.Context, location, dir string) (string, error) {
	if !IsS3(location) {
		// The tool opens the path itself: checked inside the files directory first.
		f, err := c.openLocal(location)
		if err != nil {
			return "", err
		}
		f.Close()
		return location, nil
	}
	rc, err := c.open(ctx, location, 0)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	f, err := os.CreateTemp(dir, "input-*"+strings.ToLower(path.Ext(location)))
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return "", fmt.Errorf("read %s: %w", location, err)
	}
	return f.Name(), f.Close()
}

// openLocal opens a file set's local file inside its sheet's files directory (the item's
// files_dir; the file's own directory when there is none). The directory is opened through the
// service's path roots ([pathroot.Roots.OpenDir]) when the task runs, and the file inside it by
// [os.Root]'s rules: a directory outside the roots is refused however the job was made (an
// admin's metadata too), and a link swapped in after the sheet was validated — for the file, or
// for a folder above the directory — cannot lead out, so an approved sheet cannot copy a file
// from elsewhere into preservation. A directory refused, or a file missing, leading out or not a
// regular file, fails the action permanently.
func (c *call) openLocal(location string) (*os.File, error) {
	field, dir := "files_dir", c.md("files_dir")
	if dir == "" || IsS3(dir) {
		field, dir = "location", filepath.Dir(location)
	}
	rel, err := filepath.Rel(dir, location)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, action.Permanentf("%s: not inside the files directory %s", location, dir)
	}
	root, err := c.s.Roots.OpenDir(dir)
	if err != nil {
		return nil, refusedDir(field, err)
	}
	defer root.Close()
	f, err := pathroot.OpenFile(root, rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, action.Permanentf("File not Found: %s", location)
	case pathroot.Escapes(err):
		return nil, action.Permanentf("%s: %s", location, pathroot.Reason(err))
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", location, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, action.Permanentf("%s: not a regular file", location)
	}
	return f, nil
}

// refusedDir is the error of a files directory that could not be opened through the path
// roots: a location refused ([*pathroot.Error]) fails the action permanently, with the field,
// the location and the reason; anything else (a path root that cannot be opened) is retried.
func refusedDir(field string, err error) error {
	var pe *pathroot.Error
	if errors.As(err, &pe) {
		return action.Permanentf("%s %s", field, pe)
	}
	return err
}

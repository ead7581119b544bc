package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// folder is a watched directory: every regular file under it, hidden ones (a leading dot, as
// editors and copy tools name their partial files) and the done folder left out.
type folder struct {
	dir string
	// doneDir is where taken files go ("" keeps them).
	doneDir string
}

func newFolder(dir, doneDir string, moveDone bool) (*folder, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", dir, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("watch %s: not a directory", dir)
	}
	f := &folder{dir: abs}
	if moveDone && doneDir == "" {
		doneDir = filepath.Join(abs, "done")
	}
	if doneDir != "" {
		if f.doneDir, err = filepath.Abs(doneDir); err != nil {
			return nil, fmt.Errorf("watch %s: done folder %s: %w", dir, doneDir, err)
		}
		if f.doneDir == abs {
			return nil, fmt.Errorf("watch %s: the done folder is the watched folder itself", dir)
		}
	}
	return f, nil
}

func (d *folder) list(ctx context.Context, _ bool) ([]file, error) {
	var out []file
	err := filepath.WalkDir(d.dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == d.dir {
				return err
			}
			// A file or folder that went away while walked (taken by another watcher).
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if p == d.dir {
			return nil
		}
		if strings.HasPrefix(e.Name(), ".") || p == d.doneDir {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(d.dir, p)
		out = append(out, file{path: filepath.ToSlash(rel), size: info.Size(), version: strconv.FormatInt(info.ModTime().UnixNano(), 10)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", d.dir, err)
	}
	return out, nil // WalkDir walks in lexical order
}

func (d *folder) open(_ context.Context, f file) (io.ReadCloser, error) {
	return os.Open(filepath.Join(d.dir, filepath.FromSlash(f.path)))
}

// finish moves the file to the done folder under its relative path; a file of that name there
// already is kept, and this one goes beside it as NAME.JOB_ID. A file already gone was moved by
// another watcher.
func (d *folder) finish(_ context.Context, f file, jobID int64) error {
	if d.doneDir == "" {
		return nil
	}
	from := filepath.Join(d.dir, filepath.FromSlash(f.path))
	to := filepath.Join(d.doneDir, filepath.FromSlash(f.path))
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return fmt.Errorf("move %s to the done folder: %w", f.path, err)
	}
	if _, err := os.Lstat(to); err == nil {
		to += "." + strconv.FormatInt(jobID, 10)
	}
	if err := os.Rename(from, to); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("move %s to the done folder: %w", f.path, err)
	}
	return nil
}

func (d *folder) passed(context.Context, string) error { return nil }

func (d *folder) metadata(f file) map[string]any {
	ns, _ := strconv.ParseInt(f.version, 10, 64)
	return map[string]any{"source_mtime": time.Unix(0, ns).UTC().Format(time.RFC3339Nano)}
}

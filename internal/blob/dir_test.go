package blob_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/blob/blobtest"
)

func newDir(t *testing.T) *blob.Dir { return newSmallDir(t, 0) }

func TestDir(t *testing.T) {
	t.Parallel()
	blobtest.Exercise(t, func(t *testing.T) blob.Store { return newDir(t) })
}

func TestDirLayout(t *testing.T) {
	t.Parallel()
	d := newDir(t)
	sum, _, err := d.Put(t.Context(), strings.NewReader("layout"))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(d.Path(), "sha256", sum[:2], sum[2:4], sum)
	fi, err := os.Stat(want)
	if err != nil {
		t.Fatalf("blob not at %s: %v", want, err)
	}
	if perm := fi.Mode().Perm(); perm != 0o400 {
		t.Errorf("blob mode = %v, want read-only for the owner", perm)
	}
	if p, err := d.LocalPath(sum); err != nil || p != want {
		t.Errorf("LocalPath = %q, %v; want %q", p, err, want)
	}
}

// A crash between creating and renaming a temp file leaves it behind: Walk
// must not list it and GC must remove it once it is past grace.
func TestDirCrashLeftovers(t *testing.T) {
	t.Parallel()
	d, ctx := newDir(t), t.Context()
	tmp := filepath.Join(d.Path(), "tmp")
	stale := filepath.Join(tmp, "put-leftover-from-crash")
	fresh := filepath.Join(tmp, "put-in-progress")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("half a blob"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-3 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	// A half-written file in the blob tree itself, under a name that is not
	// its hash's layout path, is not a blob either.
	stray := filepath.Join(d.Path(), "sha256", "ab", "cd")
	if err := os.MkdirAll(stray, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stray, strings.Repeat("0", 64)), []byte("misplaced"), 0o600); err != nil {
		t.Fatal(err)
	}

	err := d.Walk(ctx, func(sum string, _ int64, _ time.Time) error {
		t.Errorf("Walk listed %s", sum)
		return nil
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}

	deleted, freed, err := blob.GC(ctx, d, func(string) (bool, error) { return false, nil }, time.Hour, time.Now())
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	if deleted != 0 || freed != int64(len("half a blob")) {
		t.Errorf("GC = %d deleted, %d freed; want 0 blobs and the stale temp file's %d bytes", deleted, freed, len("half a blob"))
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temp file survived GC: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("temp file of a Put in progress was removed: %v", err)
	}
}

func TestDirCancelledPutLeavesNoTempFile(t *testing.T) {
	t.Parallel()
	d := newDir(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := d.Put(ctx, strings.NewReader("never")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put = %v, want context.Canceled", err)
	}
	_, _, err := d.Put(t.Context(), readerFunc(func([]byte) (int, error) { return 0, errors.New("broken pipe") }))
	if err == nil {
		t.Fatal("Put of failing reader succeeded")
	}
	entries, err := os.ReadDir(filepath.Join(d.Path(), "tmp"))
	if err != nil || len(entries) != 0 {
		t.Fatalf("tmp after failed Puts = %v, %v; want empty", entries, err)
	}
}

// Re-Putting old content must refresh its mtime, or GC could delete a blob
// that a row is about to reference.
func TestDirPutRefreshesModTime(t *testing.T) {
	t.Parallel()
	d, ctx := newDir(t), t.Context()
	sum, _, err := d.Put(ctx, strings.NewReader("old content"))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := d.LocalPath(sum)
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Put(ctx, strings.NewReader("old content")); err != nil {
		t.Fatal(err)
	}
	deleted, _, err := blob.GC(ctx, d, func(string) (bool, error) { return false, nil }, time.Hour, time.Now())
	if err != nil || deleted != 0 {
		t.Fatalf("GC after re-Put = %d, %v; want 0 deleted", deleted, err)
	}
}

// A symlink planted in the blob tree must not let Open read outside it.
func TestDirSymlinkEscape(t *testing.T) {
	t.Parallel()
	d, ctx := newDir(t), t.Context()
	key := strings.Repeat("ab", 32)
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.MkdirAll(filepath.Join(outside, "ab"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "ab", key), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(d.Path(), "sha256", "ab")); err != nil {
		t.Fatal(err)
	}
	if rc, err := d.Open(ctx, key); err == nil {
		rc.Close()
		t.Fatal("Open followed a symlink out of the blob directory")
	}
	if _, err := d.LocalPath(key); err == nil {
		t.Fatal("LocalPath followed a symlink out of the blob directory")
	}
}

func TestNewDirOnFile(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := blob.NewDir(f); err == nil {
		t.Fatal("NewDir on a regular file succeeded")
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func newSmallDir(t *testing.T, max int) *blob.Dir {
	t.Helper()
	d, err := blob.OpenDir(filepath.Join(t.TempDir(), "blobs"), blob.DirOptions{SmallMax: max})
	if err != nil {
		t.Fatalf("OpenDir: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// The whole store contract holds with small blobs kept in small.db (most of the suite's
// contents are small; the large ones still go to files).
func TestDirSmall(t *testing.T) {
	t.Parallel()
	blobtest.Exercise(t, func(t *testing.T) blob.Store { return newSmallDir(t, 64<<10) })
}

// A small blob is a row, not a file; one byte over the limit is a file; LocalPath writes a
// small blob out once for tools that need a path, and Walk and GC see each blob once.
func TestDirSmallLayout(t *testing.T) {
	t.Parallel()
	d, ctx := newSmallDir(t, 16), t.Context()
	small, _, err := d.Put(ctx, strings.NewReader("sixteen bytes!!!"))
	if err != nil {
		t.Fatal(err)
	}
	large, _, err := d.Put(ctx, strings.NewReader("seventeen bytes!!"))
	if err != nil {
		t.Fatal(err)
	}
	file := func(sum string) string { return filepath.Join(d.Path(), "sha256", sum[:2], sum[2:4], sum) }
	if _, err := os.Stat(file(small)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("small blob is a file (stat err %v), want a row of small.db", err)
	}
	if _, err := os.Stat(file(large)); err != nil {
		t.Errorf("blob over the limit is not a file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.Path(), "small.db")); err != nil {
		t.Errorf("small.db: %v", err)
	}
	p, err := d.LocalPath(small)
	if err != nil || p != file(small) {
		t.Fatalf("LocalPath(small) = %q, %v; want %q", p, err, file(small))
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "sixteen bytes!!!" {
		t.Errorf("LocalPath file = %q, %v", b, err)
	}
	seen := map[string]int{}
	if err := d.Walk(ctx, func(key string, _ int64, _ time.Time) error { seen[key]++; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[small] != 1 || seen[large] != 1 {
		t.Errorf("Walk saw %v, want each of the two blobs once", seen)
	}
	n, _, err := blob.GC(ctx, d, func(string) (bool, error) { return false, nil }, 0, time.Now().Add(time.Minute))
	if err != nil || n != 2 {
		t.Fatalf("GC deleted %d, %v; want 2", n, err)
	}
	for _, sum := range []string{small, large} {
		if _, err := d.Stat(ctx, sum); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("after GC, Stat(%s) = %v, want ErrNotFound", sum[:8], err)
		}
	}
}

// Concurrent small Puts share transactions and each comes back durable and readable.
func TestDirSmallConcurrent(t *testing.T) {
	t.Parallel()
	d, ctx := newSmallDir(t, 64<<10), t.Context()
	const n = 200
	sums := make([]string, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			var err error
			sums[i], _, err = d.Put(ctx, strings.NewReader(strings.Repeat("x", i+1)))
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, sum := range sums {
		r, err := d.Open(ctx, sum)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r)
		r.Close()
		if len(b) != i+1 {
			t.Errorf("blob %d reads %d bytes", i, len(b))
		}
	}
}

// A staged blob has its key at once and is durable once wait returns: readable after a reopen
// of the store. A blob staged as read soon is served from memory, and GC's delete forgets it.
func TestDirStage(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d, err := blob.OpenDir(root, blob.DirOptions{SmallMax: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	sums := map[string]string{}
	var waits []func() error
	for i, soon := range []bool{true, false} {
		content := fmt.Sprintf("staged blob %d", i)
		sum, n, wait, err := d.Stage(ctx, strings.NewReader(content), soon)
		if err != nil || n != int64(len(content)) {
			t.Fatalf("Stage = %d, %v", n, err)
		}
		sums[sum] = content
		waits = append(waits, wait)
	}
	big := strings.Repeat("b", 64<<10+1) // over the limit: stored before Stage returns
	sum, _, wait, err := d.Stage(ctx, strings.NewReader(big), true)
	if err != nil {
		t.Fatal(err)
	}
	sums[sum] = big
	waits = append(waits, wait)
	for _, w := range waits {
		if err := w(); err != nil {
			t.Fatal(err)
		}
	}
	read := func(d *blob.Dir, sum string) (string, error) {
		r, err := d.Open(ctx, sum)
		if err != nil {
			return "", err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		return string(b), err
	}
	// Another instance on the same root reads from the database and files, not from memory.
	other, err := blob.OpenDir(root, blob.DirOptions{SmallMax: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for sum, want := range sums {
		for _, dd := range []*blob.Dir{d, other} {
			if got, err := read(dd, sum); err != nil || got != want {
				t.Errorf("Open(%.8s) = %.20q, %v; want %.20q", sum, got, err, want)
			}
		}
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	n, _, err := blob.GC(ctx, d, func(string) (bool, error) { return false, nil }, 0, time.Now().Add(time.Minute))
	if err != nil || n != 3 {
		t.Fatalf("GC deleted %d, %v; want 3", n, err)
	}
	for sum := range sums {
		if _, err := read(d, sum); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("after GC, Open(%.8s) = %v, want ErrNotFound (not a copy kept in memory)", sum, err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

package blob_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/blob"
)

// TestDirSmallDeflated: a compressible small blob is kept deflated in its row, an incompressible
// one as it is; both read back byte for byte under the SHA-256 of their own bytes, from another
// store opened on the directory (not from the writer's memory), and Stat gives their own size.
// A row kept as it is — as every row was before compression — reads back too. small.db is made
// with 16 KiB pages.
func TestDirSmallDeflated(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	root := filepath.Join(t.TempDir(), "blobs")
	d, err := blob.OpenDir(root, blob.DirOptions{SmallMax: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	text := []byte(strings.Repeat("A letter from the north about the river and the market.\n", 18))
	noise := make([]byte, 1500)
	rand.Read(noise)
	blobs := map[string][]byte{}
	for _, b := range [][]byte{text, noise} {
		sum, n, err := d.Put(ctx, bytes.NewReader(b))
		h := sha256.Sum256(b)
		if err != nil || n != int64(len(b)) || sum != hex.EncodeToString(h[:]) {
			t.Fatalf("Put: %s, %d, %v; want the SHA-256 of the bytes and %d", sum, n, err, len(b))
		}
		blobs[sum] = b
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("sqlite", "file:"+filepath.Join(root, "small.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pageSize int
	if err := db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil || pageSize != 16384 {
		t.Errorf("small.db page size %d (%v), want 16384", pageSize, err)
	}
	stored := func(sum string) int {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT length(data) FROM blobs WHERE sha256 = ?", sum).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for sum, b := range blobs {
		n := stored(sum)
		switch {
		case bytes.Equal(b, text) && n >= len(b)/2:
			t.Errorf("text of %d bytes kept in %d, want deflated to under half", len(b), n)
		case bytes.Equal(b, noise) && n != len(b):
			t.Errorf("random bytes of %d kept in %d, want as they are", len(b), n)
		}
	}

	// A row written as every row was before: the blob as it is.
	old := []byte(strings.Repeat("an older row, kept as it is. ", 10))
	oh := sha256.Sum256(old)
	oldSum := hex.EncodeToString(oh[:])
	rw, err := sql.Open("sqlite", "file:"+filepath.Join(root, "small.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.ExecContext(ctx, "INSERT INTO blobs (sha256, size, mtime, data) VALUES (?, ?, 0, ?)", oldSum, len(old), old); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	blobs[oldSum] = old

	d2, err := blob.OpenDir(root, blob.DirOptions{SmallMax: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	for sum, b := range blobs {
		rc, err := d2.Open(ctx, sum)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("Open(%.8s): %d bytes, %v; want the %d put", sum, len(got), err, len(b))
		}
		if n, err := d2.Stat(ctx, sum); err != nil || n != int64(len(b)) {
			t.Errorf("Stat(%.8s) = %d, %v; want %d", sum, n, err, len(b))
		}
	}
}

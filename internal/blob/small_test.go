package blob_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		key, _ := hex.DecodeString(sum) // small.db keys rows by the SHA-256's bytes
		if err := db.QueryRowContext(ctx, "SELECT length(data) FROM blobs WHERE sha256 = ?", key).Scan(&n); err != nil {
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

	// A row written as every row was before: the blob as it is, keyed by its hex SHA-256 (a
	// file made before keys were bytes); opening the store converts its key.
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
	var textKeys, blobKeys int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FILTER (WHERE typeof(sha256) = 'text'), count(*) FILTER (WHERE typeof(sha256) = 'blob' AND length(sha256) = 32) FROM blobs").Scan(&textKeys, &blobKeys); err != nil {
		t.Fatal(err)
	}
	if textKeys != 0 || blobKeys != len(blobs) {
		t.Errorf("small.db keys after open: %d text, %d of 32 bytes; want 0 and %d", textKeys, blobKeys, len(blobs))
	}
	var walked []string
	if err := d2.Walk(ctx, func(key string, size int64, _ time.Time) error { walked = append(walked, key); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(walked) != len(blobs) {
		t.Errorf("Walk gave %d keys, want %d", len(walked), len(blobs))
	}
	for _, k := range walked {
		if _, ok := blobs[k]; !ok {
			t.Errorf("Walk gave %q, not a key put", k)
		}
	}
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

// TestDirSmallKeysConverted: a small.db written when keys were hex text — 2,500 rows, more than
// one batch of the conversion and one page of Walk — opens with every key turned into its 32
// bytes, and every blob reads back and is walked once under its hex name.
func TestDirSmallKeysConverted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	root := filepath.Join(t.TempDir(), "blobs")
	d, err := blob.OpenDir(root, blob.DirOptions{SmallMax: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(root, "small.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	blobs := map[string][]byte{}
	for i := range 2500 {
		b := []byte(fmt.Sprintf("blob %d of an older small.db\n", i))
		h := sha256.Sum256(b)
		sum := hex.EncodeToString(h[:])
		blobs[sum] = b
		if _, err := db.ExecContext(ctx, "INSERT INTO blobs (sha256, size, mtime, data) VALUES (?, ?, 0, ?)", sum, len(b), b); err != nil {
			t.Fatal(err)
		}
	}

	d, err = blob.OpenDir(root, blob.DirOptions{SmallMax: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var textKeys int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM blobs WHERE typeof(sha256) <> 'blob' OR length(sha256) <> 32").Scan(&textKeys); err != nil {
		t.Fatal(err)
	}
	if textKeys != 0 {
		t.Errorf("%d keys left unconverted", textKeys)
	}
	seen := map[string]int{}
	if err := d.Walk(ctx, func(key string, size int64, _ time.Time) error {
		seen[key]++
		if b, ok := blobs[key]; !ok || int64(len(b)) != size {
			t.Errorf("Walk: %q of %d bytes, not a blob written", key, size)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(blobs) {
		t.Errorf("Walk gave %d keys, want %d", len(seen), len(blobs))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("Walk gave %.8s %d times", k, n)
		}
	}
	for sum, b := range blobs {
		rc, err := d.Open(ctx, sum)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("Open(%.8s): %q, %v; want %q", sum, got, err, b)
		}
	}
}

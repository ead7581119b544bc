package blob_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
)

func putN(t *testing.T, s blob.Store, n int) map[string]int64 {
	t.Helper()
	want := map[string]int64{}
	for i := range n {
		sum, size, err := s.Put(t.Context(), strings.NewReader(fmt.Sprintf("blob %d %s", i, strings.Repeat("x", i*100))))
		if err != nil {
			t.Fatal(err)
		}
		want[sum] = size
	}
	return want
}

func listAll(t *testing.T, s blob.Store) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	if err := s.Walk(t.Context(), func(key string, size int64, _ time.Time) error { got[key] = size; return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCopy copies every blob, then again (nothing to do), then after part of the destination
// is lost (only the missing ones are copied), as a re-run after a crash would.
func TestCopy(t *testing.T) {
	t.Parallel()
	src, dst := newDir(t), newDir(t)
	want := putN(t, src, 20)
	var total int64
	for _, n := range want {
		total += n
	}
	var progress int
	st, err := blob.Copy(t.Context(), dst, src, blob.CopyOptions{Parallel: 3, Progress: func(blob.CopyStats) { progress++ }})
	if err != nil {
		t.Fatal(err)
	}
	if st != (blob.CopyStats{Copied: 20, Bytes: total}) || progress != 20 {
		t.Errorf("first copy: %+v with %d progress calls, want 20 copied, %d bytes, 20 calls", st, progress, total)
	}
	if got := listAll(t, dst); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("destination holds %v, want %v", got, want)
	}
	for key := range want {
		if !bytes.Equal(readAll(t, dst, key), readAll(t, src, key)) {
			t.Errorf("blob %s differs", key)
		}
	}

	st, err = blob.Copy(t.Context(), dst, src, blob.CopyOptions{})
	if err != nil || st != (blob.CopyStats{Skipped: 20, SkippedBytes: total}) {
		t.Errorf("second copy: %+v, %v; want all 20 skipped", st, err)
	}

	lost := 0
	for key := range want {
		if lost == 7 {
			break
		}
		if err := dst.Delete(t.Context(), key); err != nil {
			t.Fatal(err)
		}
		lost++
	}
	st, err = blob.Copy(t.Context(), dst, src, blob.CopyOptions{})
	if err != nil || st.Copied != 7 || st.Skipped != 13 {
		t.Errorf("copy after losing 7: %+v, %v; want 7 copied, 13 skipped", st, err)
	}
}

// TestCopyCorrupt: a source blob whose bytes no longer match its name fails the copy, naming
// both hashes.
func TestCopyCorrupt(t *testing.T) {
	t.Parallel()
	src, dst := newDir(t), newDir(t)
	key, _, err := src.Put(t.Context(), strings.NewReader("the original bytes"))
	if err != nil {
		t.Fatal(err)
	}
	path, err := src.LocalPath(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("THE original bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("THE original bytes"))
	bad := hex.EncodeToString(sum[:])
	_, err = blob.Copy(t.Context(), dst, src, blob.CopyOptions{})
	if err == nil || !strings.Contains(err.Error(), key+" in the source is corrupt") || !strings.Contains(err.Error(), bad) {
		t.Fatalf("got %v, want a corrupt-blob error naming %s and %s", err, key, bad)
	}
	if _, err := dst.Stat(t.Context(), key); err == nil {
		t.Errorf("the corrupt blob was stored under its claimed name")
	}
}

func readAll(t *testing.T, s blob.Store, key string) []byte {
	t.Helper()
	r, err := s.Open(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

package cli

import (
	"archive/zip"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIngestProgressLine: the ingest line counts the inputs given and the documents made. It said
// "files" and counted every item, archive entries and derived files included (57 inputs showed
// as 40,261 files).
func TestIngestProgressLine(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := 0; i < 30; i++ {
		w, _ := zw.Create(fmt.Sprintf("entry-%02d.txt", i))
		fmt.Fprintf(w, "entry %d\n", i)
	}
	zw.Close()
	os.WriteFile(filepath.Join(dir, "a.zip"), buf.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("hello world\n"), 0o644)
	code, out, errs := run(t, "--data", filepath.Join(dir, "data"), "ingest", filepath.Join(dir, "a.zip"), filepath.Join(dir, "b.txt"))
	if code != 0 {
		t.Fatalf("ingest: exit %d, %s %s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "2/2 inputs done, 31 documents") {
		t.Errorf("the last progress line is %q, want it to say 2/2 inputs done, 31 documents", last)
	}
}

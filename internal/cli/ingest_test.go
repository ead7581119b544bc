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

// TestIngestDataDirURIBytes: a data dir whose path holds bytes a URI reads ('#', '?', '%') is
// used as given. The database's name was pasted into a "file:" URI unescaped, so
// `--data /tmp/a#b` made the database /tmp/a and the blobs' small.db /tmp/a#b/blobs/…: a second
// data dir would share the first's database.
func TestIngestDataDirURIBytes(t *testing.T) {
	clearEnv(t)
	for _, name := range []string{"a#b", "a?b", "a%23b"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in.txt")
			if err := os.WriteFile(in, []byte("hello world\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			data := filepath.Join(dir, name)
			if code, out, errs := run(t, "ingest", "--data", data, in); code != 0 {
				t.Fatalf("ingest --data %s: exit %d, %s %s", data, code, out, errs)
			}
			if _, err := os.Stat(filepath.Join(data, "sluice.db")); err != nil {
				t.Errorf("no database in the data dir: %v", err)
			}
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if len(names) != 2 {
				t.Errorf("%s holds %q, want only in.txt and %s", dir, names, name)
			}
			code, out, errs := run(t, "documents", "list", "--data", data, "--output", "json")
			if code != 0 || !strings.Contains(out, "in.txt") {
				t.Errorf("documents list: exit %d, %q %q", code, out, errs)
			}
		})
	}
}

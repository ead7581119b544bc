package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestRun runs the sample program over three files, one of them not text, and runs it again
// on the same data directory: the job is found by its key, with the same results.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a.txt":   "the cat and the hat; the cat sat",
		"b.txt":   "Sluice sluice SLUICE, gate",
		"bad.bin": "caf\xe9 au lait",
	}
	var names []string
	for _, n := range []string{"a.txt", "b.txt", "bad.bin"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte(files[n]), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, p)
	}
	want := "a.txt: the cat and\nb.txt: sluice gate\nbad.bin: error: not UTF-8 text\njob 1 complete\n"
	data := filepath.Join(dir, "data")
	for round := range 2 {
		var out bytes.Buffer
		if err := run(t.Context(), &out, data, "", names); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Errorf("run %d printed\n%s\nwant\n%s", round+1, out.String(), want)
		}
	}
}

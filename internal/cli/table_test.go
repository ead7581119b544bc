package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTableFits: a table wider than the limit cuts its flexible column with "…" so every line
// fits, keeps every other column whole, and cuts nothing without a limit.
func TestTableFits(t *testing.T) {
	t.Parallel()
	tb := newTable([]int{2}, "ID", "STATE", "ERROR", "WORKER")
	tb.add("1", "failed", strings.Repeat("a long reason ", 30)+"\nand a second line", "worker-a")
	tb.add("22", "complete", "", "worker-b")
	var b strings.Builder
	if err := tb.write(&b, 60); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (a multi-line cell is its first line):\n%s", len(lines), b.String())
	}
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > 60 {
			t.Errorf("line of %d columns, want at most 60: %q", n, l)
		}
	}
	if !strings.Contains(lines[1], "…  worker-a") || !strings.HasPrefix(lines[2], "22  complete") || !strings.HasSuffix(lines[2], "worker-b") {
		t.Errorf("the error is not cut, or another column is:\n%s", b.String())
	}
	b.Reset()
	if err := tb.write(&b, 0); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "…") || !strings.Contains(b.String(), strings.Repeat("a long reason ", 30)) {
		t.Errorf("without a limit the table is cut:\n%s", b.String())
	}
}

// TestJobShowSaysWhenItCuts: `job show` of a job of 201 files prints 200 and says there are more.
func TestJobShowSaysWhenItCuts(t *testing.T) {
	clearEnv(t)
	global := driverFlags(t, "sqlite")
	dir := t.TempDir()
	for i := range 201 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.txt", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, errs := run(t, append([]string{"ingest", dir}, global...)...); code != 0 {
		t.Fatalf("ingest: %d %s %s", code, out, errs)
	}
	code, out, errs := run(t, append([]string{"job", "show", "1"}, global...)...)
	if code != 0 || !strings.Contains(errs, "more than the 200 items shown") || strings.Count(out, ".txt") > 200 {
		t.Errorf("job show of 201+ items: exit %d, %d lines, stderr %q; want 200 items and a word that there are more", code, strings.Count(out, "\n"), errs)
	}
}

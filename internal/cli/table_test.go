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

// TestDocumentsAcrossJobs: documents list and export take --all-jobs (every documents job, not
// the newest alone), list --limit cuts the table and says so, and export folders each job and
// each root: job-N/documents/ROOT/NNNNNN-NAME.
func TestDocumentsAcrossJobs(t *testing.T) {
	clearEnv(t)
	global := driverFlags(t, "sqlite")
	dir := t.TempDir()
	for _, f := range []string{"a.txt", "b.txt", "c.txt"} {
		os.WriteFile(filepath.Join(dir, f), []byte("text of "+f), 0o644)
	}
	sluice := func(args ...string) (string, string) {
		t.Helper()
		code, out, errs := run(t, append(args, global...)...)
		if code != 0 {
			t.Fatalf("%q: exit %d\n%s%s", args, code, out, errs)
		}
		return out, errs
	}
	sluice("ingest", filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt"))
	sluice("ingest", filepath.Join(dir, "c.txt"))
	if out, _ := sluice("documents", "list"); strings.Count(out, ".txt") != 1 {
		t.Errorf("documents list (the newest job):\n%s", out)
	}
	if out, errs := sluice("documents", "list", "--all-jobs"); strings.Count(out, ".txt") != 3 || !strings.Contains(errs, "2 jobs: 3 documents") {
		t.Errorf("documents list --all-jobs:\n%s%s", out, errs)
	}
	if out, errs := sluice("documents", "list", "--all-jobs", "--limit", "2"); strings.Count(out, ".txt") != 2 || !strings.Contains(errs, "the first 2 shown") {
		t.Errorf("documents list --all-jobs --limit 2:\n%s%s", out, errs)
	}
	out := filepath.Join(t.TempDir(), "export")
	sluice("documents", "export", "--all-jobs", "--out", out, "--parts", "text")
	for _, want := range []string{"job-1/documents/a.txt/000001-a.txt.txt", "job-1/documents/b.txt/000002-b.txt.txt", "job-2/documents/c.txt/000001-c.txt.txt", "job-2/index.jsonl"} {
		if _, err := os.Stat(filepath.Join(out, filepath.FromSlash(want))); err != nil {
			t.Errorf("the export lacks %s: %v", want, err)
		}
	}
}

// TestHelpShowsOwnFlags: a command that does not run the engine describes its own flags and
// where the data is, and only names the engine's; one that runs it describes them all.
func TestHelpShowsOwnFlags(t *testing.T) {
	clearEnv(t)
	_, out, _ := run(t, "documents", "list", "-h")
	if !strings.Contains(out, "at most this many documents") || !strings.Contains(out, "data directory") ||
		strings.Contains(out, "task lease duration") || !strings.Contains(out, "-lease") {
		t.Errorf("documents list -h describes the engine's flags, or not its own:\n%s", out)
	}
	if _, out, _ = run(t, "serve", "-h"); !strings.Contains(out, "task lease duration") {
		t.Errorf("serve -h does not describe --lease:\n%s", out)
	}
}

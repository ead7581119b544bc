package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocumentsSearchPages: `sluice documents search --limit 1` pages through every hit with the
// cursor each page prints (next_cursor in JSON, "more: --cursor" in text), and refuses a cursor
// that is not a search's as a usage error.
func TestDocumentsSearchPages(t *testing.T) {
	clearEnv(t)
	global := driverFlags(t, "sqlite")
	dir := t.TempDir()
	for _, name := range []string{"a.txt", "b.txt", "c.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("turnips of "+name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sluice := func(args ...string) (string, string) {
		t.Helper()
		code, out, errs := run(t, append(args, global...)...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s %s", args, code, out, errs)
		}
		return out, errs
	}
	sluice("ingest", filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt"), filepath.Join(dir, "c.txt"))
	seen := map[int64]bool{}
	for cur := ""; ; {
		args := []string{"documents", "search", "turnips", "--limit", "1", "--output", "json"}
		if cur != "" {
			args = append(args, "--cursor", cur)
		}
		out, _ := sluice(args...)
		var page struct {
			Hits []struct {
				ID int64 `json:"id"`
			} `json:"hits"`
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Hits) > 1 {
			t.Fatalf("%q: %v:\n%s", args, err, out)
		}
		for _, h := range page.Hits {
			if seen[h.ID] {
				t.Fatalf("document %d on two pages", h.ID)
			}
			seen[h.ID] = true
		}
		if page.NextCursor == "" {
			break
		}
		if len(seen) > 3 {
			t.Fatal("paging does not end")
		}
		cur = page.NextCursor
	}
	if len(seen) != 3 {
		t.Fatalf("paged through %d documents, want 3", len(seen))
	}
	// Text pages say how to go on; the cursor they print is the one JSON gives.
	_, errs := sluice("documents", "search", "turnips", "--limit", "2")
	more, ok := strings.CutPrefix(strings.TrimSpace(errs), "more: --cursor ")
	if !ok {
		t.Fatalf("text search of 3 by 2: stderr %q, want more: --cursor", errs)
	}
	out, _ := sluice("documents", "search", "turnips", "--limit", "2", "--cursor", strings.Fields(more)[0])
	if n := strings.Count(out, "[document "); n != 1 {
		t.Errorf("the page after two of three has %d hits, want 1:\n%s", n, out)
	}
	for _, bad := range []string{"garbage", "WyJqb2JzIiwiMSJd"} {
		code, _, errs := run(t, append([]string{"documents", "search", "turnips", "--cursor", bad}, global...)...)
		if code != 2 || !strings.Contains(errs, "cursor: not a cursor of this list") {
			t.Errorf("--cursor %s: exit %d, %q; want a usage error saying so", bad, code, errs)
		}
	}
}

// TestSearchAfterDoubleDash: words after -- are the query even when they start with -, so
// `documents search -- turnips -only` excludes "only"; without --, the error says to use it.
func TestSearchAfterDoubleDash(t *testing.T) {
	clearEnv(t)
	global := driverFlags(t, "sqlite")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("turnips only\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("turnips and more\n"), 0o644)
	if code, out, errs := run(t, append([]string{"ingest", filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")}, global...)...); code != 0 {
		t.Fatalf("ingest: %d %s %s", code, out, errs)
	}
	code, out, errs := run(t, append(append([]string{"documents", "search", "--output", "json"}, global...), "--", "turnips", "-only")...)
	var page struct {
		Hits []struct {
			Title string `json:"title"`
		} `json:"hits"`
	}
	if err := json.Unmarshal([]byte(out), &page); code != 0 || err != nil || len(page.Hits) != 1 || page.Hits[0].Title != "b.txt" {
		t.Errorf("search -- turnips -only: exit %d, %v, hits %+v (stderr %s); want b.txt alone", code, err, page.Hits, errs)
	}
	code, _, errs = run(t, append([]string{"documents", "search", "-only"}, global...)...)
	if code != ExitUsage || !strings.Contains(errs, "goes after --") {
		t.Errorf("search -only: exit %d, %q; want a usage error pointing to --", code, errs)
	}
}

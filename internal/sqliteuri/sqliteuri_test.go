package sqliteuri

import (
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

func TestFile(t *testing.T) {
	t.Parallel()
	q := url.Values{"_txlock": {"immediate"}}
	for _, tc := range []struct {
		name, path string
		q          url.Values
		want       string
	}{
		{name: "absolute", path: "/tmp/sluice.db", q: q, want: "file:///tmp/sluice.db?_txlock=immediate"},
		{name: "relative", path: "data/sluice.db", q: q, want: "file:data/sluice.db?_txlock=immediate"},
		{name: "no parameters", path: "/d/x.db", want: "file:///d/x.db"},
		{name: "hash", path: "/tmp/a#b/x.db", want: "file:///tmp/a%23b/x.db"},
		{name: "question mark", path: "/tmp/a?b/x.db", q: q, want: "file:///tmp/a%3Fb/x.db?_txlock=immediate"},
		{name: "percent", path: "/tmp/a%23b/x.db", want: "file:///tmp/a%2523b/x.db"},
		{name: "double slash", path: "//tmp/x.db", want: "file:////tmp/x.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := File(tc.path, tc.q); got != tc.want {
				t.Errorf("File(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}

// TestFileOpensThatFile: SQLite creates the database at the very path given, whatever bytes it
// holds, and nowhere else.
func TestFileOpensThatFile(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"a#b", "a?b", "a%23b", "a%b", "a b", "a&b=c", "a\nb"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			parent := t.TempDir()
			dir := filepath.Join(parent, name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "x.db")
			db, err := sql.Open("sqlite", File(path, url.Values{"_pragma": {"journal_mode(WAL)"}}))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("CREATE TABLE t (x)"); err != nil {
				t.Fatalf("create a table in %q: %v", path, err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("the database is not at %q: %v", path, err)
			}
			entries, _ := os.ReadDir(parent)
			if len(entries) != 1 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("%s holds %q, want only %q", parent, names, name)
			}
		})
	}
}

// TestMemoryBudget reads a database of 64 MB through a connection whose cache_size would hold
// all of it: SQLite's memory must stay near MemoryBudget (its page cache reuses pages), not
// grow with what was read.
func TestMemoryBudget(t *testing.T) {
	q := url.Values{}
	q.Add("_pragma", "cache_size(-131072)") // 128 MiB
	q.Add("_pragma", "synchronous(OFF)")
	db, err := sql.Open("sqlite", File(filepath.Join(t.TempDir(), "big.db"), q))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (b BLOB);
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 16384)
		INSERT INTO t SELECT randomblob(4000) FROM n`); err != nil {
		t.Fatal(err)
	}
	var total int64
	if err := db.QueryRow(`SELECT sum(length(b)) FROM t`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total != 16384*4000 {
		t.Fatalf("read %d bytes, want %d", total, 16384*4000)
	}
	now, peak := MemoryUsed()
	if now <= 0 || peak < now {
		t.Fatalf("MemoryUsed() = %d, %d: SQLite's memory statistics are off", now, peak)
	}
	// The budget is soft: a statement's own allocations may pass it a little.
	if limit := int64(MemoryBudget) * 5 / 4; peak > limit {
		t.Fatalf("SQLite held %.1f MB at most, over the budget of %.1f MB (+25 %%): its page cache grew with the data",
			float64(peak)/(1<<20), float64(MemoryBudget)/(1<<20))
	}
	t.Logf("SQLite memory: %.1f MB now, %.1f MB at most", float64(now)/(1<<20), float64(peak)/(1<<20))
}

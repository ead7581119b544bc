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

package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// implementationWords are what an error shown to a user must not hold: the words of a
// database driver, of the Go library or of a Go type.
var implementationWords = regexp.MustCompile(`sql:|store:|pgx|pgconn|sqlite|SQLSTATE|no rows|strconv\.|json:|invalid character|\*[a-z]+\.[A-Z]|%!|<nil>`)

// driverFlags returns the global flags of a new, empty installation on the driver: a data dir,
// and for "postgres" a schema of its own in the database at SLUICE_TEST_DATABASE_URL (skipping
// without it, see [drivertest.DatabaseURL]), dropped when t ends.
func driverFlags(t *testing.T, driver string) []string {
	t.Helper()
	global := []string{"--data", t.TempDir()}
	if driver == "postgres" {
		url := drivertest.DatabaseURL(t)
		schema := drivertest.Schema(t)
		t.Cleanup(func() { drivertest.DropSchema(t, url, schema) })
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		global = append(global, "--database", url+sep+"sluice_schema="+schema)
	}
	return global
}

// TestErrorsInPlainWords: every command given a missing id or a bad argument fails with a
// message that names the thing in plain words, on both drivers, and holds no driver or Go text.
func TestErrorsInPlainWords(t *testing.T) {
	clearEnv(t)
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			global := driverFlags(t, driver)
			body := filepath.Join(t.TempDir(), "body.json")
			if err := os.WriteFile(body, []byte(`{"id": 1}`), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name string
				args []string
				want string // in the message
			}{
				{"job show", []string{"job", "show", "99"}, "job 99 does not exist"},
				{"job show json", []string{"job", "show", "99", "--output", "json"}, "job 99 does not exist"},
				{"job history", []string{"job", "history", "99"}, "job 99 does not exist"},
				{"job cancel", []string{"job", "cancel", "99"}, "job 99 does not exist"},
				{"job retry", []string{"job", "retry", "99"}, "job 99 does not exist"},
				{"job show not a number", []string{"job", "show", "abc"}, `job ID "abc" is not a positive number`},
				{"event by item", []string{"event", "fire", "--item", "99", "go"}, "item 99 does not exist"},
				{"event by key", []string{"event", "fire", "--job", "99", "--key", "k=nope", "go"}, "job 99 does not exist"},
				{"event by body", []string{"event", "fire", "--job", "99", "--body", body, "go"}, "job 99 does not exist"},
				{"documents show", []string{"documents", "show", "99"}, "document 99 does not exist"},
				{"documents show not a number", []string{"documents", "show", "x"}, `not "x"`},
				{"documents list", []string{"documents", "list", "--job", "99"}, "job 99 does not exist"},
				{"documents export", []string{"documents", "export", "--job", "99", "--format", "jsonl"}, "job 99 does not exist"},
				{"documents search", []string{"documents", "search", "anything", "--job", "99"}, "job 99 does not exist"},
				{"objects sheet show", []string{"objects", "sheet", "show", "7"}, "sheet 7 does not exist"},
				{"objects sheet approve", []string{"objects", "sheet", "approve", "7"}, "sheet 7 does not exist"},
				{"objects sheet delete", []string{"objects", "sheet", "delete", "7"}, "sheet 7 does not exist"},
				{"objects show", []string{"objects", "show", "W-404"}, `work or file set "W-404" does not exist`},
				{"run unknown workflow", []string{"run", "no-such-workflow"}, "no-such-workflow"},
				{"ingest bad metadata", []string{"ingest", "--metadata", "{nope", body}, "--metadata must be a JSON object"},
				{"run bad metadata", []string{"run", "--meta", "{\"a\":1", "no-such-workflow"}, "--meta must be a JSON object"},
				{"bad duration", []string{"job", "list", "--lease", "soon"}, "soon"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					code, out, errs := run(t, append(tc.args, global...)...)
					if code == 0 {
						t.Fatalf("exit 0, want a failure; stdout %q", out)
					}
					if !strings.Contains(errs, tc.want) {
						t.Errorf("stderr %q does not say %q", errs, tc.want)
					}
					if w := implementationWords.FindString(out + errs); w != "" {
						t.Errorf("output holds %q:\n%s%s", w, out, errs)
					}
				})
			}
		})
	}
}

package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGlobalFlagsBeforeCommand: global flags may come before the command, as with git or kubectl.
func TestGlobalFlagsBeforeCommand(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	for _, args := range [][]string{
		{"--data", data, "token", "create", "--role", "reader"},
		{"--data=" + data, "token", "create", "--role", "reader"},
		{"token", "create", "--data", data, "--role", "reader"},
	} {
		var out, errb bytes.Buffer
		if code := Main(t.Context(), args, &out, &errb); code != 0 || len(strings.TrimSpace(out.String())) < 16 {
			t.Errorf("%q: exit %d, out %q, err %q", args, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Main(t.Context(), []string{"--data", data, "token", "list"}, &out, &errb); code != 0 || strings.Count(out.String(), "reader") != 3 {
		t.Errorf("token list: exit %d, out %q, err %q", code, out.String(), errb.String())
	}
	if code := Main(t.Context(), []string{"--bogus", "x", "doctor"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown flag --bogus") {
		t.Errorf("--bogus: exit %d, err %q", code, errb.String())
	}
}

// TestSubcommandHelp: `sluice documents -h` says what the subcommands are.
func TestSubcommandHelp(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"documents", "job", "workflow", "token", "migrate"} {
		var out, errb bytes.Buffer
		if code := Main(t.Context(), []string{cmd, "-h"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "Usage: sluice "+cmd) {
			t.Errorf("%s -h: exit %d, out %q, err %q", cmd, code, out.String(), errb.String())
		}
	}
}

// TestDataDirNotADatabase: a sluice.db that is not a database, or not a file, is an error naming
// it. Node.Open's clean-up called Close on the failed Open's nil *sqlite.DB, a panic.
func TestDataDirNotADatabase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{name: "garbage", make: func(p string) error { return os.WriteFile(p, bytes.Repeat([]byte("not sqlite "), 1000), 0o644) }, want: "file is not a database"},
		{name: "directory", make: func(p string) error { return os.Mkdir(p, 0o755) }, want: "unable to open database file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data := t.TempDir()
			db := filepath.Join(data, "sluice.db")
			if err := tc.make(db); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			code := Main(t.Context(), []string{"documents", "list", "--data", data}, &out, &errb)
			if code != 1 || !strings.Contains(errb.String(), db) || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("exit %d, %q; want 1 and a message naming %s: %s", code, errb.String(), db, tc.want)
			}
		})
	}
}

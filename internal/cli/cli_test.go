package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
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
		{"token", "create", "--data", data, "--role", "reader", "--name", "ci-bot"},
	} {
		var out, errb bytes.Buffer
		if code := Main(t.Context(), args, &out, &errb); code != 0 || len(strings.TrimSpace(out.String())) < 16 {
			t.Errorf("%q: exit %d, out %q, err %q", args, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Main(t.Context(), []string{"--data", data, "token", "list"}, &out, &errb); code != 0 || strings.Count(out.String(), "reader") != 3 || strings.Count(out.String(), "ci-bot") != 1 {
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

// TestEveryCommandHelpAndGlobalFlags is a table over every command and subcommand of the command
// table: -h, -help and --help print its usage on stdout and exit 0, and each global flag is
// accepted before the command and after it (`sluice --data D migrate copy` was refused:
// migrate copy had a flag set of its own without them). Help is asked for last, so the flags
// before it are parsed.
func TestEveryCommandHelpAndGlobalFlags(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	globals := [][]string{
		{"--data", filepath.Join(dir, "data")}, {"--data=" + filepath.Join(dir, "data")}, {"--database", "postgres://127.0.0.1:1/x"},
		{"--blobs", "s3://bucket/prefix"}, {"--config", filepath.Join(dir, "none.yaml")}, {"--log-format", "json"},
		{"-v"}, {"--lease", "45s"}, {"--max-item-depth", "8"}, {"--max-job-items", "100"},
	}
	type tc struct {
		name string
		cmd  []string
	}
	var cases []tc
	for _, c := range commands() {
		if len(c.subs) == 0 {
			cases = append(cases, tc{c.name, []string{c.name}})
		}
		for _, s := range c.subs {
			cases = append(cases, tc{c.name + " " + s, []string{c.name, s}})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, h := range []string{"-h", "-help", "--help"} {
				code, out, errs := run(t, append(slices.Clone(c.cmd), h)...)
				if code != ExitOK || errs != "" || !strings.Contains(out, "Usage: sluice "+c.cmd[0]) {
					t.Errorf("%s %s: exit %d, stdout %.80q, stderr %q; want 0 and the usage on stdout", c.name, h, code, out, errs)
				}
			}
			for _, g := range globals {
				for _, args := range [][]string{
					slices.Concat(g, c.cmd, []string{"-h"}),
					slices.Concat(c.cmd, g, []string{"-h"}),
				} {
					if code, out, errs := run(t, args...); code != ExitOK || !strings.Contains(out, "Usage: sluice "+c.cmd[0]) {
						t.Errorf("%q: exit %d, stderr %q; want the flag accepted", args, code, errs)
					}
				}
			}
		})
	}
}

// TestMigrateCopyGlobalFlags: migrate copy's --data is the data dir to copy (--from) and
// --database the target (--to); each may be given either way, not both differently.
func TestMigrateCopyGlobalFlags(t *testing.T) {
	clearEnv(t)
	empty := t.TempDir()
	for _, args := range [][]string{
		{"--data", empty, "migrate", "copy", "--to", "postgres://127.0.0.1:1/x"},
		{"migrate", "copy", "--data", empty, "--database", "postgres://127.0.0.1:1/x"},
		{"migrate", "copy", "--from", empty, "--database", "postgres://127.0.0.1:1/x"},
	} {
		code, _, errs := run(t, args...)
		if code != ExitFailed || !strings.Contains(errs, "no embedded installation in "+empty) {
			t.Errorf("%q: exit %d, %q; want 1 naming %s", args, code, errs, empty)
		}
	}
	code, _, errs := run(t, "--data", empty, "migrate", "copy", "--from", "elsewhere", "--to", "postgres://127.0.0.1:1/x")
	if code != ExitUsage || !strings.Contains(errs, "differ") {
		t.Errorf("--data and --from apart: exit %d, %q; want a usage error", code, errs)
	}
}

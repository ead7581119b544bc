package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the testdata/*/*.golden files with the current output")

// clearEnv unsets the variables that change defaults shown in help and config show.
func clearEnv(t *testing.T) {
	for _, k := range append([]string{"SLUICE_DATA", "SLUICE_DATABASE", "SLUICE_BLOBS", "SLUICE_CONFIG", "SLUICE_LOG_FORMAT",
		"SLUICE_EGRESS_ALLOW", "SLUICE_EGRESS_DENY", "SLUICE_HOST_DELAY", "AWS_REGION", "AWS_ENDPOINT_URL_S3", "SLUICE_SANDBOX"}, secretEnv...) {
		t.Setenv(k, "")
	}
}

// golden compares got with testdata/dir/name.golden, or writes it with -update.
func golden(t *testing.T, dir, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", dir, strings.NewReplacer(" ", "_", "/", "_").Replace(name)+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("%s differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(t.Context(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestHelpGolden: `sluice help`, and -h of every command and subcommand, print their usage, a
// description and at least one example on stdout with exit 0, as in testdata/help.
func TestHelpGolden(t *testing.T) {
	clearEnv(t)
	cases := [][]string{{"help"}}
	for _, c := range commands() {
		cases = append(cases, []string{c.name, "-h"})
		for _, s := range c.subs {
			cases = append(cases, []string{c.name, s, "--help"})
		}
	}
	for _, args := range cases {
		name := strings.Join(args[:len(args)-1], " ")
		if args[0] == "help" {
			name = "help"
		}
		code, out, errs := run(t, args...)
		if code != ExitOK || errs != "" {
			t.Errorf("%q: exit %d, stderr %q; want 0 and help on stdout", args, code, errs)
		}
		if !strings.Contains(out, "Usage: sluice") {
			t.Errorf("%q: no usage line in %q", args, out)
		}
		if len(args) == 3 || len(args) == 2 && !strings.Contains(out, "Subcommands:") && args[0] != "help" {
			if !strings.Contains(out, "Examples:\n  sluice ") && !strings.Contains(out, "Examples:\n  SLUICE_") && !strings.Contains(out, "Examples:\n  source") {
				t.Errorf("%q: no example in %q", args, out)
			}
		}
		golden(t, "help", name, out)
	}
	// Exit codes are documented in `sluice help`.
	_, out, _ := run(t, "help")
	for _, want := range []string{"0  done", "1  failed", "2  usage", "3  the data dir is locked"} {
		if !strings.Contains(out, want) {
			t.Errorf("sluice help does not document exit code %q", want)
		}
	}
}

// normalize replaces what changes from run to run (times, hashes, token ids, paths, worker
// names, the Go version) in JSON output.
func normalize(s, dir string) string {
	for _, r := range []struct{ re, with string }{
		{`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`, "<time>"},
		{`\b[0-9a-f]{64}\b`, "<sha256>"},
		{`"id": "[0-9a-f]+"`, `"id": "<token>"`},
		{`"go": "[^"]*"`, `"go": "<go>"`},
		{`"revision": "[^"]*"`, `"revision": "<revision>"`},
		{`"time": "[^"]*"`, `"time": "<time>"`},
		{`"worker": "[^"]*"`, `"worker": "<worker>"`},
		{`"modified": (true|false)`, `"modified": <modified>`},
		{`"version": "[^"]*"`, `"version": "<version>"`},
	} {
		s = regexp.MustCompile(r.re).ReplaceAllString(s, r.with)
	}
	return strings.ReplaceAll(s, dir, "<dir>")
}

// TestOutputJSONGolden: --output json of every listing and show is valid JSON as in
// testdata/json (docs/cli.md documents it); an empty listing is [] and never null.
func TestOutputJSONGolden(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if code, out, errs := run(t, "--data", data, "job", "list", "--output", "json"); code != 0 || out != "[]\n" {
		t.Fatalf("job list of an empty data dir: exit %d, %q, %q; want []", code, out, errs)
	}
	for _, args := range [][]string{{"workflow", "list"}, {"token", "list"}} {
		code, out, _ := run(t, append(append([]string{"--data", data}, args...), "--output", "json")...)
		var v any
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil || strings.TrimSpace(out) == "null" {
			t.Errorf("%q --output json on an empty data dir: exit %d, %q", args, code, out)
		}
	}
	txt := filepath.Join(dir, "a.txt")
	wf := filepath.Join(dir, "t.yaml")
	os.WriteFile(txt, []byte("hello world\n"), 0o644)
	os.WriteFile(wf, []byte("name: t\nsteps:\n  p: {action: pass, needs: [start]}\n"), 0o644)
	for _, args := range [][]string{{"ingest", txt}, {"run", wf, txt}, {"token", "create", "--role", "reader"}} {
		if code, out, errs := run(t, append([]string{"--data", data}, args...)...); code != 0 {
			t.Fatalf("%q: exit %d, %s %s", args, code, out, errs)
		}
	}
	for _, args := range [][]string{
		{"job", "list"}, {"job", "show", "2"}, {"workflow", "list"}, {"token", "list"},
		{"documents", "list"}, {"documents", "show", "2"}, {"config", "show"}, {"version"},
	} {
		code, out, errs := run(t, append(append([]string{"--data", data}, args...), "--output", "json")...)
		if code != 0 {
			t.Errorf("%q --output json: exit %d, %s", args, code, errs)
			continue
		}
		if !json.Valid([]byte(out)) {
			t.Errorf("%q --output json is not JSON: %q", args, out)
		}
		golden(t, "json", strings.Join(args, " "), normalize(out, dir))
	}
	// doctor depends on what this machine has installed: its shape, not its values.
	code, out, _ := run(t, "doctor", "--output", "json")
	var doc struct {
		Tools []struct {
			Name      string `json:"name"`
			Installed bool   `json:"installed"`
		} `json:"tools"`
		Sandbox map[string]any `json:"sandbox"`
		Fonts   map[string]any `json:"fonts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || len(doc.Tools) == 0 || doc.Tools[0].Name == "" || doc.Sandbox == nil || doc.Fonts == nil {
		t.Errorf("doctor --output json: exit %d, %v: %q", code, err, out)
	}
	if code, _, errs := run(t, "--data", data, "job", "list", "--output", "yaml"); code != ExitUsage || !strings.Contains(errs, "table or json") {
		t.Errorf("--output yaml: exit %d, %q; want a usage error", code, errs)
	}
	if code, _, errs := run(t, "--data", data, "job", "list", "--state", "done"); code != ExitUsage || !strings.Contains(errs, `"done" is not a job state: one of running, complete, failed, canceled`) {
		t.Errorf("--state done: exit %d, %q; want a usage error naming the job states", code, errs)
	}
}

// TestGlobalFlagsAnyPosition: a global flag works before the command, between the command and
// its subcommand, and after the subcommand, with the same result.
func TestGlobalFlagsAnyPosition(t *testing.T) {
	clearEnv(t)
	data := t.TempDir()
	if code, _, errs := run(t, "token", "--data", data, "create", "--role", "admin"); code != 0 {
		t.Fatalf("token --data D create: exit %d, %s", code, errs)
	}
	var first string
	for i, args := range [][]string{
		{"--data", data, "token", "list", "--output", "json"},
		{"token", "--data", data, "list", "--output", "json"},
		{"token", "list", "--data", data, "--output", "json"},
		{"token", "list", "--output", "json", "--data=" + data},
		{"token", "--data=" + data, "list", "-output=json"},
	} {
		code, out, errs := run(t, args...)
		if code != 0 || !strings.Contains(out, `"role": "admin"`) {
			t.Errorf("%q: exit %d, %q, %q", args, code, out, errs)
		}
		if i == 0 {
			first = out
		} else if out != first {
			t.Errorf("%q printed %q, not %q", args, out, first)
		}
	}
	if code, _, errs := run(t, "token", "--bogus", "list"); code != ExitUsage || !strings.Contains(errs, "unknown flag --bogus") {
		t.Errorf("token --bogus list: exit %d, %q", code, errs)
	}
}

// TestCompletionScripts: the bash, zsh and fish scripts are generated from the command table
// (every command, subcommand and a command's own flag is in each) and the bash one parses.
func TestCompletionScripts(t *testing.T) {
	clearEnv(t)
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, errs := run(t, "completion", sh)
		if code != 0 || errs != "" {
			t.Fatalf("completion %s: exit %d, %q", sh, code, errs)
		}
		for _, c := range commands() {
			if !strings.Contains(out, c.name) {
				t.Errorf("completion %s lacks the command %s", sh, c.name)
			}
			for _, s := range c.subs {
				if !strings.Contains(out, s) {
					t.Errorf("completion %s lacks %s %s", sh, c.name, s)
				}
			}
		}
		for _, fl := range []string{"max-upload-bytes", "follow", "path-root", "output", "from"} {
			if !strings.Contains(out, fl) {
				t.Errorf("completion %s lacks the flag --%s", sh, fl)
			}
		}
		path := filepath.Join(t.TempDir(), "sluice."+sh)
		os.WriteFile(path, []byte(out), 0o644)
		shell, err := exec.LookPath(sh)
		if err != nil {
			if sh == "bash" {
				t.Fatalf("bash is needed to check the bash script: %v", err)
			}
			t.Logf("%s not installed: its script is not syntax-checked", sh)
			continue
		}
		if b, err := exec.Command(shell, "-n", path).CombinedOutput(); err != nil {
			t.Errorf("%s -n on the %s script: %v\n%s", sh, sh, err, b)
		}
	}
	code, _, errs := run(t, "completion", "tcsh")
	if code != ExitUsage || !strings.Contains(errs, "unknown shell") {
		t.Errorf("completion tcsh: exit %d, %q", code, errs)
	}
}

package execaction

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
)

// run runs the exec action on an item holding data with the given settings.
func run(t *testing.T, ctx context.Context, with map[string]any, data []byte) (*actiontest.Recorder, *action.Task, error) {
	t.Helper()
	task := actiontest.NewTask(t, "dir/report.pdf", "application/pdf", data, with, map[string]any{"lang": "fra"})
	task.Item.ID = 42
	task.JobID = 7
	task.Item.Metadata = map[string]any{"k": "v"}
	rec := &actiontest.Recorder{}
	if err := New().Spec().Validate(with); err != nil {
		t.Fatalf("Validate(%v) = %v", with, err)
	}
	return rec, task, New().Run(ctx, task, rec)
}

func text(t *testing.T, rec *actiontest.Recorder) string {
	t.Helper()
	if rec.Text == nil {
		t.Fatal("text not set")
	}
	return *rec.Text
}

func TestInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		input   string
		command []any
		want    string
	}{
		{name: "stdin by default", command: []any{"cat"}, want: "hello blob"},
		{name: "stdin", input: "stdin", command: []any{"cat"}, want: "hello blob"},
		{name: "file", input: "file", command: []any{"cat", "{{.Input}}"}, want: "hello blob"},
		{name: "none", input: "none", command: []any{"cat"}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			with := map[string]any{"command": tt.command, "stdout": "text"}
			if tt.input != "" {
				with["input"] = tt.input
			}
			rec, _, err := run(t, t.Context(), with, []byte("hello blob"))
			if err != nil {
				t.Fatal(err)
			}
			if got := text(t, rec); got != tt.want {
				t.Fatalf("text = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestFileInputWithoutBlob(t *testing.T) {
	t.Parallel()
	task := actiontest.NewTask(t, "a", "", nil, map[string]any{"command": []any{"cat", "{{.Input}}"}, "input": "file"}, nil)
	task.Item.BlobSHA256 = ""
	if err := New().Run(t.Context(), task, &actiontest.Recorder{}); !action.IsPermanent(err) {
		t.Fatalf("Run = %v; want a permanent error", err)
	}
}

func TestTemplatedArgs(t *testing.T) {
	t.Parallel()
	with := map[string]any{
		"command": []any{"sh", "-c", `printf '%s\n' "$@"; pwd`, "sh",
			"{{.Item.Name}}", "{{.Item.ID}}", "{{.Item.ContentType}}", "{{.Item.Metadata.k}}",
			"{{.Item.Options.lang}}", "{{.Step}}", "{{.Job}}", "{{.TempDir}}", "{{.Input}}",
			`{{or .Item.Metadata.missing "default"}}`, "{{urlquery .Item.Name}}"},
		"input":  "file",
		"stdout": "text",
	}
	rec, task, err := run(t, t.Context(), with, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	input, _ := task.BlobPath(t.Context())
	wd, err := filepath.EvalSymlinks(task.TempDir)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{"dir/report.pdf", "42", "application/pdf", "v", "fra", "step", "7",
		task.TempDir, input, "default", "dir%2Freport.pdf", wd}, "\n") + "\n"
	if got := text(t, rec); got != want {
		t.Fatalf("output:\n%s\nwant:\n%s", got, want)
	}
}

func TestMissingTemplateValue(t *testing.T) {
	t.Parallel()
	with := map[string]any{"command": []any{"echo", "{{.Item.Metadata.missing}}"}}
	_, _, err := run(t, t.Context(), with, nil)
	if !action.IsPermanent(err) || !strings.Contains(err.Error(), "command[1]") {
		t.Fatalf("Run = %v; want a permanent error naming command[1]", err)
	}
}

func TestEnv(t *testing.T) {
	t.Parallel()
	with := map[string]any{
		"command": []any{"env"},
		"env":     map[string]any{"FOO": "{{.Item.ContentType}}", "LANG": "en_US.UTF-8"},
		"stdout":  "text",
	}
	rec, task, err := run(t, t.Context(), with, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for line := range strings.Lines(text(t, rec)) {
		k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		got[k] = v
	}
	want := map[string]string{"PATH": os.Getenv("PATH"), "HOME": task.TempDir, "TMPDIR": task.TempDir,
		"LANG": "en_US.UTF-8", "FOO": "application/pdf"}
	if len(got) != len(want) {
		t.Fatalf("environment = %v; want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q; want %q", k, got[k], v)
		}
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		exit          int
		wantEvents    []string
		wantErr       bool
		wantPermanent bool
	}{
		{name: "zero mapped", exit: 0, wantEvents: []string{"converted"}},
		{name: "non-zero mapped is success", exit: 3, wantEvents: []string{"skipped-no-text"}},
		{name: "permanent code", exit: 2, wantErr: true, wantPermanent: true},
		{name: "other code is transient", exit: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			with := map[string]any{
				"command":              []any{"sh", "-c", "echo 'bad pdf header' >&2; exit " + strconv.Itoa(tt.exit)},
				"outcomes":             map[string]any{"0": "converted", "3": "skipped-no-text"},
				"permanent_exit_codes": []any{2, 4.0},
			}
			rec, _, err := run(t, t.Context(), with, nil)
			if !tt.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(rec.Events, tt.wantEvents) {
					t.Fatalf("events = %v; want %v", rec.Events, tt.wantEvents)
				}
				return
			}
			if err == nil {
				t.Fatal("Run = nil; want an error")
			}
			if action.IsPermanent(err) != tt.wantPermanent {
				t.Fatalf("Run = %v; permanent = %v, want %v", err, action.IsPermanent(err), tt.wantPermanent)
			}
			want := fmt.Sprintf("status %d: bad pdf header", tt.exit)
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not contain %q", err, want)
			}
			if len(rec.Events) != 0 {
				t.Fatalf("events = %v on failure", rec.Events)
			}
		})
	}
}

// TestStdoutJSON checks how exec reads a JSON result (package result tests the object itself):
// its events join the exit code's outcome, and its error fails the item whatever the exit code.
func TestStdoutJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		stdout        string
		exit          int
		wantPermanent string // substring of the permanent error; empty for success
		wantEvents    []string
		wantTitle     any
	}{
		{name: "full", stdout: `{"events": ["has-text"], "metadata": {"title": "T"}, "text": "hello"}`,
			wantEvents: []string{"has-text", "converted"}, wantTitle: "T"},
		{name: "with mapped exit", stdout: `{"metadata": {"title": 3}}`, exit: 3,
			wantEvents: []string{"skipped-no-text"}, wantTitle: json.Number("3")},
		{name: "error", stdout: `{"error": "password protected"}`, wantPermanent: "password protected"},
		{name: "undeclared event", stdout: `{"events": ["surprise"]}`, wantPermanent: `stdout names event "surprise"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			with := map[string]any{
				"command":  []any{"sh", "-c", `printf '%s' "$1"; exit ` + strconv.Itoa(tt.exit), "sh", tt.stdout},
				"outcomes": map[string]any{"0": "converted", "3": "skipped-no-text"},
				"events":   []any{"has-text"},
				"stdout":   "json",
			}
			rec, _, err := run(t, t.Context(), with, nil)
			switch {
			case tt.wantPermanent != "":
				if !action.IsPermanent(err) || !strings.Contains(err.Error(), tt.wantPermanent) {
					t.Fatalf("Run = %v; want a permanent error containing %q", err, tt.wantPermanent)
				}
			case err != nil:
				t.Fatal(err)
			case !slices.Equal(rec.Events, tt.wantEvents) || rec.Metadata["title"] != tt.wantTitle:
				t.Errorf("events %v, metadata %v; want events %v and title %v", rec.Events, rec.Metadata, tt.wantEvents, tt.wantTitle)
			}
		})
	}
}

// TestStdoutJSONChildren has the command write a file in its directory and name it as a child,
// beside an inline one; a child path out of the directory is refused.
func TestStdoutJSONChildren(t *testing.T) {
	t.Parallel()
	script := `mkdir out && printf 'page one' > out/1.txt && ` +
		`printf '{"children": [{"name": "1.txt", "path": "out/1.txt"}, {"name": "note", "content": "hi", "metadata": {"n": 2}}]}'`
	rec, _, err := run(t, t.Context(), map[string]any{"command": []any{"sh", "-c", script}, "stdout": "json"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Children) != 2 || rec.Children[0].Name != "1.txt" || string(rec.Children[0].Data) != "page one" ||
		rec.Children[1].Name != "note" || string(rec.Children[1].Data) != "hi" || rec.Children[1].Metadata["n"] != json.Number("2") {
		t.Fatalf("children = %+v; want 1.txt (page one) and note (hi, n=2)", rec.Children)
	}

	escape := `printf '{"children": [{"name": "x", "path": "../../etc/passwd"}]}'`
	rec, _, err = run(t, t.Context(), map[string]any{"command": []any{"sh", "-c", escape}, "stdout": "json"}, nil)
	if !action.IsPermanent(err) || !strings.Contains(err.Error(), `path "../../etc/passwd"`) || len(rec.Children) != 0 {
		t.Fatalf("Run = %v with %d children; want a permanent error naming the path and no child", err, len(rec.Children))
	}
}

func TestStdoutTooLarge(t *testing.T) {
	t.Parallel()
	with := map[string]any{"command": []any{"head", "-c", strconv.Itoa(maxStdout + 1), "/dev/zero"}, "stdout": "text"}
	_, _, err := run(t, t.Context(), with, nil)
	if !action.IsPermanent(err) || !strings.Contains(err.Error(), "larger than 16 MiB") {
		t.Fatalf("Run = %v; want a permanent error about the size", err)
	}
}

func TestMissingBinary(t *testing.T) {
	t.Parallel()
	with := map[string]any{"command": []any{"sluice-no-such-program", "x"}}
	_, _, err := run(t, t.Context(), with, nil)
	if !action.IsPermanent(err) || !strings.Contains(err.Error(), `"sluice-no-such-program"`) {
		t.Fatalf("Run = %v; want a permanent error naming the program", err)
	}
}

// lingering is a command that leaves a background child running and writes the pids of the shell
// and of the child into files in its working directory.
var lingering = []any{"sh", "-c", "sleep 60 & echo $! > bg.pid; echo $$ > sh.pid; wait"}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	with := map[string]any{"command": lingering, "timeout": "1s"}
	_, task, err := run(t, t.Context(), with, nil)
	if err == nil || action.IsPermanent(err) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v; want a transient timeout error", err)
	}
	if !strings.Contains(err.Error(), "timed out after 1s") {
		t.Fatalf("error %q does not mention the timeout", err)
	}
	for _, name := range []string{"sh.pid", "bg.pid"} {
		waitDead(t, readPID(t, filepath.Join(task.TempDir, name)))
	}
}

func TestContextCancelKillsProcessGroup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	task := actiontest.NewTask(t, "a", "", nil, map[string]any{"command": lingering}, nil)
	done := make(chan error, 1)
	go func() { done <- New().Run(ctx, task, &actiontest.Recorder{}) }()

	var pids []int
	for _, name := range []string{"sh.pid", "bg.pid"} {
		path := filepath.Join(task.TempDir, name)
		waitFor(t, "pid file "+name, func() bool {
			b, err := os.ReadFile(path)
			return err == nil && bytes.HasSuffix(b, []byte("\n"))
		})
		pid := readPID(t, path)
		if !alive(pid) {
			t.Fatalf("process %d from %s is not running before cancel", pid, name)
		}
		pids = append(pids, pid)
	}
	cancel()
	actiontest.WantCanceled(t, done)
	for _, pid := range pids {
		waitDead(t, pid)
	}
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %s: %v", path, err)
	}
	return pid
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// waitDead waits until pid no longer runs.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("process %d to die", pid), func() bool { return !alive(pid) })
}

// alive reports whether pid runs. A killed child reparented to a process that does not reap it
// stays a zombie, which kill -0 still finds, so zombies count as dead.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

func TestSpec(t *testing.T) {
	t.Parallel()
	spec := New().Spec()
	if spec.Name != "exec" || spec.Version != "1" || spec.Doc == "" {
		t.Fatalf("spec = %+v", spec)
	}
	for _, s := range spec.Settings {
		if s.Doc == "" {
			t.Errorf("setting %s has no doc", s.Name)
		}
	}
	with := map[string]any{"command": []any{"true"}, "outcomes": map[string]any{"0": "b", "3": "a"},
		"events": []any{"c", "a"}}
	if got := spec.OutcomesFor(with); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("OutcomesFor = %v", got)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	cmd := []any{"true"}
	tests := []struct {
		name    string
		with    map[string]any
		wantKey string
	}{
		{name: "minimal", with: map[string]any{"command": cmd}},
		{name: "everything", with: map[string]any{"command": []string{"conv", "{{.Input}}", "{{.Item.Metadata.a.b}}"},
			"input": "file", "env": map[string]any{"A_1": "{{.Job}}"}, "timeout": "30s",
			"outcomes": map[string]any{"0": "ok", "255": "odd"}, "events": []any{"e"}, "stdout": "json",
			"permanent_exit_codes": []any{1, 2}}},
		{name: "missing command", with: map[string]any{}, wantKey: "command"},
		{name: "empty command", with: map[string]any{"command": []any{}}, wantKey: "command"},
		{name: "empty program", with: map[string]any{"command": []any{" "}}, wantKey: "command"},
		{name: "bad template", with: map[string]any{"command": []any{"echo", "{{.Item.Name"}}, wantKey: "command"},
		{name: "unknown function", with: map[string]any{"command": []any{"echo", "{{nope .Item.Name}}"}}, wantKey: "command"},
		{name: "unknown field", with: map[string]any{"command": []any{"echo", "{{.Item.Nam}}"}}, wantKey: "command"},
		{name: "unknown top field", with: map[string]any{"command": []any{"echo", "{{.Blob}}"}}, wantKey: "command"},
		{name: "unknown env field", with: map[string]any{"command": cmd, "env": map[string]any{"A": "{{.Nope}}"}}, wantKey: "env"},
		{name: "bad env name", with: map[string]any{"command": cmd, "env": map[string]any{"A=B": "x"}}, wantKey: "env"},
		{name: "unknown input", with: map[string]any{"command": cmd, "input": "pipe"}, wantKey: "input"},
		{name: "unknown stdout", with: map[string]any{"command": cmd, "stdout": "yaml"}, wantKey: "stdout"},
		{name: "outcome key not a code", with: map[string]any{"command": cmd, "outcomes": map[string]any{"ok": "x"}}, wantKey: "outcomes"},
		{name: "outcome key out of range", with: map[string]any{"command": cmd, "outcomes": map[string]any{"256": "x"}}, wantKey: "outcomes"},
		{name: "outcome key not canonical", with: map[string]any{"command": cmd, "outcomes": map[string]any{"03": "x"}}, wantKey: "outcomes"},
		{name: "outcome empty event", with: map[string]any{"command": cmd, "outcomes": map[string]any{"0": ""}}, wantKey: "outcomes"},
		{name: "permanent zero", with: map[string]any{"command": cmd, "permanent_exit_codes": []any{0}}, wantKey: "permanent_exit_codes"},
		{name: "permanent also outcome", with: map[string]any{"command": cmd, "outcomes": map[string]any{"3": "x"},
			"permanent_exit_codes": []any{3}}, wantKey: "permanent_exit_codes"},
		{name: "empty event", with: map[string]any{"command": cmd, "events": []any{""}}, wantKey: "events"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			actiontest.CheckSettings(t, New(), tt.with, tt.wantKey)
		})
	}
}

package converter

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/subprocess"
)

func TestNotInstalledError(t *testing.T) {
	t.Parallel()
	err := NotInstalledError("soffice")
	want := "office conversion needs LibreOffice: apt-get install libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui"
	if !action.IsPermanent(err) || err.Error() != want {
		t.Errorf("err = %v, want permanent %q", err, want)
	}
}

func TestRunMissingTool(t *testing.T) {
	t.Parallel()
	r := &Runner{Dir: t.TempDir()}
	err := r.Run(t.Context(), "sluice-no-such-tool", nil, nil)
	if !action.IsPermanent(err) || !strings.Contains(err.Error(), "sluice-no-such-tool is not installed") {
		t.Errorf("err = %v", err)
	}
}

func TestRunTimeout(t *testing.T) {
	t.Parallel()
	r := &Runner{Dir: t.TempDir(), Limits: Limits{Timeout: 50 * time.Millisecond}}
	// The tool's own end is an hour away; the context's is a backstop. Run must return because
	// of the limit (the tool killed), not because the context ended.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	err := r.Run(ctx, "sleep", []string{"3600"}, nil)
	if ctx.Err() != nil {
		t.Fatalf("Run returned only when the context ended (%v): the timed-out tool was not killed", err)
	}
	if !action.IsPermanent(err) || !strings.Contains(err.Error(), "sleep timed out after 50ms") {
		t.Errorf("err = %v", err)
	}
}

func TestRunCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	r := &Runner{Dir: t.TempDir(), Heartbeat: func() {}}
	done := make(chan error)
	go func() { done <- r.Run(ctx, "sleep", []string{"30"}, nil) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestFailure(t *testing.T) {
	t.Parallel()
	r := &Runner{Dir: t.TempDir()}
	err := Failure("read thing", r.Run(t.Context(), "sh", []string{"-c", "echo 'Syntax Error: Bad Thing' >&2; echo 'Syntax Error (12): Worse thing' >&2; exit 2"}, nil))
	if !action.IsPermanent(err) || err.Error() != "read thing: bad Thing; worse thing" {
		t.Errorf("err = %v", err)
	}
}

func TestCombined(t *testing.T) {
	t.Parallel()
	r := &Runner{Dir: t.TempDir()}
	out, err := r.Combined(t.Context(), "sh", 1024, "-c", "echo out; echo err >&2")
	if err != nil || !strings.Contains(string(out), "out") || !strings.Contains(string(out), "err") {
		t.Errorf("out = %q, err = %v", out, err)
	}
}

func TestCleanMessage(t *testing.T) {
	t.Parallel()
	in := "Syntax Error: A\nSyntax Error: A\n\nWarning: failed to launch javaldx - java may not function correctly\nSyntax Error: B\nC\nD\nE\n"
	if got, want := CleanMessage(in), "b; c; d; e"; got != want {
		t.Errorf("CleanMessage = %q, want %q", got, want)
	}
}

func TestParseSettings(t *testing.T) {
	t.Parallel()
	c, err := ParseSettings(map[string]any{"timeout": "5s", "memory_limit": float64(1 << 30), "max_text_chars": 10})
	if err != nil || c.Limits.Timeout != 5*time.Second || c.Limits.MemoryLimit != 1<<30 || c.MaxTextChars != 10 {
		t.Errorf("got %+v, %v", c, err)
	}
	if _, err := ParseSettings(map[string]any{"timeout": "soon"}); !action.IsPermanent(err) {
		t.Errorf("bad timeout: err = %v", err)
	}
	d, err := ParseSettings(nil)
	if err != nil || d.Limits.Timeout != DefaultTimeout || d.Limits.MemoryLimit != DefaultMemoryLimit || d.MaxTextChars != 1_000_000 {
		t.Errorf("defaults %+v, %v", d, err)
	}
}

func TestTesseractLang(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "eng", "fr": "fra", "pt-BR": "por", "zh-TW": "chi_tra", "zh": "chi_sim", "deu": "deu", "eng+fra": "eng+fra"} {
		if got := TesseractLang(in); got != want {
			t.Errorf("TesseractLang(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDoctor(t *testing.T) {
	t.Parallel()
	st := Doctor(t.Context())
	if len(st) != len(Tools()) {
		t.Fatalf("%d statuses for %d tools", len(st), len(Tools()))
	}
	for _, s := range st {
		if s.Package == "" || s.Impact == "" {
			t.Errorf("%s: empty package or impact", s.Name)
		}
		if s.Installed && s.Path == "" {
			t.Errorf("%s: installed without a path", s.Name)
		}
		t.Logf("%-14s installed=%-5v %-45q %s", s.Name, s.Installed, s.Version, s.Path)
	}
}

// TestSandboxRefused: where the kernel refuses the sandbox's namespaces, each conversion fails
// with a permanent error that says so, naming the tool; it never runs unsandboxed.
func TestSandboxRefused(t *testing.T) {
	fake := t.TempDir()
	// bwrap's own words when user namespaces are off.
	script := "#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(fake, "bwrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", fake+":/usr/bin:/bin")
	marker := filepath.Join(t.TempDir(), "ran")
	r := &Runner{Dir: t.TempDir()}
	err := r.Run(t.Context(), "touch", []string{marker}, nil)
	if !action.IsPermanent(err) || !strings.Contains(err.Error(), "touch: converter sandbox unavailable: bwrap: No permissions to create new namespace") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatal("the tool ran unsandboxed")
	}
}

// TestFailureCrashIsTransient: a converter that dies by a signal or with a crash trace is a
// transient failure (retried) with a one-sentence message, its trace in the log; out of memory
// and a plain exit are permanent. Not parallel: it reads the process's default logger.
func TestFailureCrashIsTransient(t *testing.T) {
	var logs poll.Buffer
	defer func(l *slog.Logger) { slog.SetDefault(l) }(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	trace := "Fatal exception: Signal 6\nStack:\n/usr/lib/libreoffice/program/libuno_sal.so.3(+0x41234)[0x7fcef8e86732]\n" +
		"/usr/lib/libreoffice/program/libmergedlo.so(_Z7DpResId11TranslateId+0x9b)[0x7fcef7a2edcb]\n"
	for _, tt := range []struct {
		name      string
		ee        *subprocess.ExitError
		want      string
		permanent bool
	}{
		{"trace", &subprocess.ExitError{Path: "soffice", Code: 134, Stderr: trace}, "office conversion: soffice crashed (a crash trace, exit status 134)", false},
		{"signal", &subprocess.ExitError{Path: "soffice", Code: -1, Signal: "segmentation fault"}, "office conversion: soffice crashed (killed by segmentation fault)", false},
		{"oom", &subprocess.ExitError{Path: "soffice", Code: -1, Signal: "aborted", Stderr: "terminate called after throwing an instance of 'std::bad_alloc'"}, "office conversion: soffice ran out of memory (aborted)", true},
		{"exit", &subprocess.ExitError{Path: "soffice", Code: 1, Stderr: "Error: source file could not be loaded"}, "office conversion: source file could not be loaded", true},
	} {
		err := Failure("office conversion", tt.ee)
		if err.Error() != tt.want || action.IsPermanent(err) != tt.permanent {
			t.Errorf("%s: err = %q (permanent %v), want %q (permanent %v)", tt.name, err, action.IsPermanent(err), tt.want, tt.permanent)
		}
	}
	if !strings.Contains(logs.String(), "libuno_sal.so.3(+0x41234)") {
		t.Errorf("the crash trace is not in the log:\n%s", logs.String())
	}
}

// TestRunSteps: the steps run in order in one sandboxed run, each whatever the previous one's
// exit; each keeps its stdout (bounded), its exit status and its stderr, a death by a signal is
// one; nothing of theirs stays in the runner's dir; a missing tool fails the run before any step.
func TestRunSteps(t *testing.T) {
	t.Parallel()
	r := &Runner{Dir: t.TempDir()}
	res, err := r.RunSteps(t.Context(), "steps", []Step{
		{Tool: "sh", Args: []string{"-c", "echo first >order; echo bad input >&2; exit 3"}},
		{Tool: "sh", Args: []string{"-c", "cat order; echo second >>order"}, MaxStdout: 100},
		{Tool: "sh", Args: []string{"-c", "head -c 101 /dev/zero"}, MaxStdout: 100},
		{Tool: "sh", Args: []string{"-c", "kill -SEGV $$"}},
		{Tool: "sh", Args: []string{"-c", `printf '%s|%s\n' "$0" "it's $1"`, "a b"}, MaxStdout: 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ee *subprocess.ExitError
	if !errors.As(res[0].Err, &ee) || ee.Code != 3 || strings.TrimSpace(ee.Stderr) != "bad input" || ee.Path != "sh" {
		t.Errorf("step 0: %v (%+v), want exit status 3 with its stderr", res[0].Err, ee)
	}
	if res[1].Err != nil || string(res[1].Stdout) != "first\n" {
		t.Errorf("step 1: %q, %v; want the first step's output", res[1].Stdout, res[1].Err)
	}
	if !action.IsPermanent(res[2].Err) || !strings.Contains(res[2].Err.Error(), "output larger than 100 bytes") {
		t.Errorf("step 2: %v, want output larger than 100 bytes", res[2].Err)
	}
	if !errors.As(res[3].Err, &ee) || ee.Signal != "segmentation fault" {
		t.Errorf("step 3: %v, want killed by SIGSEGV", res[3].Err)
	}
	if got := string(res[4].Stdout); res[4].Err != nil || got != "a b|it's \n" {
		t.Errorf("step 4 printed %q, %v", got, res[4].Err)
	}
	if b, err := os.ReadFile(filepath.Join(r.Dir, "order")); err != nil || string(b) != "first\nsecond\n" {
		t.Errorf("order: %q, %v", b, err)
	}
	entries, _ := os.ReadDir(r.Dir)
	if len(entries) != 1 {
		t.Errorf("%d entries left in the runner's dir, want the steps' own file alone", len(entries))
	}
	_, err = r.RunSteps(t.Context(), "steps", []Step{{Tool: "sh", Args: []string{"-c", "touch ran"}}, {Tool: "sluice-no-such-tool"}})
	if !action.IsPermanent(err) || !strings.Contains(err.Error(), "sluice-no-such-tool is not installed") {
		t.Errorf("missing tool: %v", err)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "ran")); err == nil {
		t.Error("a step ran though a tool of the run is missing")
	}
}

package converter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/sandbox"
	"github.com/sluice-project/sluice/internal/subprocess"
	"github.com/sluice-project/sluice/internal/tracing"
)

// Defaults for [Limits].
const (
	DefaultTimeout     = 120 * time.Second
	DefaultMemoryLimit = 2 << 30
)

// heartbeatEvery is how often [Runner] calls its Heartbeat while a tool runs.
const heartbeatEvery = 10 * time.Second

// Limits bound one run of a tool.
type Limits struct {
	// Timeout bounds each run. Defaults to [DefaultTimeout].
	Timeout time.Duration `with:"timeout" doc:"time limit of each external tool run. Defaults to 120s."`
	// MemoryLimit caps the tool's address space in bytes. Negative means no limit (needed for
	// Chromium, whose sandboxed allocator reserves terabytes of address space).
	// Defaults to [DefaultMemoryLimit].
	MemoryLimit int64 `with:"memory_limit" doc:"address-space limit of each external tool in bytes. Defaults to 2 GiB."`
}

func (l Limits) withDefaults() Limits {
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.MemoryLimit == 0 {
		l.MemoryLimit = DefaultMemoryLimit
	}
	return l
}

// Runner runs tools for one task. The zero value runs with the default limits in the current
// directory and no heartbeats. A Runner is not safe for concurrent use when Heartbeat is set,
// because an [action.Output] accepts calls from one goroutine at a time.
type Runner struct {
	Limits Limits
	// Dir is the working directory and HOME of the tool; use the task's TempDir.
	Dir string
	// Env adds variables to the minimal environment (PATH, HOME=Dir, LANG=C.UTF-8).
	Env []string
	// Heartbeat, when set, is called periodically while a tool runs.
	Heartbeat func()

	staged map[string]string // input path → its copy in Dir, see Stage
}

// Stage returns a path inside r.Dir holding the file at path (the task's blob), for a tool to
// read: the sandbox shows a tool nothing outside its directory. Each input is copied once per
// Runner. Callers pass the returned path to the tool.
func (r *Runner) Stage(path string) (string, error) {
	if r.Dir == "" {
		return "", errors.New("stage input: the runner has no directory")
	}
	if within(r.Dir, path) {
		return path, nil
	}
	if p, ok := r.staged[path]; ok {
		return p, nil
	}
	dst := filepath.Join(r.Dir, fmt.Sprintf("input-%d%s", len(r.staged)+1, filepath.Ext(path)))
	if err := CopyFile(path, dst); err != nil {
		return "", fmt.Errorf("stage input: %w", err)
	}
	if r.staged == nil {
		r.staged = map[string]string{}
	}
	r.staged[path] = dst
	return dst, nil
}

func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// CopyFile copies the file at src to a new file dst (mode 0600); dst must not exist.
func CopyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Run runs tool with args, writing its stdout to stdout (which may be nil). It returns
// [NotInstalledError] when the tool is missing, a permanent "timed out" error when the run
// exceeds the timeout, ctx.Err() when ctx ends, and a [*subprocess.ExitError] when the tool
// fails; pass that to [Failure] to turn it into a message for users.
func (r *Runner) Run(ctx context.Context, tool string, args []string, stdout io.Writer) error {
	return r.run(ctx, tool, args, stdout, nil)
}

// RunFiles is [Runner.Run] for a tool that also inherits files as descriptors 3, 4, … (Chromium's
// DevTools pipe); its stderr is kept for errors.
func (r *Runner) RunFiles(ctx context.Context, tool string, args []string, files []*os.File, stdout io.Writer) error {
	return r.runFiles(ctx, tool, args, stdout, nil, files)
}

func (r *Runner) run(ctx context.Context, tool string, args []string, stdout, stderr io.Writer) error {
	return r.runFiles(ctx, tool, args, stdout, stderr, nil)
}

func (r *Runner) runFiles(ctx context.Context, tool string, args []string, stdout, stderr io.Writer, files []*os.File) (err error) {
	return r.runSandboxed(ctx, tool, tool, args, stdout, stderr, files, nil)
}

// runTools runs tool (a shell) with args, and the programs it runs, tools, bound into its
// sandbox; name stands for it in its errors.
func (r *Runner) runTools(ctx context.Context, name, tool string, args, tools []string) error {
	return r.runSandboxed(ctx, name, tool, args, nil, nil, nil, tools)
}

func (r *Runner) runSandboxed(ctx context.Context, name, tool string, args []string, stdout, stderr io.Writer, files []*os.File, tools []string) (err error) {
	ctx, span := tracing.Converter(ctx, filepath.Base(name))
	defer func() { tracing.End(span, err) }()
	lim := r.Limits.withDefaults()
	dir := r.Dir
	if dir == "" {
		// Every tool runs in a scratch dir of its own: the sandbox shows it nothing else.
		d, err := os.MkdirTemp("", "sluice-run-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	c := r.command(tool, args, dir, lim)
	c.Stdout, c.Stderr, c.Timeout, c.ExtraFiles = stdout, stderr, lim.Timeout, files
	c.Sandbox.Tools = tools
	if r.Heartbeat != nil {
		done := make(chan struct{})
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			t := time.NewTicker(heartbeatEvery)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					r.Heartbeat()
				case <-done:
					return
				}
			}
		}()
		defer func() { close(done); <-stopped }()
	}
	err = subprocess.Run(ctx, c)
	if err == nil {
		return nil
	}
	if err := startError(tool, err); err != nil {
		return err
	}
	var ee *subprocess.ExitError
	if errors.As(err, &ee) && ee.TimedOut {
		return action.Permanentf("%s timed out after %s", name, lim.Timeout)
	}
	if ee != nil && tools != nil {
		ee.Path = name
	}
	return err
}

// command returns the command that runs tool in dir: the minimal environment plus r.Env, the
// converter sandbox, lim's memory limit.
func (r *Runner) command(tool string, args []string, dir string, lim Limits) subprocess.Cmd {
	env := []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "LC_ALL=C.UTF-8",
		// tesseract's OpenMP threads oversubscribe the CPUs when workers run in parallel.
		"OMP_THREAD_LIMIT=1"}
	env = append(env, "HOME="+dir, "TMPDIR="+dir)
	env = append(env, r.Env...)
	c := subprocess.Cmd{Path: tool, Args: args, Dir: dir, Env: env, Sandbox: &sandbox.Spec{}}
	if lim.MemoryLimit > 0 {
		c.MemoryLimit = lim.MemoryLimit
	}
	return c
}

// startError turns an error that kept tool from starting into the one a run returns: a
// [NotInstalledError], or a permanent error naming why the sandbox is unavailable. It returns
// nil for other errors.
func startError(tool string, err error) error {
	if errors.Is(err, subprocess.ErrNotInstalled) {
		return NotInstalledError(tool)
	}
	var ue *sandbox.UnavailableError
	if errors.As(err, &ue) {
		return action.Permanentf("%s: %v", tool, ue)
	}
	return nil
}

// Start starts tool as [Runner.RunFiles] runs it — the same environment, sandbox and memory
// limit, files inherited as descriptors 3, 4, … — and returns without waiting: a converter kept
// running for several documents. Its stderr goes to stderr. Nothing but ctx bounds its time;
// the caller bounds each use and must call [subprocess.Process.Stop]. Its CPU time is bounded
// as one run's: a converter that uses up a run's budget dies. r.Dir is required; Heartbeat is
// not called. It returns the errors Run returns for a tool that did not start.
func (r *Runner) Start(ctx context.Context, tool string, args []string, files []*os.File, stderr io.Writer) (*subprocess.Process, error) {
	if r.Dir == "" {
		return nil, fmt.Errorf("start %s: the runner has no directory", tool)
	}
	lim := r.Limits.withDefaults()
	c := r.command(tool, args, r.Dir, lim)
	c.Stderr, c.ExtraFiles = stderr, files
	// CPU seconds over all threads: twice the time limit, as subprocess gives a run.
	c.Sandbox.CPU = int64(2*lim.Timeout/time.Second) + 1
	p, err := subprocess.Start(ctx, c)
	if err != nil {
		if serr := startError(tool, err); serr != nil {
			return nil, serr
		}
		return nil, err
	}
	return p, nil
}

// Output runs tool and returns its stdout, at most max bytes.
func (r *Runner) Output(ctx context.Context, tool string, max int64, args ...string) ([]byte, error) {
	var buf bytes.Buffer
	err := r.OutputTo(ctx, &buf, tool, max, args...)
	return buf.Bytes(), err
}

// OutputTo is [Runner.Output] writing into buf, which a caller may reuse.
func (r *Runner) OutputTo(ctx context.Context, buf *bytes.Buffer, tool string, max int64, args ...string) error {
	lw := &subprocess.LimitWriter{W: buf, N: max}
	err := r.Run(ctx, tool, args, lw)
	if lw.Over {
		return action.Permanentf("%s: output larger than %d bytes", tool, max)
	}
	return err
}

// Failure turns an error from [Runner.Run] into the error an action returns. Errors that are
// already permanent, and context errors, pass through. A tool that ran out of memory (killed under
// its memory limit, or saying bad_alloc) becomes the permanent "<what>: <tool> ran out of memory
// (…)"; one that crashed otherwise — killed by a signal, or printing a crash trace, as LibreOffice
// now and then does on a loaded machine — becomes the transient "<what>: <tool> crashed (…)",
// retried like any transient error, with the trace logged rather than shown; one that exited
// non-zero becomes the permanent "<what>: <the tool's cleaned-up message>". Other errors (the
// tool could not be started) stay transient.
func Failure(what string, err error) error {
	if err == nil || action.IsPermanent(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ee *subprocess.ExitError
	if !errors.As(err, &ee) {
		return fmt.Errorf("%s: %w", what, err)
	}
	low := strings.ToLower(ee.Stderr)
	oom := strings.Contains(low, "bad_alloc") || strings.Contains(low, "out of memory") ||
		strings.Contains(low, "cannot allocate memory")
	crashed := ee.Signal != "" || crashTrace(ee.Stderr)
	switch {
	case oom:
		how := ee.Signal
		if how == "" {
			how = fmt.Sprintf("exit status %d", ee.Code)
		}
		return action.Permanentf("%s: %s ran out of memory (%s)", what, ee.Path, how)
	case crashed:
		how := "killed by " + ee.Signal
		if ee.Signal == "" {
			how = fmt.Sprintf("a crash trace, exit status %d", ee.Code)
		}
		slog.Warn("converter crashed; the task will be retried", "tool", ee.Path, "what", what, "how", how, "stderr", ee.Stderr)
		return fmt.Errorf("%s: %s crashed (%s)", what, ee.Path, how)
	}
	if msg := CleanMessage(ee.Stderr); msg != "" {
		return action.Permanentf("%s: %s", what, msg)
	}
	return action.Permanentf("%s: %s exited with status %d", what, ee.Path, ee.Code)
}

// crashTrace reports whether a tool's stderr holds a crash trace: LibreOffice's "Fatal
// exception" or a glibc backtrace of shared-object frames ("libmergedlo.so(+0x1dd4608)[…]").
func crashTrace(stderr string) bool {
	return strings.Contains(stderr, "Fatal exception") || strings.Contains(stderr, "Unspecified Application Error") ||
		backtraceFrame.MatchString(stderr)
}

var backtraceFrame = regexp.MustCompile(`\.so(\.\d+)*\([^)]*\+0x[0-9a-f]+\)\[0x[0-9a-f]+\]`)

// CleanMessage makes a tool's stderr readable in one line: it drops blank and duplicate lines and
// noise such as poppler's "Syntax Error: " and "Internal Error: " prefixes, lowercases the first
// letter of each line, and joins the last four with "; ", capped at 300 bytes.
func CleanMessage(stderr string) string {
	seen := map[string]bool{}
	var parts []string
	for _, line := range strings.Split(stderr, "\n") {
		line = strings.TrimSpace(line)
		for _, p := range []string{"Syntax Error: ", "Syntax Error (", "Internal Error: ", "Syntax Warning: ", "Command Line Error: ", "I/Error: ", "Error: ", "WARNING: ", "error: "} {
			if strings.HasPrefix(line, p) {
				if strings.HasSuffix(p, "(") {
					// "Syntax Error (123): msg" → "msg"
					if i := strings.Index(line, "): "); i > 0 {
						line = line[i+3:]
					}
				} else {
					line = strings.TrimPrefix(line, p)
				}
				break
			}
		}
		// "(vips:1244): VIPS-WARNING **: 00:52:46.478: msg" → "msg"
		line = strings.TrimSpace(glibPrefix.ReplaceAllString(line, ""))
		if line == "" || seen[line] || isNoise(line) {
			continue
		}
		seen[line] = true
		parts = append(parts, line)
	}
	for i, p := range parts {
		if p[0] >= 'A' && p[0] <= 'Z' && (len(p) == 1 || p[1] < 'A' || p[1] > 'Z') {
			parts[i] = strings.ToLower(p[:1]) + p[1:]
		}
	}
	// Tools print the cause last ("… couldn't read page catalog"): keep the end of a long message.
	if len(parts) > 4 {
		parts = parts[len(parts)-4:]
	}
	for len(parts) > 1 && len(strings.Join(parts, "; ")) > 300 {
		parts = parts[1:]
	}
	msg := strings.Join(parts, "; ")
	if len(msg) > 300 {
		cut := 300
		for cut > 0 && msg[cut]&0xc0 == 0x80 {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

var glibPrefix = regexp.MustCompile(`^\(\S+:\d+\): [\w-]+ \*\*: [\d:.]+: `)

func isNoise(line string) bool {
	for _, n := range []string{"javaldx", "Warning: failed to launch", "Estimating resolution", "Detected ", "DevTools listening", "dbus", "Fontconfig"} {
		if strings.Contains(line, n) {
			return true
		}
	}
	return false
}

// Combined runs tool and returns its stdout and stderr interleaved, at most limit bytes (the tail
// is kept in a failure's [subprocess.ExitError]). It is for tools such as LibreOffice that
// report failure on stdout or stderr while exiting 0.
func (r *Runner) Combined(ctx context.Context, tool string, limit int64, args ...string) ([]byte, error) {
	var buf bytes.Buffer
	lw := &subprocess.LimitWriter{W: &buf, N: limit}
	err := r.run(ctx, tool, args, lw, lw)
	var ee *subprocess.ExitError
	if errors.As(err, &ee) && ee.Stderr == "" {
		b := buf.Bytes()
		ee.Stderr = string(bytes.TrimSpace(b[max(0, len(b)-4096):]))
	}
	return buf.Bytes(), err
}

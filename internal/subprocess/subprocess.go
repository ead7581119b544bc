// Package subprocess runs external tools the way Sluice needs them run (DESIGN §5): in their own
// process group, under a timeout, optionally under an address-space limit, and killed as a whole
// group when the context ends, so a converter's grandchildren never outlive the task — nor the
// process: a tool dies with a killed Sluice (the sandbox's pid namespace, or a guard for an
// unsandboxed one), and [Records] lets the next engine reap what a killed one left.
package subprocess

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-project/sluice/internal/sandbox"
)

// Cmd describes one run of a tool.
type Cmd struct {
	// Path is the program; looked up in PATH when it has no slash.
	Path string
	Args []string
	// Dir is the working directory. Defaults to the current one.
	Dir string
	// Env is the complete environment. Nil means a minimal one: PATH, HOME=Dir, LANG=C.UTF-8.
	Env    []string
	Stdin  io.Reader
	Stdout io.Writer
	// ExtraFiles are open files the tool inherits as descriptors 3, 4, …
	ExtraFiles []*os.File
	// Stderr, when nil, is captured (last 4 KiB) into [ExitError.Stderr].
	Stderr io.Writer
	// Timeout bounds the run; zero means only the context bounds it.
	Timeout time.Duration
	// MemoryLimit, when positive, caps the process's address space in bytes (via prlimit(1)
	// when it is installed: Go cannot set rlimits for a child directly).
	MemoryLimit int64
	// Sandbox, when set, runs the tool as hostile code in [sandbox.Command]'s sandbox, seeing
	// only Dir (read-write) and the sandbox's inputs, unless the sandbox is turned off
	// ([sandbox.Off]). Dir is required with it.
	Sandbox *sandbox.Spec
}

// ExitError is returned when the tool ran but exited non-zero or was killed.
type ExitError struct {
	Path     string
	Code     int    // -1 when killed by a signal
	Signal   string // set when killed by a signal
	Stderr   string // tail of stderr, when captured
	TimedOut bool
}

func (e *ExitError) Error() string {
	switch {
	case e.TimedOut:
		return fmt.Sprintf("%s timed out", e.Path)
	case e.Signal != "":
		return fmt.Sprintf("%s killed by %s%s", e.Path, e.Signal, tail(e.Stderr))
	default:
		return fmt.Sprintf("%s exited with status %d%s", e.Path, e.Code, tail(e.Stderr))
	}
}

func tail(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// ErrNotInstalled is returned (wrapped) when the program cannot be found.
var ErrNotInstalled = errors.New("not installed")

// Run runs c and waits for it. It returns an [*ExitError] for a non-zero exit, a kill or a timeout,
// an error wrapping [ErrNotInstalled] when the program is missing, and ctx.Err() when the context
// ended first. The whole process group is killed when the run ends early, and when this process
// dies. Under a context from [WithRecords], the tool is recorded while it runs.
func Run(ctx context.Context, c Cmd) error {
	path, err := exec.LookPath(c.Path)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Path, ErrNotInstalled)
	}
	tool, args := path, c.Args
	if c.MemoryLimit > 0 && (c.Sandbox == nil || sandbox.CurrentMode() == sandbox.Off) {
		if pl, err := exec.LookPath("prlimit"); err == nil {
			args = append([]string{"--as=" + strconv.FormatInt(c.MemoryLimit, 10), "--", path}, args...)
			path = pl
		}
	}
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	env := c.Env
	if env == nil {
		home := c.Dir
		if home == "" {
			home = os.TempDir()
		}
		env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8", "LC_ALL=C.UTF-8"}
	}
	var cmd *exec.Cmd
	guardGroup := 0 // the group an unsandboxed tool is started into, led by its guard (startGuard)
	sandboxed := c.Sandbox != nil && sandbox.CurrentMode() == sandbox.On
	if sandboxed {
		spec := *c.Sandbox
		spec.Scratch, spec.Env, spec.ExtraFiles = c.Dir, env, c.ExtraFiles
		if spec.Memory == 0 {
			spec.Memory = c.MemoryLimit
		}
		if spec.CPU == 0 && c.Timeout > 0 {
			// CPU seconds over all threads: twice the wall-clock limit leaves room for two cores.
			spec.CPU = int64(2*c.Timeout/time.Second) + 1
		}
		var cleanup func()
		cmd, cleanup, err = sandbox.Command(tool, c.Args, spec)
		if err != nil {
			return err
		}
		defer cleanup()
		defer sandbox.Sanitize(c.Dir) //nolint:errcheck // best effort; what is left is regular files
	} else {
		cmd = exec.Command(path, args...)
		cmd.Dir = c.Dir
		cmd.Env = env
		cmd.ExtraFiles = c.ExtraFiles
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		var stopGuard func()
		if guardGroup, stopGuard = startGuard(); guardGroup != 0 {
			cmd.SysProcAttr.Pgid = guardGroup
		}
		defer stopGuard()
	}
	cmd.Stdin = c.Stdin
	cmd.Stdout = c.Stdout
	var errTail *tailBuffer
	if c.Stderr != nil {
		cmd.Stderr = c.Stderr
	} else {
		errTail = &tailBuffer{max: 4096}
		cmd.Stderr = errTail
	}
	// A grandchild left in the background can hold our stdout/stderr pipes open; without a
	// WaitDelay, Wait would block until it exits. The group is killed after Wait anyway.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		var ue *sandbox.UnavailableError
		if sandboxed && errors.As(sandbox.StartError(err), &ue) {
			return ue
		}
		return fmt.Errorf("start %s: %w", c.Path, err)
	}
	// The group kill below is the last thing Run does to the tool; the record and the guard
	// go after it (defers run last in, first out).
	defer recordsFrom(ctx).add(cmd.Process.Pid, c.Path)()
	pgid := cmd.Process.Pid
	if guardGroup != 0 {
		pgid = guardGroup
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			// Negative pid: the whole process group.
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		case <-done:
		}
	}()
	werr := cmd.Wait()
	close(done)
	// Reap any grandchildren left in the group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	// Decide by the context, not by whether the killer goroutine got there first: Wait can
	// return (the process died of our SIGKILL) before that goroutine closes killed.
	if ctx.Err() != nil && werr != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && c.Timeout > 0 {
			return &ExitError{Path: c.Path, Code: -1, TimedOut: true, Stderr: errTail.String()}
		}
		return ctx.Err()
	}
	if werr == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		out := &ExitError{Path: c.Path, Code: ee.ExitCode(), Stderr: errTail.String()}
		if sandboxed && out.Code == 1 && strings.HasPrefix(out.Stderr, "bwrap: ") {
			// bwrap itself failed: the kernel refused a namespace or a mount.
			return &sandbox.UnavailableError{Reason: strings.TrimSpace(strings.SplitN(out.Stderr, "\n", 2)[0])}
		}
		if sandboxed && out.Code > 128 && out.Code < 128+65 {
			// bwrap reports its tool's death by signal N as exit status 128+N.
			out.Code, out.Signal = -1, syscall.Signal(out.Code-128).String()
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			out.Code = -1
			out.Signal = ws.Signal().String()
		}
		return out
	}
	return fmt.Errorf("wait %s: %w", c.Path, werr)
}

// Output runs c and returns its stdout, capped at max bytes (an error if exceeded).
func Output(ctx context.Context, c Cmd, max int64) ([]byte, error) {
	var buf bytes.Buffer
	lw := &LimitWriter{W: &buf, N: max}
	c.Stdout = lw
	err := Run(ctx, c)
	if lw.Over {
		return buf.Bytes(), fmt.Errorf("%s: output larger than %d bytes", c.Path, max)
	}
	return buf.Bytes(), err
}

// LimitWriter writes to W at most N more bytes; a write past them writes what fits, sets Over
// and fails.
type LimitWriter struct {
	W    io.Writer
	N    int64
	Over bool
}

func (l *LimitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.N {
		l.Over = true
		p = p[:l.N]
	}
	n, err := l.W.Write(p)
	l.N -= int64(n)
	if l.Over {
		return n, errors.New("output limit exceeded")
	}
	return n, err
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	if t == nil {
		return ""
	}
	return string(bytes.TrimSpace(t.buf))
}

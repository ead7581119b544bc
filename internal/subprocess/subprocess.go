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
	"sync"
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
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	p, err := start(ctx, c)
	if err != nil {
		return err
	}
	werr := p.wait()
	// Decide by the context, not by whether the killer goroutine got there first: Wait can
	// return (the process died of our SIGKILL) before that goroutine closes killed.
	if ctx.Err() != nil && werr != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && c.Timeout > 0 {
			return &ExitError{Path: c.Path, Code: -1, TimedOut: true, Stderr: p.errTail.String()}
		}
		return ctx.Err()
	}
	return p.exitError(werr)
}

// Process is a tool started by [Start] that keeps running until it exits, its context ends or
// [Process.Stop] is called: a warm converter fed over its stdin. It is guarded like a run of
// [Run] — its process group (or sandbox) is killed when this process dies, and it is recorded
// under a context from [WithRecords] — for as long as it lives. Its methods are safe for
// concurrent use.
type Process struct {
	c         Cmd
	cmd       *exec.Cmd
	sandboxed bool
	errTail   *tailBuffer
	pgid      int
	undo      []func() // run last first once the process and its group are gone
	done      chan struct{}
	err       error // the exit, set before done closes
	stopOnce  sync.Once
}

// Start starts c and returns without waiting for it; ctx bounds its whole life (c.Timeout is
// ignored). It returns the errors [Run] returns for a tool that did not start. The caller must
// call [Process.Stop] or wait on [Process.Done].
func Start(ctx context.Context, c Cmd) (*Process, error) {
	p, err := start(ctx, c)
	if err != nil {
		return nil, err
	}
	go func() {
		werr := p.wait()
		if ctx.Err() != nil && werr != nil {
			p.err = ctx.Err()
		} else {
			p.err = p.exitError(werr)
		}
		close(p.done)
	}()
	return p, nil
}

// Pid returns the process id of the started command (the sandbox's outermost process when
// sandboxed).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process and its group are gone; [Process.Err] then says how it ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err returns how the process ended — nil, an [*ExitError] or a context error — once Done is
// closed, and nil before.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Stop kills the process and its group (its whole sandbox) and waits until they are gone. It is
// idempotent.
func (p *Process) Stop() {
	p.stopOnce.Do(func() { _ = syscall.Kill(-p.pgid, syscall.SIGKILL) })
	<-p.done
}

// start starts c: sandboxed or guarded, recorded, and killed as a group when ctx ends.
func start(ctx context.Context, c Cmd) (_ *Process, err error) {
	path, err := exec.LookPath(c.Path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Path, ErrNotInstalled)
	}
	// p is not the named result: every failed return sets that to nil, and the cleanup below
	// must still see what was started.
	p := &Process{c: c, done: make(chan struct{})}
	defer func() {
		if err != nil {
			p.cleanup()
		}
	}()
	tool, args := path, c.Args
	if c.MemoryLimit > 0 && (c.Sandbox == nil || sandbox.CurrentMode() == sandbox.Off) {
		if pl, err := exec.LookPath("prlimit"); err == nil {
			args = append([]string{"--as=" + strconv.FormatInt(c.MemoryLimit, 10), "--", path}, args...)
			path = pl
		}
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
	p.sandboxed = c.Sandbox != nil && sandbox.CurrentMode() == sandbox.On
	if p.sandboxed {
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
			return nil, err
		}
		p.undo = append(p.undo, cleanup, func() {
			sandbox.Sanitize(c.Dir) //nolint:errcheck // best effort; what is left is regular files
		})
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
		p.undo = append(p.undo, stopGuard)
	}
	cmd.Stdin = c.Stdin
	cmd.Stdout = c.Stdout
	if c.Stderr != nil {
		cmd.Stderr = c.Stderr
	} else {
		p.errTail = &tailBuffer{max: 4096}
		cmd.Stderr = p.errTail
	}
	// A grandchild left in the background can hold our stdout/stderr pipes open; without a
	// WaitDelay, Wait would block until it exits. The group is killed after Wait anyway.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		var ue *sandbox.UnavailableError
		if p.sandboxed && errors.As(sandbox.StartError(err), &ue) {
			return nil, ue
		}
		return nil, fmt.Errorf("start %s: %w", c.Path, err)
	}
	p.cmd = cmd
	// The group kill in wait is the last thing done to the tool; the record and the guard go
	// after it.
	p.undo = append(p.undo, recordsFrom(ctx).add(cmd.Process.Pid, c.Path))
	p.pgid = cmd.Process.Pid
	if guardGroup != 0 {
		p.pgid = guardGroup
	}
	exited := make(chan struct{})
	p.undo = append(p.undo, func() { close(exited) })
	go func() {
		select {
		case <-ctx.Done():
			// Negative pid: the whole process group.
			_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		case <-exited:
		}
	}()
	return p, nil
}

// wait waits for the process, kills what is left of its group and undoes what start did.
func (p *Process) wait() error {
	werr := p.cmd.Wait()
	// Reap any grandchildren left in the group.
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	p.cleanup()
	return werr
}

func (p *Process) cleanup() {
	for i := len(p.undo) - 1; i >= 0; i-- {
		p.undo[i]()
	}
	p.undo = nil
}

// exitError turns the error of Wait into the one [Run] returns.
func (p *Process) exitError(werr error) error {
	if werr == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		out := &ExitError{Path: p.c.Path, Code: ee.ExitCode(), Stderr: p.errTail.String()}
		if p.sandboxed && out.Code == 1 && strings.HasPrefix(out.Stderr, "bwrap: ") {
			// bwrap itself failed: the kernel refused a namespace or a mount.
			return &sandbox.UnavailableError{Reason: strings.TrimSpace(strings.SplitN(out.Stderr, "\n", 2)[0])}
		}
		if p.sandboxed && out.Code > 128 && out.Code < 128+65 {
			// bwrap reports its tool's death by signal N as exit status 128+N.
			out.Code, out.Signal = -1, syscall.Signal(out.Code-128).String()
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			out.Code = -1
			out.Signal = ws.Signal().String()
		}
		return out
	}
	return fmt.Errorf("wait %s: %w", p.c.Path, werr)
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

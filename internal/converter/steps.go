package converter

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/subprocess"
)

// Step is one tool run of [Runner.RunSteps].
type Step struct {
	Tool string
	Args []string
	// MaxStdout bounds the stdout kept in [StepResult.Stdout]; zero discards it.
	MaxStdout int64
}

// StepResult is what one step of [Runner.RunSteps] left.
type StepResult struct {
	Stdout []byte
	// Err is nil, a [*subprocess.ExitError] as [Runner.Run] returns for a tool that failed (pass
	// it to [Failure]), or the permanent "<tool>: output larger than N bytes".
	Err error
}

// RunSteps runs the steps one after the other in one sandboxed run — one sandbox's start (about
// 9 ms of CPU) instead of one per step: a shell, the sandbox's init, runs each step whatever the
// previous ones' exit, with its stdout and stderr in files of r.Dir read back after. Each tool
// keeps the limits of a run of its own (address space, file size, CPU seconds); the time limit
// bounds the steps together.
//
// It returns an error, and no results, when the run as a whole failed: a tool is not installed
// ([NotInstalledError], before anything runs), the time limit passed ("<name> timed out after
// …"), ctx ended.
func (r *Runner) RunSteps(ctx context.Context, name string, steps []Step) ([]StepResult, error) {
	if r.Dir == "" {
		return nil, fmt.Errorf("run %d steps: the runner has no directory", len(steps))
	}
	tools := make([]string, len(steps))
	var script strings.Builder
	for i, s := range steps {
		p, err := exec.LookPath(s.Tool)
		if err != nil {
			return nil, NotInstalledError(s.Tool)
		}
		tools[i] = p
		out := "/dev/null"
		if s.MaxStdout > 0 {
			out = r.stepFile(i, "out")
		}
		script.WriteString(quote(p))
		for _, a := range s.Args {
			script.WriteString(" " + quote(a))
		}
		fmt.Fprintf(&script, " >%s 2>%s; echo $? >%s\n", quote(out), quote(r.stepFile(i, "err")), quote(r.stepFile(i, "rc")))
	}
	defer func() {
		for i := range steps {
			for _, ext := range []string{"out", "err", "rc"} {
				os.Remove(r.stepFile(i, ext))
			}
		}
	}()
	if err := r.runTools(ctx, name, "/bin/sh", []string{"-c", script.String()}, tools); err != nil {
		return nil, err
	}
	res := make([]StepResult, len(steps))
	for i, s := range steps {
		rc, err := readAtMost(r.stepFile(i, "rc"), s.Tool, 16)
		if err != nil {
			return nil, fmt.Errorf("run %s: no exit status: %w", s.Tool, err)
		}
		code, err := strconv.Atoi(strings.TrimSpace(string(rc)))
		if err != nil {
			return nil, fmt.Errorf("run %s: exit status %q", s.Tool, rc)
		}
		if code != 0 {
			ee := &subprocess.ExitError{Path: s.Tool, Code: code, Stderr: tailOf(r.stepFile(i, "err"), 4096)}
			if code > 128 && code < 128+65 {
				ee.Code, ee.Signal = -1, syscall.Signal(code-128).String()
			}
			res[i].Err = ee
			continue
		}
		if s.MaxStdout > 0 {
			res[i].Stdout, res[i].Err = readAtMost(r.stepFile(i, "out"), s.Tool, s.MaxStdout)
		}
	}
	return res, nil
}

// stepFile is the path of step i's file of kind ext (out, err, rc) in r.Dir.
func (r *Runner) stepFile(i int, ext string) string {
	return filepath.Join(r.Dir, ".step-"+strconv.Itoa(i)+"."+ext)
}

// quote quotes s for the shell.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// readAtMost reads the file at path, refusing one of more than max bytes with the permanent error
// Output gives. It reads into one buffer of the file's size (a thumbnail's raw image is 1.5 MB:
// growing a buffer to it left twice that to collect).
func readAtMost(path, tool string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, action.Permanentf("%s: output larger than %d bytes", tool, max)
	}
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}

// tailOf returns the last max bytes of the file at path ("" when there is none).
func tailOf(path string, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		if _, err := f.Seek(fi.Size()-max, io.SeekStart); err != nil {
			return ""
		}
	}
	b, _ := io.ReadAll(io.LimitReader(f, max))
	return string(b)
}

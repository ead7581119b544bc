// Package execaction provides the `exec` action, which runs a command on an item: the item's
// blob on stdin or as a file, templated arguments and environment, exit codes mapped to outcome
// events, and stdout optionally read back as the item's text or as a JSON result.
//
// The command runs through [subprocess.Run]: in its own process group in the task's temp dir,
// with a minimal environment, killed as a whole group on timeout or cancel.
package execaction

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/result"
	"github.com/sluice-project/sluice/internal/action/settings"
	"github.com/sluice-project/sluice/internal/subprocess"
)

// maxStdout caps what is read from a command's stdout with `stdout: json` or `stdout: text`.
const maxStdout = 16 << 20

// heartbeatInterval is how often a running command heartbeats on the task's behalf.
const heartbeatInterval = 30 * time.Second

// New returns the `exec` action. It is safe for concurrent use.
func New() action.Action { return execAction{} }

type execAction struct{}

func (execAction) Spec() action.Spec {
	outcomesFor, validate := settings.Hooks(parseConfig)
	return action.Spec{
		Name:        "exec",
		Version:     "1",
		Doc:         "Runs a command on the item, in its own temp dir, with the blob on stdin or as a file.",
		Settings:    typed.Settings(),
		OutcomesFor: outcomesFor,
		Validate:    validate,
	}
}

func (execAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	c, err := parseConfig(t.With)
	if err != nil {
		return action.Permanent(fmt.Errorf("exec settings: %w", err))
	}
	dir := t.TempDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "sluice-exec-"); err != nil {
			return fmt.Errorf("create temp dir: %w", err)
		}
		defer os.RemoveAll(dir)
	}

	var stdin io.Reader
	var inputPath string
	hasBlob := t.Item.BlobSHA256 != ""
	switch c.input {
	case inputStdin:
		if hasBlob && t.OpenBlob != nil {
			rc, err := t.OpenBlob(ctx)
			if err != nil {
				return fmt.Errorf("open blob of item %d: %w", t.Item.ID, err)
			}
			defer rc.Close()
			stdin = rc
		}
	case inputFile:
		if !hasBlob || t.BlobPath == nil {
			return action.Permanentf("item %q has no content to pass as a file", t.Item.Name)
		}
		if inputPath, err = t.BlobPath(ctx); err != nil {
			return fmt.Errorf("get blob file of item %d: %w", t.Item.ID, err)
		}
	}

	data := newTemplateData(t, inputPath)
	data.TempDir = dir
	argv, err := c.argv(data)
	if err != nil {
		return action.Permanent(err)
	}
	env, err := c.environ(data, dir)
	if err != nil {
		return action.Permanent(err)
	}

	cmd := subprocess.Cmd{Path: argv[0], Args: argv[1:], Dir: dir, Env: env, Stdin: stdin, Timeout: c.timeout}
	// With stdout ignored, cmd.Stdout stays nil so the command writes to /dev/null instead of a
	// pipe that a lingering background child could hold open.
	var stdout *cappedBuffer
	if c.stdout != stdoutIgnore {
		stdout = &cappedBuffer{max: maxStdout}
		cmd.Stdout = stdout
	}
	stop := heartbeat(out)
	start := time.Now()
	runErr := subprocess.Run(ctx, cmd)
	elapsed := time.Since(start)
	stop()

	if stdout != nil && stdout.over {
		return action.Permanentf("%s: stdout larger than %d MiB", argv[0], maxStdout>>20)
	}
	code, err := classify(ctx, c, argv[0], runErr, elapsed)
	if err != nil {
		return err
	}
	switch c.stdout {
	case stdoutText:
		if err := out.SetText(ctx, strings.ToValidUTF8(stdout.String(), "\uFFFD")); err != nil {
			return fmt.Errorf("set text: %w", err)
		}
	case stdoutJSON:
		if err := result.Apply(ctx, stdout.Bytes(), result.Source{What: "stdout", Declared: c.declared, Dir: dir}, out); err != nil {
			return err
		}
	}
	if ev, ok := c.outcomes[code]; ok {
		out.Emit(ev)
	}
	return nil
}

// classify turns the result of running the command into its exit code, or the error the task
// ends with: permanent for a missing program and for exit codes the step declares bad input,
// transient (retried) for everything else.
func classify(ctx context.Context, c *config, program string, runErr error, elapsed time.Duration) (int, error) {
	if runErr == nil {
		return 0, nil
	}
	if errors.Is(runErr, subprocess.ErrNotInstalled) {
		return 0, action.Permanentf("command %q not found (is it installed and in PATH?)", program)
	}
	if ctx.Err() != nil {
		return 0, fmt.Errorf("run %s: %w", program, ctx.Err())
	}
	var ee *subprocess.ExitError
	if !errors.As(runErr, &ee) {
		return 0, fmt.Errorf("run %s: %w", program, runErr)
	}
	switch {
	case ee.TimedOut:
		return 0, fmt.Errorf("%w after %s", ee, c.timeout)
	case ee.Signal == syscall.SIGKILL.String() && c.timeout > 0 && elapsed >= c.timeout:
		// subprocess.Run can report its own timeout kill as a plain SIGKILL when the command's
		// exit wins the race with its timeout bookkeeping.
		return 0, fmt.Errorf("%s timed out after %s", program, c.timeout)
	case ee.Signal != "":
		return 0, ee
	case c.outcomes[ee.Code] != "":
		return ee.Code, nil
	case c.permanent[ee.Code]:
		return 0, action.Permanent(ee)
	default:
		return 0, ee
	}
}

// heartbeat calls out.Heartbeat periodically until stop is called. Output methods may be called
// from one goroutine at a time: stop returns only once the heartbeat goroutine has finished.
func heartbeat(out action.Output) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(heartbeatInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				out.Heartbeat()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// cappedBuffer keeps up to max bytes. A write past the cap fails, which closes the pipe so the
// command stops (SIGPIPE) rather than producing output nobody reads.
type cappedBuffer struct {
	max  int
	buf  []byte
	over bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if len(b.buf)+len(p) > b.max {
		b.over = true
		return 0, errors.New("stdout limit exceeded")
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *cappedBuffer) Bytes() []byte  { return b.buf }
func (b *cappedBuffer) String() string { return string(b.buf) }

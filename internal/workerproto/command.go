package workerproto

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/subprocess"
)

// CommandConfig configures [RunCommand].
type CommandConfig struct {
	// Server is the poll URL base, such as "http://127.0.0.1:7080/v1/workers".
	Server string
	// Action is the remote action name to serve, such as "Pdf".
	Action string
	// Token is a worker token.
	Token string
	// Argv is the command run per task; the task JSON is appended as its last argument.
	Argv []string
	// TempDir is where each task gets its working directory. Defaults to os.TempDir().
	TempDir string
	// Heartbeat is how often a running command's task is probed with HEAD (to keep it alive and
	// learn of a cancel). Defaults to 3s.
	Heartbeat time.Duration
	// Timeout bounds one run of the command. Defaults to no limit beyond the server's cancel.
	Timeout time.Duration
	Logger  *slog.Logger
	// Client, when set, is used instead of one built from Server and Token.
	Client *Client
	// Once makes RunCommand return after one task (tests, `sluice worker --once`).
	Once bool
}

// RunCommand serves one remote action by running a local command per task, under the
// single-file converter contract: the working directory holds input.blob (the input bytes) and
// input.json (the task JSON), which is also the command's last argument; the input is on stdin.
// Each stdout line is progress — "c<i>/<n>" (children), "b<i>/<n>" (bytes), or a fraction "0.x" —
// and any other line is an error message that ends the task. On exit 0 the files in the working
// directory named as fragments (N.json and N.blob for each child N, optionally N.txt and
// N-thumbnail.png or .jpg) are streamed to the server, then the domain writes (N.write.json, an
// extension: docs/worker-protocol-extensions.md), then done. A non-zero exit is reported as
// the error "<command> exited with status code N". A canceled task kills the command's process
// group.
//
// RunCommand polls until ctx ends (returning nil) or the server refuses the worker (returning the
// error). Connection failures are retried every 3s.
func RunCommand(ctx context.Context, cfg CommandConfig) error {
	if len(cfg.Argv) == 0 {
		return errors.New("workerproto: RunCommand needs a command")
	}
	c := runnerDefaults(&cfg.Heartbeat, &cfg.TempDir, &cfg.Logger, cfg.Client, cfg.Server, cfg.Token)
	return pollTasks(ctx, c, cfg.Action, cfg.Once, cfg.Logger, func(t *TaskHandle) error { return runTask(ctx, &cfg, t) })
}

// runnerDefaults sets the defaults of a runner's configuration (a heartbeat of 3s, os.TempDir(),
// a logger that discards) and returns its client: c, else one of server and token.
func runnerDefaults(heartbeat *time.Duration, tempDir *string, log **slog.Logger, c *Client, server, token string) *Client {
	if *heartbeat <= 0 {
		*heartbeat = 3 * time.Second
	}
	if *tempDir == "" {
		*tempDir = os.TempDir()
	}
	if *log == nil {
		*log = slog.New(slog.DiscardHandler)
	}
	if c == nil {
		c = &Client{Server: server, Token: token}
	}
	return c
}

// pollTasks polls for tasks of the action and runs each with run, until ctx ends (returning nil)
// or the server refuses the worker (returning the error); with once, after one task. Connection
// failures are retried every 3s.
func pollTasks(ctx context.Context, c *Client, name string, once bool, log *slog.Logger, run func(t *TaskHandle) error) error {
	for ctx.Err() == nil {
		t, err := c.Poll(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isConnErr(err) {
				log.Warn("poll failed, retrying", "action", name, "error", err)
				select {
				case <-ctx.Done():
				case <-time.After(3 * time.Second):
				}
				continue
			}
			return err
		}
		if t == nil {
			continue
		}
		if err := run(t); err != nil && ctx.Err() == nil {
			log.Warn("task not completed", "action", name, "id", t.ID, "error", err)
		}
		if once {
			return nil
		}
	}
	return nil
}

func isConnErr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection refused") || strings.Contains(s, "connection reset")
}

var (
	childsRe   = regexp.MustCompile(`^c(\d+)/(\d+)$`)
	bytesRe    = regexp.MustCompile(`^b(\d+)/(\d+)$`)
	fractionRe = regexp.MustCompile(`^0(\.\d+)?$`)
	headerRe   = regexp.MustCompile(`^(\d{1,8})\.json$`)
	writeRe    = regexp.MustCompile(`^(\d{1,8})\.write\.json$`)
)

// progressLine maps one stdout line of the command to a progress payload, or false for an error.
func progressLine(line string) (string, bool) {
	if m := childsRe.FindStringSubmatch(line); m != nil {
		return fmt.Sprintf(`{"children":{"nProcessed":%s,"nTotal":%s}}`, m[1], m[2]), true
	}
	if m := bytesRe.FindStringSubmatch(line); m != nil {
		return fmt.Sprintf(`{"bytes":{"nProcessed":%s,"nTotal":%s}}`, m[1], m[2]), true
	}
	if fractionRe.MatchString(line) {
		return line, true
	}
	return "", false
}

func runTask(ctx context.Context, cfg *CommandConfig, t *TaskHandle) error {
	dir, err := os.MkdirTemp(cfg.TempDir, "sluice-worker-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	// Input: input.blob (also stdin) and input.json.
	rc, err := t.OpenBlob(tctx)
	if err != nil {
		return err
	}
	input := filepath.Join(dir, "input.blob")
	f, err := os.Create(input)
	if err != nil {
		rc.Close()
		return err
	}
	n, err := io.Copy(f, rc)
	rc.Close()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n != t.Blob.NBytes {
		return t.Post(tctx, "error", strings.NewReader(fmt.Sprintf("Input had wrong length: expected %d bytes, got %d", t.Blob.NBytes, n)))
	}
	taskJSON, _ := json.Marshal(t.Task)
	if err := os.WriteFile(filepath.Join(dir, "input.json"), taskJSON, 0o600); err != nil {
		return err
	}

	// Heartbeats: a HEAD every cfg.Heartbeat; a 404 kills the command.
	hbDone := make(chan struct{})
	defer close(hbDone)
	go func() {
		tick := time.NewTicker(cfg.Heartbeat)
		defer tick.Stop()
		for {
			select {
			case <-hbDone:
				return
			case <-tctx.Done():
				return
			case <-tick.C:
			}
			if err := t.Alive(tctx); errors.Is(err, ErrGone) {
				cancel(ErrGone)
				return
			}
		}
	}()

	// Stdout: progress lines, posted as they come; any other line is the error.
	pr, pw := io.Pipe()
	lines := make(chan error, 1)
	var errLine string
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			if errLine != "" {
				continue
			}
			p, ok := progressLine(line)
			if !ok {
				errLine = line
				cancel(errors.New("error line")) // stop the command: it reported an error
				continue
			}
			if err := t.Post(tctx, "progress", strings.NewReader(p)); errors.Is(err, ErrGone) {
				cancel(ErrGone)
			}
		}
		_, _ = io.Copy(io.Discard, pr)
		lines <- sc.Err()
	}()
	in, err := os.Open(input)
	if err != nil {
		pw.Close()
		<-lines
		return err
	}
	args := append(append([]string{}, cfg.Argv[1:]...), string(taskJSON))
	env := append(os.Environ(), "TMPDIR="+dir)
	runErr := subprocess.Run(tctx, subprocess.Cmd{Path: cfg.Argv[0], Args: args, Dir: dir, Env: env, Stdin: in,
		Stdout: pw, Timeout: cfg.Timeout})
	in.Close()
	pw.Close()
	<-lines
	if errors.Is(context.Cause(tctx), ErrGone) || ctx.Err() != nil {
		return ErrGone
	}
	if errLine != "" {
		return t.Post(ctx, "error", strings.NewReader(errLine))
	}
	if runErr != nil {
		msg := runErr.Error()
		var ee *subprocess.ExitError
		if errors.As(runErr, &ee) && ee.Code > 0 {
			msg = fmt.Sprintf("%s exited with status code %d", filepath.Base(cfg.Argv[0]), ee.Code)
		}
		return t.Post(ctx, "error", strings.NewReader(msg))
	}
	return sendOutputs(ctx, cfg, t, dir)
}

// sendOutputs streams the fragment files of the working directory, child by child, then done.
func sendOutputs(ctx context.Context, cfg *CommandConfig, t *TaskHandle, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var children, writes []int
	for _, e := range ents {
		if m := headerRe.FindStringSubmatch(e.Name()); m != nil {
			n, _ := strconv.Atoi(m[1])
			children = append(children, n)
		}
		if m := writeRe.FindStringSubmatch(e.Name()); m != nil {
			n, _ := strconv.Atoi(m[1])
			writes = append(writes, n)
		}
	}
	sort.Ints(children)
	sort.Ints(writes)
	for _, n := range children {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%d.blob", n))); err != nil {
			return t.Post(ctx, "error", strings.NewReader(fmt.Sprintf("%s did not output %d.blob", filepath.Base(cfg.Argv[0]), n)))
		}
	}
	s := t.Stream(ctx)
	part := func(name string) error {
		f, err := os.Open(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer f.Close()
		return s.Part(name, f)
	}
	for _, n := range children {
		for _, name := range []string{"%d.json", "%d.blob", "%d-thumbnail.jpg", "%d-thumbnail.png", "%d.txt"} {
			if err := part(fmt.Sprintf(name, n)); err != nil {
				s.Abort()
				return err
			}
		}
	}
	for _, n := range writes {
		if err := part(fmt.Sprintf("%d.write.json", n)); err != nil {
			s.Abort()
			return err
		}
	}
	if err := s.Part("done", nil); err != nil {
		s.Abort()
		return err
	}
	return s.Close()
}

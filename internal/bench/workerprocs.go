package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// workerProcs are `sluice worker` processes on the bench's schema (--processes).
type workerProcs []*exec.Cmd

// sluiceBinary is the sluice executable worker processes run: path when given, else the
// sluice beside this executable (`make bench` builds the two side by side), else sluice on
// PATH. The workers should be the build being measured: the caller names the one found.
func sluiceBinary(path string) (string, error) {
	if path != "" {
		return exec.LookPath(path)
	}
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), "sluice")
		if st, err := os.Stat(beside); err == nil && !st.IsDir() {
			return beside, nil
		}
	}
	p, err := exec.LookPath("sluice")
	if err != nil {
		return "", usagef("--processes runs sluice worker processes: no sluice beside this executable nor on PATH (name one with --sluice)")
	}
	return p, nil
}

// startWorkerProcs starts n `sluice worker --database URL` processes of the binary sluice and
// waits until each says it runs.
func startWorkerProcs(ctx context.Context, sluice string, n int, url, dir string) (workerProcs, error) {
	var ps workerProcs
	for i := range n {
		data := filepath.Join(dir, fmt.Sprintf("worker-%d", i))
		cmd := exec.CommandContext(ctx, sluice, "worker", "--database", url, "--data", data)
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 30 * time.Second
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			ps.stop()
			return nil, fmt.Errorf("start worker process %d: %w", i, err)
		}
		ps = append(ps, cmd)
		sc := bufio.NewScanner(stderr)
		running := false
		var last string
		for sc.Scan() {
			last = sc.Text()
			if strings.HasPrefix(last, "worker ") && strings.Contains(last, " running") {
				running = true
				break
			}
		}
		if !running {
			ps.stop()
			return nil, fmt.Errorf("worker process %d ended before it ran: %s", i, last)
		}
		go func() { // keep its stderr drained
			for sc.Scan() {
			}
		}()
	}
	return ps, nil
}

// cpu is the CPU time the processes have used so far.
func (ps workerProcs) cpu() time.Duration {
	var t time.Duration
	for _, c := range ps {
		t += procCPU(c.Process.Pid)
	}
	return t
}

// stop asks each process to stop (SIGTERM) and waits for it.
func (ps workerProcs) stop() {
	for _, c := range ps {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range ps {
		_ = c.Wait()
	}
}

// withSchema adds sluice_schema=schema to a postgres:// URL.
func withSchema(dsn, schema string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	q.Set("sluice_schema", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

package enginetest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// RunChild runs this test binary again as a child process, with env ("NAME=VALUE") added to its
// environment so that its TestMain runs the child's part instead of the tests, in a process
// group of its own. The child prints a line as each action starts and "done" once its job
// ended. With killAfter > 0, RunChild SIGKILLs the child's group when that many actions have
// started and reports false; otherwise it waits for the child to exit and reports whether it
// printed "done". It fails t when the child fails or runs longer than limit.
func RunChild(t testing.TB, env string, killAfter int, limit time.Duration) (finished bool) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	ran := 0
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("child: %v", err)
				}
				return finished
			}
			if line == "done" {
				finished = true
				continue
			}
			ran++
			if killAfter > 0 && ran == killAfter {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				for range lines {
				}
				_ = cmd.Wait()
				return false
			}
		case <-deadline.C:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			for range lines {
			}
			_ = cmd.Wait()
			t.Fatalf("child ran %d actions in %s without ending", ran, limit)
		}
	}
}

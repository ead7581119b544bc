package subprocess

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/proctest"
	"github.com/sluice-project/sluice/internal/sandbox"
)

// Run with SUBPROCESS_TEST_PARENT=1, the test binary plays a Sluice that runs an unsandboxed
// tool which forks a grandchild, prints the grandchild's pid, and waits to be killed.
func TestMain(m *testing.M) {
	if os.Getenv("SUBPROCESS_TEST_PARENT") == "1" {
		err := Run(context.Background(), Cmd{Path: "/bin/sh", Args: []string{"-c", "sleep 600 & echo $!; wait"},
			Dir: os.TempDir(), Stdout: os.Stdout})
		fmt.Fprintln(os.Stderr, "run returned:", err)
		os.Exit(1)
	}
	if mode := os.Getenv("SUBPROCESS_TEST_WARM"); mode != "" {
		warmParent(mode, os.Getenv("SUBPROCESS_TEST_TOKEN"))
	}
	os.Exit(m.Run())
}

// warmParent plays a Sluice holding a warm converter (SUBPROCESS_TEST_WARM=on or off, the
// sandbox mode): it starts with [Start] a long-lived tool that has a child of its own, both
// with token in their command lines, prints "started" and waits to be killed.
func warmParent(mode, token string) {
	m, err := sandbox.ParseMode(mode)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sandbox.SetMode(m)
	dir, err := os.MkdirTemp("", "subprocess-warm-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_, err = Start(context.Background(), Cmd{Path: "/bin/sh", Args: []string{"-c", "sleep 600 " + token + " & wait", "sh", token},
		Dir: dir, Sandbox: &sandbox.Spec{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		os.Exit(1)
	}
	fmt.Println("started")
	select {}
}

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	// A command name with spaces and parentheses, as a hostile tool may choose.
	line := "4242 (we(ird) name)) S 1 4240 4200 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100 0 0\n"
	st, err := parseProcStat(4242, line)
	if err != nil {
		t.Fatal(err)
	}
	if st.pid != 4242 || st.state != 'S' || st.pgid != 4240 || st.sid != 4200 || st.start != 987654 {
		t.Fatalf("parsed %+v", st)
	}
	if _, err := parseProcStat(1, "1 (x) S 1 2"); err == nil {
		t.Fatal("a short line parsed")
	}
	self, err := readProcStat(os.Getpid())
	if err != nil || self.start == 0 || self.pgid == 0 {
		t.Fatalf("own stat: %+v, %v", self, err)
	}
}

// TestGuardKillsGrandchildren SIGKILLs a process while an unsandboxed tool it runs has a child
// of its own: the parent-death signal kills the tool, and the guard must kill the tool's child,
// at once — before the guard, the child ran on re-parented to pid 1.
func TestGuardKillsGrandchildren(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(self, "-test.run=^$")
	parent.Env = append(os.Environ(), "SUBPROCESS_TEST_PARENT=1")
	parent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	parent.Stderr = &stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read the grandchild's pid: %v (%s)", err, stderr.String())
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	st, err := readProcStat(pid)
	if err != nil {
		t.Fatalf("grandchild %d: %v", pid, err)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	t.Cleanup(func() {
		if alive(pid, st.start) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	waitGone(t, pid, st.start, 20*time.Second, "the tool's child to die with the killed parent")
}

// waitGone waits up to d for process pid (started at start) to be gone or a zombie, and fails
// the test if it is not.
func waitGone(t *testing.T, pid int, start uint64, d time.Duration, what string) {
	t.Helper()
	poll.Until(t, d, what, func() (bool, string) {
		return !alive(pid, start), fmt.Sprintf("pid %d still runs", pid)
	})
}

// TestRecordsReap plants the record of a converter left running by a dead process, with its
// group, beside records that must not be touched, and reaps.
func TestRecordsReap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r, err := OpenRecords(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A dead owner: a process that ran and was waited for.
	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadOwner := procStat{pid: gone.Process.Pid, start: 1}

	// The leftover: a tool in a group of its own with a child, as an unsandboxed converter.
	tool, child := proctest.StartLeftover(t)
	childStat, err := readProcStat(child)
	if err != nil {
		t.Fatal(err)
	}
	(&Records{dir: dir, owner: deadOwner}).add(tool.Process.Pid, "/usr/bin/leftover")

	// A live process whose pid a record names with another start time (a reused pid), and one
	// recorded by a live owner (this process): both must survive.
	spared := exec.Command("/bin/sleep", "600")
	spared.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := spared.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spared.Process.Kill(); _ = spared.Wait() })
	sparedStat, err := readProcStat(spared.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	reused := record{PID: spared.Process.Pid, Start: sparedStat.start - 1, PGID: sparedStat.pgid, SID: sparedStat.sid,
		Tool: "reused", OwnerPID: deadOwner.pid, OwnerStart: deadOwner.start}
	writeRecord(t, dir, "reused.json", reused)
	r.add(spared.Process.Pid, "/usr/bin/mine")

	var logged bytes.Buffer
	n, err := r.Reap(slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("reaped %d processes, want 2 (the tool and its child); log: %s", n, logged.String())
	}
	waitGone(t, child, childStat.start, 10*time.Second, "the leftover's child to be killed")
	if err := tool.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the leftover tool: %v, want killed", err)
	}
	if !strings.Contains(logged.String(), "tool=leftover") || strings.Contains(logged.String(), "reused") {
		t.Errorf("log: %s", logged.String())
	}
	if !alive(spared.Process.Pid, sparedStat.start) {
		t.Fatal("a reused pid or a live owner's tool was killed")
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != 1 {
		t.Errorf("records left: %v, want only the live owner's", left)
	}
}

func writeRecord(t *testing.T, dir, name string, rec record) {
	t.Helper()
	b := fmt.Sprintf(`{"pid":%d,"start":%d,"pgid":%d,"sid":%d,"tool":%q,"owner_pid":%d,"owner_start":%d}`,
		rec.PID, rec.Start, rec.PGID, rec.SID, rec.Tool, rec.OwnerPID, rec.OwnerStart)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRunRecords checks that Run records a tool while it runs and forgets it afterwards.
func TestRunRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r, err := OpenRecords(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	// The record is written once the tool runs: the tool waits for it (10 s at most).
	script := `for i in $(seq 1000); do ls "$1"/*.json >/dev/null 2>&1 && break; sleep 0.01; done; cat "$1"/*.json`
	err = Run(WithRecords(t.Context(), r), Cmd{Path: "/bin/sh", Args: []string{"-c", script, "sh", dir}, Dir: t.TempDir(), Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"tool":"sh"`) || !strings.Contains(out.String(), fmt.Sprintf(`"owner_pid":%d`, os.Getpid())) {
		t.Fatalf("the record while running: %s", out.String())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("records left after the run: %v", left)
	}
}

// TestProcessDiesWithParent SIGKILLs a process holding a long-lived tool started with [Start]
// (a warm converter), sandboxed and unsandboxed: the tool and its child must die with it, as a
// run of [Run] does.
func TestProcessDiesWithParent(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"on", "off"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			if mode == "on" && !sandbox.Check().Available {
				t.Skipf("sandbox unavailable: %s", sandbox.Check().Reason)
			}
			token := "9" + strconv.FormatInt(time.Now().UnixNano(), 10)[8:]
			parent := exec.Command(self, "-test.run=^$")
			parent.Env = append(os.Environ(), "SUBPROCESS_TEST_WARM="+mode, "SUBPROCESS_TEST_TOKEN="+token)
			parent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			var stderr bytes.Buffer
			parent.Stderr = &stderr
			out, err := parent.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := parent.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = parent.Process.Kill()
				_ = parent.Wait()
				for _, p := range proctest.WithArg(token) {
					_ = syscall.Kill(p.Pid, syscall.SIGKILL)
				}
			})
			if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "started\n" {
				t.Fatalf("the parent said %q, %v (%s)", line, err, stderr.String())
			}
			poll.Until(t, 20*time.Second, "the tool's child to start", func() (bool, string) {
				ps := proctest.WithArg("sleep 600 " + token)
				return len(ps) > 0, fmt.Sprint(ps)
			})
			if err := parent.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = parent.Wait()
			poll.Until(t, 20*time.Second, "the tool and its child to die with the killed parent", func() (bool, string) {
				var live []string
				for _, p := range proctest.WithArg(token) {
					if p.Alive() {
						live = append(live, p.String())
					}
				}
				return len(live) == 0, strings.Join(live, "; ")
			})
		})
	}
}

// TestProcessStop: Stop ends a long-lived tool and its group at once, Done closes, and Err
// says it was killed.
func TestProcessStop(t *testing.T) {
	t.Parallel()
	p, err := Start(t.Context(), Cmd{Path: "/bin/sh", Args: []string{"-c", "sleep 600 & wait"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
		t.Fatalf("the tool ended by itself: %v", p.Err())
	default:
	}
	p.Stop()
	p.Stop() // idempotent
	<-p.Done()
	var ee *ExitError
	if !errors.As(p.Err(), &ee) || ee.Signal != "killed" {
		t.Fatalf("err %v, want killed", p.Err())
	}
}

package sandbox_test

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/proctest"
	"github.com/sluice-project/sluice/internal/sandbox"
)

// orphanParent plays a Sluice (SANDBOX_PROBE=orphan-parent): it starts a sandboxed tool whose
// command line carries token, holding the sandbox in its setup with bwrap's --block-fd on the
// pipe it inherited as descriptor 3, prints the pid of the command it started, and waits to be
// killed.
func orphanParent(token string) {
	dir, err := os.MkdirTemp("", "sandbox-orphan-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	block := os.NewFile(3, "block")
	cmd, _, err := sandbox.Command("/bin/sh", []string{"-c", "sleep 600; : " + token},
		sandbox.Spec{Scratch: dir, Env: []string{"PATH=/usr/bin:/bin"}, ExtraFiles: []*os.File{block}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	i := slices.IndexFunc(cmd.Args, func(a string) bool { return filepath.Base(a) == "bwrap" })
	if i < 0 {
		fmt.Fprintln(os.Stderr, "no bwrap in", cmd.Args)
		os.Exit(1)
	}
	cmd.Args = slices.Insert(cmd.Args, i+1, "--block-fd", "3")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(cmd.Process.Pid)
	select {}
}

// TestSandboxDiesWithSluice SIGKILLs a process while the sandbox of a tool it started is still
// being set up — the moment the kill loops of internal/e2e hit often — then lets the setup
// finish. Nothing of that sandbox may run on: before the sandbox had a pid namespace of
// Sluice's making, bwrap's own init, not yet bound to its parent's life, went on to run the
// tool re-parented to pid 1 (issue #16).
func TestSandboxDiesWithSluice(t *testing.T) {
	requireSandbox(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tok := make([]byte, 8)
	_, _ = rand.Read(tok)
	token := "orphan-" + hex.EncodeToString(tok)
	blockR, blockW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer blockW.Close()
	parent := exec.Command(self, "-test.run=^$")
	parent.Env = append(os.Environ(), "SANDBOX_PROBE=orphan-parent", "SANDBOX_ARG="+token)
	parent.ExtraFiles = []*os.File{blockR}
	parent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A file, not a pipe: a surviving sandbox would hold a pipe open and Wait with it.
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	parent.Stderr = stderr
	logged := func() string { b, _ := os.ReadFile(stderr.Name()); return string(b) }
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	blockR.Close()
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read the sandbox's pid: %v (%s)", err, logged())
	}
	monitor, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	// The sandbox's init: bwrap's child, blocked in its setup until blockW is closed.
	var init proctest.Proc
	poll.Until(t, 30*time.Second, "bwrap to start its sandbox", func() (bool, string) {
		if kids := proctest.Children(monitor); len(kids) > 0 {
			init = kids[0]
			return true, ""
		}
		return false, "no child of bwrap " + strconv.Itoa(monitor) + " (" + logged() + ")"
	})
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	blockW.Close() // the setup goes on, if anything is left to go on

	// The sandbox's init and every process naming the token must die; survivors are killed
	// when the test ends either way.
	var survivors []proctest.Proc
	t.Cleanup(func() {
		for _, p := range survivors {
			_ = syscall.Kill(p.Pid, syscall.SIGKILL)
		}
	})
	poll.Until(t, 20*time.Second, "the sandbox to die with the process that started it", func() (bool, string) {
		survivors = proctest.WithArg(token)
		if init.Alive() && !slices.Contains(survivors, init) {
			survivors = append(survivors, init)
		}
		return len(survivors) == 0, fmt.Sprintf("%v", survivors)
	})
}

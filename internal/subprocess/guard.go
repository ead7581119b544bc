package subprocess

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// guard starts the process that kills the process group pgid — an unsandboxed tool and what it
// forked — should this process die before the run ends, and returns the function that stops it
// once the run is over. The parent-death signal kills only the tool itself, not its children
// (LibreOffice's soffice.bin under oosplash kept converting for minutes after a SIGKILLed
// Sluice; issue #16). A sandboxed tool needs no guard: its sandbox is a pid namespace that dies
// with it.
//
// The guard is a shell, in a process group of its own (a kill of Sluice's group spares it),
// blocked reading a pipe whose only writer is this process: when this process dies, however it
// dies, the kernel closes that end, the read returns, and the shell kills the group. When the
// run ends first, the guard is killed before the pipe is closed, so a finished group's number
// is never signalled. Pids are handed out cyclically, so the number of a group that died as
// Sluice did cannot be given again in the moment the guard takes to kill it.
//
// Without /bin/sh the run goes unguarded; the records ([Records]) still reap the group when an
// engine opens the data dir again.
func guard(pgid int) (stop func()) {
	r, w, err := os.Pipe()
	if err != nil {
		return func() {}
	}
	cmd := exec.Command("/bin/sh", "-c", `read _; kill -9 "-$1"`, "sluice-guard", strconv.Itoa(pgid))
	cmd.Stdin = r
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return func() {}
	}
	return func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		w.Close()
	}
}

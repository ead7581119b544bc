package subprocess

import (
	"os"
	"os/exec"
	"syscall"
)

// startGuard starts, before an unsandboxed tool, the process that kills the tool's process group
// — the tool and what it forked — should this process die before the run ends. The guard leads
// that group: the tool is started into it (pgid), so it is guarded from its first instant, even
// when it forks at once and this process is killed before it ran another line (a loaded
// machine gave that moment to a SIGKILL when the guard was started after the tool). stop ends
// the guard once the run is over. pgid is 0, with nothing started, when the guard could not be.
// The parent-death signal kills only the tool itself, not its children (LibreOffice's
// soffice.bin under oosplash kept converting for minutes after a SIGKILLed Sluice; issue #16). A
// sandboxed tool needs no guard: its sandbox is a pid namespace that dies with it.
//
// The guard is a shell leading a process group of its own (a kill of Sluice's group spares it),
// blocked reading a pipe whose only writer is this process: when this process dies, however it
// dies, the kernel closes that end, the read returns, and the shell kills its group. When the
// run ends first, the group is killed and the guard with it, before the pipe is closed. While
// the guard lives, the group's number cannot be given to another group.
//
// Without /bin/sh the run goes unguarded; the records ([Records]) still reap the group when an
// engine opens the data dir again.
func startGuard() (pgid int, stop func()) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, func() {}
	}
	cmd := exec.Command("/bin/sh", "-c", `read _; kill -9 0`, "sluice-guard")
	cmd.Stdin = r
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return 0, func() {}
	}
	return cmd.Process.Pid, func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		w.Close()
	}
}

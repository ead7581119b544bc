// Package proctest reads Linux's process table for tests that check what runs on after a
// process is killed: a process is named by its pid and its start time, so that a pid the kernel
// gave to another process is never taken for it.
package proctest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Proc is a process named by its pid and its start time (field 22 of /proc/PID/stat).
type Proc struct {
	Pid   int
	Start string
}

// Stat returns the fields of /proc/PID/stat after the command name: f[0] is field 3 (the
// state), f[1] the parent, f[2] the process group, f[3] the session, f[19] the start time. It
// returns nil for a process that is gone.
func Stat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// Of returns the live process pid (not a zombie).
func Of(pid int) (Proc, bool) {
	f := Stat(pid)
	if len(f) < 20 || f[0] == "Z" {
		return Proc{}, false
	}
	return Proc{Pid: pid, Start: f[19]}, true
}

// Alive reports whether p runs: neither gone nor a zombie nor its pid given to another process.
func (p Proc) Alive() bool {
	q, ok := Of(p.Pid)
	return ok && q.Start == p.Start
}

// Cmdline returns p's command line, its arguments separated by NUL bytes.
func (p Proc) Cmdline() string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/cmdline")
	return string(b)
}

// String describes p for a test's message: its pid, its parent and its command line.
func (p Proc) String() string {
	f := Stat(p.Pid)
	ppid := "?"
	if len(f) > 1 {
		ppid = f[1]
	}
	return fmt.Sprintf("pid %d ppid %s: %.200s", p.Pid, ppid, strings.ReplaceAll(p.Cmdline(), "\x00", " "))
}

// Pids returns the pids in /proc.
func Pids() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Children returns the live children of pid.
func Children(pid int) []Proc {
	var out []Proc
	for _, p := range Pids() {
		if f := Stat(p); len(f) > 19 && f[1] == strconv.Itoa(pid) && f[0] != "Z" {
			out = append(out, Proc{Pid: p, Start: f[19]})
		}
	}
	return out
}

// Descendants returns the live processes under pid.
func Descendants(pid int) []Proc {
	parent := map[int]int{}
	procs := map[int]Proc{}
	for _, p := range Pids() {
		f := Stat(p)
		if len(f) < 20 || f[0] == "Z" {
			continue
		}
		parent[p], _ = strconv.Atoi(f[1])
		procs[p] = Proc{Pid: p, Start: f[19]}
	}
	var out []Proc
	for p, pr := range procs {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, pr)
				break
			}
		}
	}
	return out
}

// WithArg returns the live processes with arg in their command line.
func WithArg(arg string) []Proc {
	var out []Proc
	for _, pid := range Pids() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(arg)) {
			continue
		}
		if p, ok := Of(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// StartLeftover starts what an unsandboxed converter left running looks like: a tool (a shell)
// in a process group of its own, with a child (`sleep 600`). Both are killed when the test ends.
// It returns the tool, started, and its child's pid.
func StartLeftover(t testing.TB) (*exec.Cmd, int) {
	t.Helper()
	tool := exec.Command("/bin/sh", "-c", "sleep 600 & echo $!; wait")
	tool.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := tool.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tool.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-tool.Process.Pid, syscall.SIGKILL); _ = tool.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the tool's child: %q", line)
	}
	return tool, child
}

package e2e

import (
	"bufio"
	"bytes"
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

	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/poll"
)

// TestConvertersDieWithSluice SIGKILLs `sluice ingest` while a converter runs, sandboxed and
// unsandboxed, and checks that nothing of the converter runs on: no process that was under
// Sluice, and no process naming the data dir (a converter's task dir is in its arguments). The
// converter is a fake soffice that forks a child and waits, as LibreOffice's oosplash does with
// soffice.bin: unsandboxed, the parent-death signal killed only the fake, and its child ran on
// under pid 1 (issue #16), as soffice.bin kept converting.
func TestConvertersDieWithSluice(t *testing.T) {
	doc, err := filepath.Abs(filepath.Join(corpusDir, "files", "LibreOfficeWriter_odt_1.3.odt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(doc); err != nil {
		t.Fatalf("the shared corpus is missing: %v", err)
	}
	bin := t.TempDir()
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := "#!/bin/sh\n# a converter whose child outlives it unless its group is killed\nsleep 600 &\nwait\n"
	if err := os.WriteFile(filepath.Join(bin, "soffice"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"on", "off"} {
		t.Run("sandbox="+mode, func(t *testing.T) {
			data := t.TempDir()
			cmd := runSluice(t.Context(), "ingest", "--data", data, doc)
			cmd.Env = append(os.Environ(), "SLUICE_SANDBOX="+mode, "PATH="+bin+":"+os.Getenv("PATH"))
			// A file, not a pipe: a surviving converter would hold a pipe open and Wait with it.
			logf, err := os.Create(filepath.Join(t.TempDir(), "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer logf.Close()
			cmd.Stdout, cmd.Stderr = logf, logf
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var under []osProc
			t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
			poll.Until(t, 2*time.Minute, "the converter to start", func() (bool, string) {
				under = osDescendants(cmd.Process.Pid)
				if osAnyCmdline(under, "sleep\x00600\x00") {
					return true, ""
				}
				select {
				case err := <-done:
					out, _ := os.ReadFile(logf.Name())
					t.Fatalf("sluice ended (%v) before the converter ran:\n%s", err, out)
				default:
				}
				return false, fmt.Sprintf("%d processes under sluice", len(under))
			})
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done

			var survivors []osProc
			t.Cleanup(func() {
				for _, p := range survivors {
					_ = syscall.Kill(p.pid, syscall.SIGKILL)
				}
			})
			poll.Until(t, 20*time.Second, "the killed sluice's converters to die", func() (bool, string) {
				survivors = survivors[:0]
				for _, p := range under {
					if p.alive() {
						survivors = append(survivors, p)
					}
				}
				for _, p := range osWithArg(data) {
					if !slices.Contains(survivors, p) {
						survivors = append(survivors, p)
					}
				}
				var desc []string
				for _, p := range survivors {
					desc = append(desc, p.describe())
				}
				return len(survivors) == 0, strings.Join(desc, "\n")
			})
		})
	}
}

// TestEngineReapsLeftovers plants the record of a converter left running by a process that is
// gone — the safety net's case: a tool and its child, in a process group of their own — and
// checks that the next engine to open the data dir kills both and says so.
func TestEngineReapsLeftovers(t *testing.T) {
	data := t.TempDir()
	// The dead owner: a process that ran and was waited for.
	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
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
	childPid, _ := strconv.Atoi(strings.TrimSpace(line))
	child, ok := osProcOf(childPid)
	if !ok {
		t.Fatalf("the tool's child %d is gone", childPid)
	}
	f := osStat(tool.Process.Pid)
	if len(f) < 20 {
		t.Fatalf("the tool %d is gone", tool.Process.Pid)
	}
	dir := filepath.Join(data, node.ConvertersDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	rec := fmt.Sprintf(`{"pid":%d,"start":%s,"pgid":%s,"sid":%s,"tool":"planted","owner_pid":%d,"owner_start":1}`,
		tool.Process.Pid, f[19], f[2], f[3], gone.Process.Pid)
	if err := os.WriteFile(filepath.Join(dir, "planted.json"), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	txt := filepath.Join(t.TempDir(), "note.txt")
	if err := os.WriteFile(txt, []byte("a note\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := runSluice(t.Context(), "ingest", "--data", data, "--log-format", "text", txt).CombinedOutput()
	if err != nil {
		t.Fatalf("ingest: %v\n%s", err, res)
	}
	if !bytes.Contains(res, []byte("killed converter left running by a killed process")) || !bytes.Contains(res, []byte("tool=planted")) {
		t.Errorf("the engine did not log the reaping:\n%s", res)
	}
	waited := make(chan error, 1)
	go func() { waited <- tool.Wait() }()
	select {
	case err := <-waited:
		if err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("the planted tool: %v, want killed", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the planted tool still runs 20s after the engine opened the data dir")
	}
	poll.Until(t, 20*time.Second, "the planted tool's child to die", func() (bool, string) {
		return !child.alive(), child.describe()
	})
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("records left: %d", len(left))
	}
}

// osProc is a process named by its pid and start time (field 22 of /proc/PID/stat), so that a
// pid given to another process is never taken for it.
type osProc struct {
	pid   int
	start string
}

// osStat returns the fields of /proc/PID/stat after the command name: f[0] is field 3 (state),
// f[1] the parent, f[2] the process group, f[3] the session, f[19] the start time.
func osStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

func osProcOf(pid int) (osProc, bool) {
	f := osStat(pid)
	if len(f) < 20 || f[0] == "Z" {
		return osProc{}, false
	}
	return osProc{pid: pid, start: f[19]}, true
}

// alive reports whether p runs: neither gone nor a zombie nor its pid given to another process.
func (p osProc) alive() bool {
	q, ok := osProcOf(p.pid)
	return ok && q.start == p.start
}

func (p osProc) describe() string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/cmdline")
	f := osStat(p.pid)
	ppid := "?"
	if len(f) > 1 {
		ppid = f[1]
	}
	return fmt.Sprintf("pid %d ppid %s: %.200s", p.pid, ppid, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
}

func osPids() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// osDescendants returns the live processes under pid.
func osDescendants(pid int) []osProc {
	parent := map[int]int{}
	procs := map[int]osProc{}
	for _, p := range osPids() {
		f := osStat(p)
		if len(f) < 20 || f[0] == "Z" {
			continue
		}
		parent[p], _ = strconv.Atoi(f[1])
		procs[p] = osProc{pid: p, start: f[19]}
	}
	var out []osProc
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

// osWithArg returns the live processes with arg in their command line.
func osWithArg(arg string) []osProc {
	var out []osProc
	for _, pid := range osPids() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(arg)) {
			continue
		}
		if p, ok := osProcOf(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// osAnyCmdline reports whether one of ps has the command line cmdline (NUL-separated).
func osAnyCmdline(ps []osProc, cmdline string) bool {
	for _, p := range ps {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/cmdline")
		if string(b) == cmdline {
			return true
		}
	}
	return false
}

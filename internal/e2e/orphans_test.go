package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/proctest"
)

// TestConvertersDieWithSluice SIGKILLs `sluice ingest` while a converter runs, sandboxed and
// unsandboxed, and checks that nothing of the converter runs on: no process that was under
// Sluice, and no process naming the data dir (a converter's task dir is in its arguments). The
// converter is a fake that forks a child and waits, as LibreOffice's oosplash does with
// soffice.bin: unsandboxed, the parent-death signal killed only the fake, and its child ran on
// under pid 1 (issue #16), as soffice.bin kept converting. The fake stands for soffice (an
// office document, converted by a warm converter) and for chromium (an HTML document, rendered
// by a warm converter too).
func TestConvertersDieWithSluice(t *testing.T) {
	bin := t.TempDir()
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := "#!/bin/sh\n# a converter whose child outlives it unless its group is killed\nsleep 600 &\nwait\n"
	for _, tool := range []string{"soffice", "chromium"} {
		if err := os.WriteFile(filepath.Join(bin, tool), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct{ tool, doc, mode string }{
		{"soffice", "LibreOfficeWriter_odt_1.3.odt", "on"},
		{"soffice", "LibreOfficeWriter_odt_1.3.odt", "off"},
		{"chromium", "testHTML_utf8.html", "on"},
		{"chromium", "testHTML_utf8.html", "off"},
	} {
		doc, err := filepath.Abs(filepath.Join(corpusDir, "files", tt.doc))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(doc); err != nil {
			t.Fatalf("the shared corpus is missing: %v", err)
		}
		mode := tt.mode
		t.Run(tt.tool+"/sandbox="+mode, func(t *testing.T) {
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
			var under []proctest.Proc
			t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
			poll.Until(t, 2*time.Minute, "the converter to start", func() (bool, string) {
				under = proctest.Descendants(cmd.Process.Pid)
				if slices.ContainsFunc(under, func(p proctest.Proc) bool { return p.Cmdline() == "sleep\x00600\x00" }) {
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

			var survivors []proctest.Proc
			t.Cleanup(func() {
				for _, p := range survivors {
					_ = syscall.Kill(p.Pid, syscall.SIGKILL)
				}
			})
			poll.Until(t, 20*time.Second, "the killed sluice's converters to die", func() (bool, string) {
				survivors = survivors[:0]
				for _, p := range under {
					if p.Alive() {
						survivors = append(survivors, p)
					}
				}
				for _, p := range proctest.WithArg(data) {
					if !slices.Contains(survivors, p) {
						survivors = append(survivors, p)
					}
				}
				var desc []string
				for _, p := range survivors {
					desc = append(desc, p.String())
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
	tool, childPid := proctest.StartLeftover(t)
	child, ok := proctest.Of(childPid)
	if !ok {
		t.Fatalf("the tool's child %d is gone", childPid)
	}
	f := proctest.Stat(tool.Process.Pid)
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
		return !child.Alive(), child.String()
	})
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("records left: %d", len(left))
	}
}

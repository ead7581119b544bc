package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
)

// TestSIGTERMDrains sends SIGTERM to a real `sluice run` whose two tasks run a minute: it exits
// within the drain (1s) and a margin, its log says each task was canceled and released, both
// tasks are ready again at their attempt (not spent), and `sluice resume` runs them at once.
func TestSIGTERMDrains(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	mark, goOn := filepath.Join(dir, "started"), filepath.Join(dir, "go")
	wf := filepath.Join(dir, "slow.yaml")
	script := "test -e " + goOn + " && exit 0; echo x >> " + mark + "; exec sleep 60"
	if err := os.WriteFile(wf, []byte("name: slow\nsteps:\n  wait: {action: exec, needs: [start], with: {command: [sh, -c, \""+script+"\"]}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var inputs []string
	for _, name := range []string{"a.txt", "b.txt"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, p)
	}
	const drain = time.Second
	cmd := runSluice(t.Context(), append([]string{"run", "--data", data, "--drain", drain.String(), "--log-format", "text", wf}, inputs...)...)
	cmd.Env = append(os.Environ(), "SLUICE_SANDBOX=off")
	out := &poll.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-exited })
	poll.Until(t, 60*time.Second, "both tasks running", func() (bool, string) {
		b, _ := os.ReadFile(mark)
		return strings.Count(string(b), "x") == 2, out.String()
	})
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(drain + 15*time.Second):
		t.Fatalf("still running %s after SIGTERM with --drain %s:\n%s", time.Since(sent), drain, out.String())
	}
	took := time.Since(sent)
	t.Logf("exited %s after SIGTERM (drain %s)", took.Round(time.Millisecond), drain)
	if took < drain {
		t.Errorf("exited after %s, before the drain of %s ended", took, drain)
	}
	log := out.String()
	for _, want := range []string{"running tasks may finish", "drain ended; canceling the tasks still running"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if n := strings.Count(log, "task canceled by the stop: its lease is released"); n != 2 {
		t.Errorf("%d tasks logged as released, want 2:\n%s", n, log)
	}
	n, err := node.Open(t.Context(), node.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	counts, err := n.Store.TaskCounts(t.Context(), 1)
	n.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range counts {
		if c.State != record.TaskReady || c.Tasks != 2 || c.Retries != 0 {
			t.Errorf("tasks after the stop: %+v, want 2 ready with no attempt spent", c)
		}
	}
	// The next start takes them at once: no lease to wait for.
	if err := os.WriteFile(goOn, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	res, err := runSluice(t.Context(), "resume", "--data", data).CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, res)
	}
	if d := time.Since(begin); d > 20*time.Second {
		t.Errorf("resume took %s: it waited for leases", d)
	}
}

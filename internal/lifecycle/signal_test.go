package lifecycle

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// childEnv carries a SIGTERM/SIGKILL cell's child its orders (childSpec as JSON).
const childEnv = "SLUICE_LIFECYCLE_CHILD"

// signalItems is the size of a signal cell's job: two items done before the signal, the rest in
// flight (or waiting for a slot) when it comes.
const signalItems = 6

// grace is how long a child given SIGTERM lets its running tasks finish, as `sluice serve
// --grace` does.
const grace = 500 * time.Millisecond

type childSpec struct {
	At    where    `json:"at"`
	Path  path     `json:"path"`
	Block []string `json:"block,omitempty"`
}

// testSignal: a node runs the job in a child process; once r0 and r1 are done and the rest are
// in flight, the child gets SIGTERM (it must exit within its grace and a little more, its
// running tasks canceled and their leases released) or SIGKILL. A second child, started at
// once, completes the job: every item has exactly one result, nothing lost, nothing doubled.
func testSignal(t *testing.T, c *cell) {
	held := []string{"r2", "r3", "r4", "r5"}
	first := childSpec{At: c.at, Path: c.path, Block: held}
	sig := syscall.SIGKILL
	if c.op == opSIGTERM {
		sig = syscall.SIGTERM
	}
	// The first child: signaled once two items are done and a held item started.
	ch := startChild(t, first)
	ch.await(t, func(l string) bool {
		return l == "started r2" || l == "started r3" || l == "started r4" || l == "started r5"
	})
	r := reader(t, c.at)
	waitFor(t, r, ch.jobID, wait, "r0 and r1 done", func(v *jobView) bool {
		return v.Items["r0"] != nil && v.Items["r0"].Docs == 1 && v.Items["r1"] != nil && v.Items["r1"].Docs == 1
	})
	signaled := time.Now()
	ch.signal(t, sig)
	if sig == syscall.SIGTERM {
		if took := time.Since(signaled); took > grace+5*time.Second {
			t.Errorf("the child took %s to stop after SIGTERM with a grace of %s", took, grace)
		}
		// Nothing it left may be running: SIGTERM cancels and releases what did not finish.
		v := look(t, r, ch.jobID)
		for _, n := range held {
			if s := v.Items[n].WorkState; s == record.TaskRunning {
				t.Errorf("after SIGTERM item %s's work task is %s, want released", n, s)
			}
		}
	}

	// The restart, with nothing held: it completes the job at once (a lease released by SIGTERM
	// or reclaimed from a killed process is taken again without waiting for it to expire —
	// on PostgreSQL, after the short lease of the dead process).
	again := startChild(t, childSpec{At: c.at, Path: c.path})
	again.await(t, func(l string) bool { return l == "done" })
	again.wait(t)
	v := look(t, r, ch.jobID)
	if v.Job.State != record.JobComplete {
		t.Fatalf("job %s (%s) after the restart, want complete; %s", v.Job.State, v.Job.Error, v)
	}
	for _, n := range names(signalItems) {
		succeeded(t, v, n)
		if it := v.Items[n]; it.WorkState != record.TaskComplete {
			t.Errorf("item %s's work task is %s, want complete", n, it.WorkState)
		}
	}
	summary(t, v, signalItems, map[string]int{})
	if v.Progress.Fraction != 1 {
		t.Errorf("fraction %v, want 1", v.Progress.Fraction)
	}
}

// reader opens the cell's store for reading while children write it.
func reader(t *testing.T, at where) *engine.Engine {
	t.Helper()
	var db store.Store
	var err error
	if at.Driver == "postgres" {
		db, err = enginetest.OpenChildStore(t.Context(), at.Store)
	} else {
		db, err = enginetest.OpenChildStore(t.Context(), "sqlite "+filepath.Join(at.Data, node.DatabaseFile))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := engine.New(engine.Config{Store: db})
	opened(e, db)
	return e
}

type child struct {
	cmd   *exec.Cmd
	lines chan string
	jobID int64
	done  chan error
	seen  []string // the lines read so far
}

// startChild runs this test binary as a child node with the spec, in a process group of its
// own (killed when t ends), and reads the job's id from its first line.
func startChild(t *testing.T, spec childSpec) *child {
	t.Helper()
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 64), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
		close(c.lines)
		c.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for range c.lines {
		}
	})
	c.await(t, func(l string) bool { _, err := fmt.Sscanf(l, "job %d", &c.jobID); return err == nil })
	return c
}

// await reads the child's lines, those read before first, until one satisfies ok.
func (c *child) await(t *testing.T, ok func(string) bool) {
	t.Helper()
	for _, l := range c.seen {
		if ok(l) {
			return
		}
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		select {
		case l, open := <-c.lines:
			if !open {
				t.Fatal("the child exited early")
			}
			c.seen = append(c.seen, l)
			if ok(l) {
				return
			}
		case <-deadline.C:
			t.Fatalf("the child printed nothing expected in %s", wait)
		}
	}
}

// signal sends sig to the child's process group and waits for it to exit.
func (c *child) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if sig == syscall.SIGKILL {
		_ = syscall.Kill(-c.cmd.Process.Pid, sig)
	} else {
		_ = c.cmd.Process.Signal(sig)
	}
	c.wait(t)
}

// wait waits for the child to exit (draining its output), failing t when it does not within
// the cell's wait.
func (c *child) wait(t *testing.T) {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		select {
		case _, open := <-c.lines:
			if !open {
				<-c.done
				return
			}
		case <-deadline.C:
			t.Fatalf("the child did not exit within %s (it hangs)", wait)
		}
	}
}

// runChild is the child: it starts the node, creates (or finds) the job, prints "job ID", a
// line "started NAME" as each item's work or gate starts and "done" once the job ended. On
// SIGTERM it stops as `sluice serve` does: no new leases, running tasks given the grace, then
// canceled and released.
func runChild(spec string) int {
	var s childSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, "child spec:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	lines := make(chan string, 256)
	printed := make(chan struct{})
	go func() {
		defer close(printed)
		for l := range lines {
			fmt.Println(l)
		}
	}()
	b := newBehaviour()
	b.setBlock(s.Block...)
	b.started = func(name string) { lines <- "started " + name }
	err := childRun(ctx, s, b, lines)
	close(lines)
	<-printed
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

func childRun(ctx context.Context, s childSpec, b *behaviour, lines chan<- string) error {
	r, err := startNode(context.Background(), s.At, s.Path, b, grace, true)
	if err != nil {
		return err
	}
	defer r.stop()
	job, err := startJob(ctx, r.n, s.Path.workflow(false, s.Path.gated()), signalItems, s.Path.contents("r0", "r1"))
	if err != nil {
		return err
	}
	lines <- fmt.Sprintf("job %d", job.ID)
	for {
		j, err := r.n.Store.JobGet(ctx, job.ID)
		if err != nil {
			return err
		}
		if j.State != record.JobRunning {
			lines <- "done"
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

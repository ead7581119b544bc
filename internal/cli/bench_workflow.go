package cli

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
)

// The workflows of `sluice bench engine --mode fanout|chain`, made by the bench itself so that
// nothing needs preparing.
//
// fanout: a root whose `split` creates --items children (spawn, counted by the root's metadata),
// a no-op `work` on each child, and a `collect` on the root once its children are done. Each
// step applies only where its `when:` says, so each child also gets two tasks recorded skipped.
//
// chain: --items roots, each running --steps no-op steps one after another.
const benchFanoutYAML = `name: bench-fanout
steps:
  split:   {action: spawn, needs: [start], when: root}
  work:    {action: noop, needs: [start], when: "!root"}
  collect: {action: noop, needs: [children.done], when: root}
`

func benchChainYAML(steps int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: bench-chain-%d\nsteps:\n", steps)
	need := "start"
	for i := 1; i <= steps; i++ {
		fmt.Fprintf(&b, "  s%d: {action: noop, needs: [%s], success: [s%d.done]}\n", i, need, i)
		need = fmt.Sprintf("s%d.done", i)
	}
	return b.String()
}

// benchWorkflow applies the mode's workflow and returns its name and roots; burndown, stream
// and paced run the built-in one-step `bench`.
func benchWorkflow(ctx context.Context, e *engine.Engine, o benchOpts) (string, []engine.Root, error) {
	var src string
	var roots []engine.Root
	switch o.mode {
	case "fanout":
		src = benchFanoutYAML
		roots = []engine.Root{{Name: "root", Size: 1, Metadata: map[string]any{"children": o.items}}}
	case "chain":
		src = benchChainYAML(o.steps)
		roots = make([]engine.Root, o.items)
		for i := range roots {
			roots[i] = engine.Root{Ordinal: i, Name: fmt.Sprintf("item-%d", i), Size: 1}
		}
	default:
		if err := builtin.Apply(ctx, e, "bench"); err != nil {
			return "", nil, err
		}
		roots = make([]engine.Root, o.tasks)
		for i := range roots {
			roots[i] = engine.Root{Ordinal: i, Name: fmt.Sprintf("item-%d", i), Size: 1}
		}
		return "bench", roots, nil
	}
	wf, _, err := e.ApplyWorkflow(ctx, []byte(src), "bench.yaml")
	if err != nil {
		return "", nil, fmt.Errorf("apply the %s bench workflow: %w", o.mode, err)
	}
	return wf.Name, roots, nil
}

// benchCounts fills the result's task and item counts from the job's tasks: every task row,
// those that ran, and the attempts beyond the first (a lost or repeated attempt shows there).
func benchCounts(ctx context.Context, s store.Store, jobID int64, res *benchResult) error {
	counts, err := s.TaskCounts(ctx, jobID)
	if err != nil {
		return err
	}
	res.Tasks, res.TasksRun, res.Retries = 0, 0, 0
	for _, c := range counts {
		res.Tasks += c.Tasks
		res.Retries += c.Retries
		switch c.State {
		case store.TaskComplete:
			res.TasksRun += c.Tasks
		case store.TaskSkipped:
		default:
			return fmt.Errorf("bench job has %d tasks %s (%s)", c.Tasks, c.State, c.Action)
		}
	}
	return nil
}

// clockTick is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// procCPU is the CPU time (user + system) the process pid has used, from /proc.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// The fields after the command, which is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * clockTick
}

// postgresCPU is the CPU time used so far by this machine's postgres backends connected to
// the database db (their command line reads "postgres: … USER DB HOST …"): the database's share
// of a bench against a server on the same machine, without other databases' load. Backends
// that exit in between take theirs with them.
func postgresCPU(db string) time.Duration {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var total time.Duration
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmd), " "+db+" ") {
			continue
		}
		total += procCPU(pid)
	}
	return total
}

// dbName is the database a postgres:// URL names.
func dbName(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(u.Path, "/")
}

// workerProcs are `sluice worker` processes on the bench's schema (--processes).
type workerProcs []*exec.Cmd

// startWorkerProcs starts n `sluice worker --database URL` processes (this executable) and
// waits until each says it runs.
func startWorkerProcs(ctx context.Context, n int, url, dir string) (workerProcs, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var ps workerProcs
	for i := range n {
		data := filepath.Join(dir, fmt.Sprintf("worker-%d", i))
		cmd := exec.CommandContext(ctx, self, "worker", "--database", url, "--data", data)
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 30 * time.Second
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			ps.stop()
			return nil, fmt.Errorf("start worker process %d: %w", i, err)
		}
		ps = append(ps, cmd)
		sc := bufio.NewScanner(stderr)
		running := false
		var last string
		for sc.Scan() {
			last = sc.Text()
			if strings.HasPrefix(last, "worker ") && strings.Contains(last, " running") {
				running = true
				break
			}
		}
		if !running {
			ps.stop()
			return nil, fmt.Errorf("worker process %d ended before it ran: %s", i, last)
		}
		go func() { // keep its stderr drained
			for sc.Scan() {
			}
		}()
	}
	return ps, nil
}

// cpu is the CPU time the processes have used so far.
func (ps workerProcs) cpu() time.Duration {
	var t time.Duration
	for _, c := range ps {
		t += procCPU(c.Process.Pid)
	}
	return t
}

// stop asks each process to stop (SIGTERM) and waits for it.
func (ps workerProcs) stop() {
	for _, c := range ps {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range ps {
		_ = c.Wait()
	}
}

// withSchema adds sluice_schema=schema to a postgres:// URL.
func withSchema(dsn, schema string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	q.Set("sluice_schema", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
